from __future__ import annotations

from django.contrib import admin

from campaigns.models import Campaign, CampaignEntry


class EntryInline(admin.TabularInline):
    model = CampaignEntry
    extra = 0
    fields = ["position", "problem", "status", "run", "note"]
    readonly_fields = fields


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "platform", "agent", "status", "owner", "created", "finished"]
    list_filter = ["status", "agent", "platform", "is_public"]
    raw_id_fields = ["owner"]
    inlines = [EntryInline]
