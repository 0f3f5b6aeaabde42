"""The campaign form: which problems (a whole suite, or chosen ones), on which platform, with one configuration.

It validates input only; `campaign_arguments()` hands the answers to `campaigns.services.create_campaign`, the
path the page, the API and `manage.py campaign` share. Its defaults are AccelOpt's published configuration.
"""

from __future__ import annotations

from typing import Any

from django import forms

from benchmark.models import DEFAULT_SUITE, Backend
from benchmark.services.evaluations import backend_unavailable
from campaigns.estimates import CampaignScale, campaign_scale
from campaigns.models import BUDGET_FIELDS
from campaigns.services import ACCELOPT_DEFAULTS
from engine.platforms.registry import BACKENDS, DEFAULT_BACKEND, DEFAULT_PLATFORM, TESTING, platform_choices
from engine.search.config import BEAM, CURATED, MEMORY_MODES, STRATEGIES
from optimizer import conf
from optimizer.forms import (
    AgentModelsAndBudgets,
    ReasonedSelect,
    TaggedSelect,
    backend_help,
    current_generation_field,
    platform_reasons,
    platform_tags,
)
from optimizer.models import AgentKind

CASE_LABELS = {"mini": "mini (seconds per evaluation)", "full": "full (the published shapes)"}


class CampaignForm(AgentModelsAndBudgets):
    name = forms.CharField(required=False, max_length=200)
    suite = forms.ChoiceField(required=False, help_text="Every problem of this suite; or choose problems below.")
    problems = forms.MultipleChoiceField(required=False, help_text="Problems to optimize (instead of a suite).")
    case = forms.ChoiceField(initial="mini", help_text="Shapes: mini evaluates in seconds.")
    platform = forms.ChoiceField(choices=platform_choices, initial=DEFAULT_PLATFORM)
    agent = forms.ChoiceField(choices=AgentKind.choices, initial=AgentKind.OFFLINE)
    iterations = forms.IntegerField(min_value=1, max_value=100, initial=ACCELOPT_DEFAULTS["iterations"])
    beam_width = forms.IntegerField(min_value=1, max_value=32, initial=ACCELOPT_DEFAULTS["beam_width"])
    plans_per_candidate = forms.IntegerField(min_value=1, max_value=32, label="Plans per kernel",
                                             initial=ACCELOPT_DEFAULTS["plans_per_candidate"])
    samples_per_plan = forms.IntegerField(min_value=1, max_value=8, initial=ACCELOPT_DEFAULTS["samples_per_plan"])
    rewrites_per_iteration = forms.IntegerField(min_value=0, max_value=64, label="Rewrites kept per iteration",
                                                initial=ACCELOPT_DEFAULTS["rewrites_per_iteration"])
    memory_size = forms.IntegerField(min_value=0, max_value=64, label="Memory entries shown",
                                     initial=ACCELOPT_DEFAULTS["memory_size"])
    strategy = forms.ChoiceField(choices=list(STRATEGIES.items()), initial=BEAM)
    memory_mode = forms.ChoiceField(choices=list(MEMORY_MODES.items()), initial=CURATED, label="Memory shown")
    memory = forms.BooleanField(
        required=False, initial=True, label="Optimization memory",
        help_text="Checked: the Planner is shown memory entries (as “Memory shown” says) and each run adds what it "
        "learns. Unchecked: it is shown none and none are written (the paper's no-memory ablation).")
    seed = forms.IntegerField(min_value=0, initial=0)
    current_generation = current_generation_field()  # every run of the campaign gets it (campaigns.services)
    max_concurrent_runs = forms.IntegerField(required=False, min_value=1, max_value=64, label="Runs at once",
                                             help_text="Default: what the worker drives at once.")
    is_public = forms.BooleanField(required=False, label="Public", help_text="Anyone may watch it.")

    SEARCH_FIELDS = ("strategy", "iterations", "beam_width", "plans_per_candidate", "samples_per_plan",
                     "rewrites_per_iteration", "memory_size", "memory_mode", "seed")
    MODEL_FIELDS = tuple(f"{role}_model" for role in conf.ROLES)

    def __init__(self, *args: Any, problems: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        problems = list(problems)
        suites = sorted({p.suite for p in problems})
        self.fields["suite"].choices = [("", "— chosen problems —")] + [(s, s) for s in suites]
        # A problem by its address without the case (the case field adds it): "silu", "flashinfer/rmsnorm_h128".
        names = sorted({p.slug if p.suite == DEFAULT_SUITE else f"{p.suite}/{p.slug}" for p in problems})
        self.fields["problems"].choices = [(name, name) for name in names]
        self.fields["problems"].widget.attrs["size"] = 10
        cases = sorted({p.case for p in problems} | {"mini"}, key=lambda c: (c not in CASE_LABELS, c))
        self.fields["case"].choices = [(c, CASE_LABELS.get(c, c)) for c in cases]
        self.problem_rows = problems
        # Choices that cannot work on this server are shown disabled with the reason (as on the run form).
        self.unavailable = {
            "backend": {b: reason for b in Backend.values if (reason := backend_unavailable(b, DEFAULT_PLATFORM))},
            "platform": platform_reasons(),
        }
        self.fields["platform"].widget = TaggedSelect(self.unavailable["platform"], platform_tags())
        self.fields["platform"].widget.choices = self.fields["platform"].choices
        self.fields["backend"] = forms.ChoiceField(
            choices=[(b, label) for b, label in Backend.choices if BACKENDS[b].latency != TESTING], initial=DEFAULT_BACKEND,
            widget=ReasonedSelect(self.unavailable["backend"]), help_text=backend_help(),
        )
        for role, spec in conf.llm_roles().items():
            self.fields[f"{role}_model"].initial = spec.model

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        for name, reasons in self.unavailable.items():
            if data.get(name) in reasons:
                self.add_error(name, reasons[data[name]])
        if not data.get("suite") and not data.get("problems"):
            raise forms.ValidationError("Choose a suite or at least one problem.")
        if data.get("suite") and data.get("problems"):
            raise forms.ValidationError("Choose a suite or problems, not both.")
        return data

    def scale(self) -> CampaignScale:
        """How many evaluations the form's settings mean here, and for how long (its defaults when unbound)."""
        data = getattr(self, "cleaned_data", None) or {}

        def value(name: str) -> Any:
            return data[name] if data.get(name) not in (None, "") else self.fields[name].initial

        search = {**ACCELOPT_DEFAULTS, **{name: value(name) for name in
                                          ("iterations", "beam_width", "plans_per_candidate", "samples_per_plan")}}
        case = value("case")
        if data.get("suite"):
            count = sum(1 for p in self.problem_rows if p.suite == data["suite"] and p.case == case)
        else:
            count = len(data.get("problems") or [])
        return campaign_scale(search, problems=count, case=case, backend=value("backend"))

    def campaign_arguments(self) -> dict[str, Any]:
        data = self.cleaned_data
        search = {name: data[name] for name in self.SEARCH_FIELDS if data.get(name) not in (None, "")}
        return {
            "name": data.get("name") or "",
            "suite": data.get("suite") or "",
            "problems": list(data.get("problems") or []),
            "case": data["case"],
            "platform": data["platform"],
            "backend": data["backend"],
            "agent": data["agent"],
            "search": search,
            "models": {role: data.get(f"{role}_model") or "" for role in conf.ROLES} if data["agent"] == AgentKind.LLM
            else {},
            "memory": bool(data.get("memory")),
            "current_generation": bool(data.get("current_generation")),
            "budgets": {name: data.get(name) for name in BUDGET_FIELDS},
            "max_concurrent_runs": data.get("max_concurrent_runs"),
            "is_public": bool(data.get("is_public")),
        }
