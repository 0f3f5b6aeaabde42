from __future__ import annotations

from django.contrib import admin

from optimizer.models import AgentCall, Candidate, Iteration, Run, RunEvent


class IterationInline(admin.TabularInline):
    model = Iteration
    extra = 0
    fields = ["index", "status", "best_latency_ms", "best_peak_fraction", "started", "finished"]
    readonly_fields = fields
    show_change_link = True


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "problem", "agent", "platform", "status", "owner", "best_latency_ms", "cost_usd",
                    "created"]
    list_filter = ["status", "agent", "platform", "is_public"]
    raw_id_fields = ["problem", "start_kernel", "best_kernel", "owner"]
    readonly_fields = ["checkpoint", "claimed_by", "heartbeat_at", "next_event_seq", "started", "finished"]
    inlines = [IterationInline]


@admin.register(Iteration)
class IterationAdmin(admin.ModelAdmin):
    list_display = ["run", "index", "status", "best_latency_ms", "started", "finished"]
    raw_id_fields = ["run"]


@admin.register(Candidate)
class CandidateAdmin(admin.ModelAdmin):
    list_display = ["key", "iteration", "status", "correct", "latency_ms", "speedup", "chosen"]
    list_filter = ["status", "correct", "chosen"]
    raw_id_fields = ["iteration", "parent_kernel", "kernel", "evaluation"]


@admin.register(AgentCall)
class AgentCallAdmin(admin.ModelAdmin):
    list_display = ["run", "role", "model", "prompt_tokens", "completion_tokens", "cost_usd", "usable", "error"]
    list_filter = ["role", "usable"]
    raw_id_fields = ["run", "iteration", "candidate"]


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ["run", "seq", "kind", "created"]
    list_filter = ["kind"]
    raw_id_fields = ["run"]
