from __future__ import annotations

from django.contrib import admin

from memory.models import MemoryEntry, MemoryEntryVersion


class MemoryEntryVersionInline(admin.TabularInline):
    model = MemoryEntryVersion
    extra = 0
    can_delete = False
    fields = ["number", "change", "title", "status", "changed_by", "changed_at"]
    readonly_fields = fields


@admin.register(MemoryEntry)
class MemoryEntryAdmin(admin.ModelAdmin):
    list_display = ["title", "polarity", "speedup", "status", "family", "source_kind", "created_at"]
    list_filter = ["status", "polarity", "source_kind", "family"]
    search_fields = ["title", "summary"]
    readonly_fields = ["content_sha256", "source_key", "source_run_id", "source_candidate_id", "created_at"]
    inlines = [MemoryEntryVersionInline]
    fieldsets = [
        (None, {"fields": ["title", "summary", "polarity", "speedup", "status", "problem", "family"]}),
        ("Kernels", {"fields": ["slow_kernel", "fast_kernel"], "classes": ["collapse"]}),
        (
            "Provenance",
            {
                "fields": ["source_kind", "source_label", "source_key", "source_run_id", "source_candidate_id",
                           "created_by", "content_sha256", "created_at"],
                "classes": ["collapse"],
            },
        ),
    ]
