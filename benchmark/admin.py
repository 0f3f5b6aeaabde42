from __future__ import annotations

from django.contrib import admin

from benchmark.models import Evaluation, Kernel, Problem


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ("slug", "case", "suite", "family", "visibility", "owner", "updated")
    list_filter = ("suite", "case", "family", "visibility")
    search_fields = ("slug", "title", "family")
    raw_id_fields = ("baseline_kernel", "owner")


@admin.register(Kernel)
class KernelAdmin(admin.ModelAdmin):
    list_display = ("id", "display_name", "problem", "origin", "author", "run_id", "created")
    list_filter = ("origin", "problem__suite", "problem__case")
    search_fields = ("name", "sha256", "problem__slug")
    list_select_related = ("problem", "author")
    raw_id_fields = ("problem", "parent", "author")
    readonly_fields = ("sha256", "created")


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = (
        "id", "kernel", "platform", "backend", "backend_version", "status", "correct", "error_kind",
        "latency_ms", "peak_fraction", "created",
    )
    list_filter = ("status", "platform", "backend", "error_kind", "correct")
    search_fields = ("kernel__sha256", "kernel__problem__slug", "error_message")
    list_select_related = ("kernel", "kernel__problem")
    raw_id_fields = ("kernel", "requested_by")
    readonly_fields = ("created", "started", "finished")
