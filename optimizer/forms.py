"""The run form: what to optimize, from which kernel, with which agent and search parameters.

It validates input only; `run_arguments()` hands the answers to `optimizer.services.create_run`, the one
path the web page, the API and `manage.py optimize` share (a pasted kernel included).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils.html import format_html

from benchmark import services as benchmark_services
from benchmark.models import Backend, Platform, Problem
from benchmark.services.evaluations import backend_unavailable, platform_unavailable
from engine.platforms.registry import (
    BACKENDS,
    DEFAULT_BACKEND,
    DEFAULT_PLATFORM,
    DEFINITIONS,
    TESTING,
    get_definition,
    platform_choices,
)
from engine.search import BUDGET_FIELDS
from engine.search.config import BEAM, STRATEGIES
from optimizer import conf, services
from optimizer.models import AgentKind, RunStatus

BASELINE = "baseline"
UPLOAD = "upload"

# The form shows the defaults every way of launching a run shares (optimizer.services.RUN_SEARCH_DEFAULTS).
FORM_SEARCH_DEFAULTS: dict[str, int] = services.RUN_SEARCH_DEFAULTS


class ReasonedSelect(forms.Select):
    """A select whose unusable options are disabled, labelled "unavailable" and titled with the reason."""

    def __init__(self, reasons: dict[str, str], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reasons = reasons

    def create_option(self, name: str, value: Any, label: Any, selected: Any, index: int, subindex: int | None = None,
                      attrs: dict[str, Any] | None = None) -> dict[str, Any]:
        option = super().create_option(name, value, label, selected, index, subindex, attrs)
        reason = self.reasons.get(str(value))
        if reason:
            option["attrs"] = {**option["attrs"], "disabled": True, "title": reason}
            option["label"] = f"{label} (unavailable here)"
        return option


class TaggedSelect(ReasonedSelect):
    """A ReasonedSelect whose options carry data-* attributes (`tags`: value -> {name: value}), which the run
    form's script reads to show only the options that fit the chosen problem and platform."""

    def __init__(self, reasons: dict[str, str], tags: dict[str, dict[str, str]], *args: Any, **kwargs: Any) -> None:
        super().__init__(reasons, *args, **kwargs)
        self.tags = tags

    def create_option(self, name: str, value: Any, label: Any, selected: Any, index: int, subindex: int | None = None,
                      attrs: dict[str, Any] | None = None) -> dict[str, Any]:
        option = super().create_option(name, value, label, selected, index, subindex, attrs)
        tags = self.tags.get(str(getattr(value, "value", value)), {})
        option["attrs"] = {**option["attrs"], **{f"data-{key}": item for key, item in tags.items()}}
        return option


def backend_help() -> str:
    """The backend field's help: one sentence, the reasons left to each greyed option's tooltip."""
    return format_html(
        "Greyed-out backends cannot run on this server (hover one for why); the "
        '<a href="{}">operations guide</a> says how to enable them.', reverse("doc", args=["operations"]),
    )


def platform_tags() -> dict[str, dict[str, str]]:
    """Each platform's kernel language, default backend and backends, for the form scripts."""
    return {
        platform.value: {"language": d.language, "default-backend": d.default_backend.value,
                         "backends": " ".join(b.value for b in d.backends)}
        for platform, d in DEFINITIONS.items()
    }


def platform_reasons() -> dict[str, str]:
    return {p.value: reason for p in Platform if (reason := platform_unavailable(p.value))}


def current_generation_field() -> forms.BooleanField:
    """The option to return kernels in the current NKI generation, as the run form and the campaign form offer it."""
    return forms.BooleanField(
        required=False, label="Return kernels in the current NKI generation (NKI 0.6, the nki package)",
        help_text="NKI only. From a legacy neuronxcc.nki kernel too: the agents are told to write NKI 0.6, the offline "
        "agent migrates the kernel first, and a legacy reply is migrated or refused. Neuron SDK 2.28 and later "
        "refuse neuronxcc.nki.",
    )


class AgentModelsAndBudgets(forms.Form):
    """The fields a run and a campaign share: a model per agent role (blank: the server's configured one) and
    the four budgets (blank: no cap)."""

    planner_model = forms.CharField(required=False, label="Planner model")
    executor_model = forms.CharField(required=False, label="Executor model")
    fixer_model = forms.CharField(required=False, label="Fixer model")
    summarizer_model = forms.CharField(required=False, label="Summarizer model")
    max_tokens = forms.IntegerField(min_value=1, required=False, label="Max tokens")
    max_cost_usd = forms.FloatField(min_value=0.0001, required=False, label="Max dollars")
    max_wall_time_s = forms.FloatField(min_value=1, required=False, label="Max wall time (s)")
    max_evaluations = forms.IntegerField(min_value=1, required=False, label="Max evaluations")


class RunForm(AgentModelsAndBudgets):
    problem = forms.ModelChoiceField(queryset=Problem.objects.none(), help_text="Problem and case (shape).")
    start = forms.ChoiceField(
        label="Starting kernel",
        help_text="The problem's baseline, one of your kernels for it, or a new one pasted below.",
    )
    source = forms.CharField(
        label="New kernel source", required=False, widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}),
        help_text="Only used when the starting kernel is “upload new”.",
    )
    platform = forms.ChoiceField(choices=platform_choices, initial=DEFAULT_PLATFORM)
    agent = forms.ChoiceField(choices=AgentKind.choices, initial=AgentKind.OFFLINE)
    iterations = forms.IntegerField(min_value=1, max_value=100, initial=FORM_SEARCH_DEFAULTS["iterations"])
    beam_width = forms.IntegerField(min_value=1, max_value=32, initial=FORM_SEARCH_DEFAULTS["beam_width"])
    plans_per_candidate = forms.IntegerField(
        min_value=1, max_value=32, initial=FORM_SEARCH_DEFAULTS["plans_per_candidate"], label="Plans per kernel"
    )
    samples_per_plan = forms.IntegerField(min_value=1, max_value=8, initial=FORM_SEARCH_DEFAULTS["samples_per_plan"])
    memory_size = forms.IntegerField(
        min_value=0, max_value=64, initial=FORM_SEARCH_DEFAULTS["memory_size"], label="Memory entries shown"
    )
    seed = forms.IntegerField(min_value=0, initial=0)
    strategy = forms.ChoiceField(
        choices=list(STRATEGIES.items()), initial=BEAM, required=False, label="Search strategy",
        help_text="Repeated sampling spends the same budget on independent samples from the start kernel: the "
        "AccelOpt paper's baseline for beam search.",
    )
    mini_first = forms.BooleanField(
        required=False, initial=True, label="Check candidates on the mini shapes first",
        help_text="For a full-size problem with a mini case: a candidate that fails there is not evaluated at full "
        "size (the full-size result is the one that counts). Turn it off for rewrites that fit only the full shapes.",
    )
    current_generation = current_generation_field()
    is_public = forms.BooleanField(required=False, label="Public", help_text="Anyone may watch it, signed in or not.")

    SEARCH_FIELDS = ("iterations", "beam_width", "plans_per_candidate", "samples_per_plan", "memory_size", "seed",
                     "strategy", "mini_first")
    BUDGET_FIELDS = tuple(BUDGET_FIELDS)  # empty: no cap
    MODEL_FIELDS = tuple(f"{role}_model" for role in conf.ROLES)

    def __init__(self, *args: Any, user: Any, problems: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["problem"].queryset = problems
        self.fields["problem"].label_from_instance = lambda p: f"{p.address} — {p.shape_text}" if p.shape_text else p.address
        # The options say what fits them (run_form.js shows only those): a problem its language, a kernel its
        # problem, a platform its language and backends. Without the script every option shows and clean()
        # refuses a mismatch with the same words.
        self.fields["problem"].widget = TaggedSelect({}, {str(p.pk): {"language": p.language} for p in problems})
        self.fields["problem"].widget.choices = self.fields["problem"].choices
        mine = services.own_kernels(user).filter(problem__in=problems).select_related("problem").order_by("-created")[:200]
        self.fields["start"].choices = [
            (BASELINE, "The problem's baseline"),
            (UPLOAD, "Upload new (paste below)"),
        ] + [(str(k.pk), f"{k.display_name} ({k.problem.address}, #{k.pk})") for k in mine]
        self.fields["start"].widget = TaggedSelect({}, {str(k.pk): {"problem": str(k.problem_id)} for k in mine})
        self.fields["start"].widget.choices = self.fields["start"].choices
        default_roles = conf.llm_roles()
        for role in conf.ROLES:
            if role in default_roles:
                self.fields[f"{role}_model"].initial = default_roles[role].model
        # Offered only where they can work (issue 20): the others are shown disabled, with the reason the
        # service would refuse them with (services.llm_unavailable, backend_unavailable).
        self.unavailable = {
            "backend": {b: reason for b in Backend.values if (reason := backend_unavailable(b, DEFAULT_PLATFORM))},
            "platform": platform_reasons(),
            "agent": {AgentKind.LLM.value: reason} if (reason := self._llm_unavailable()) else {},
        }
        self.fields["platform"].widget = TaggedSelect(self.unavailable["platform"], platform_tags())
        self.fields["platform"].widget.choices = self.fields["platform"].choices
        self.fields["backend"] = forms.ChoiceField(
            choices=[(b, label) for b, label in Backend.choices if BACKENDS[b].latency != TESTING], initial=DEFAULT_BACKEND,
            widget=ReasonedSelect(self.unavailable["backend"]), help_text=backend_help(),
        )
        self.fields["agent"].widget = ReasonedSelect(self.unavailable["agent"])
        self.fields["agent"].widget.choices = self.fields["agent"].choices
        for name in ("platform", "agent"):
            if reasons := self.unavailable[name]:
                self.fields[name].help_text = " ".join(f"{value}: {reason}." for value, reason in reasons.items())
        # A form opened for a Triton problem starts on that problem's platform and backend, not trn1's.
        problem = self.initial.get("problem")
        if problem is not None and not self.is_bound and problem.platforms:
            platform = problem.platforms[0]
            self.initial.setdefault("platform", platform.value)
            self.initial.setdefault("backend", get_definition(platform).default_backend.value)

    def _llm_unavailable(self) -> str | None:
        # Models typed into the form count: only an endpoint missing for a role makes the agent unusable.
        typed = {role: str(self.data.get(f"{role}_model") or "").strip() for role in conf.ROLES}
        return services.llm_unavailable({role: model for role, model in typed.items() if model})

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        for name, reasons in self.unavailable.items():
            if data.get(name) in reasons:
                self.add_error(name, reasons[data[name]])
        start, problem = data.get("start"), data.get("problem")
        data["start_kernel"] = None
        if start == UPLOAD and not (data.get("source") or "").strip():
            self.add_error("source", "Paste the kernel source to start from, or choose another starting kernel.")
        elif start not in (BASELINE, UPLOAD, None) and problem is not None:
            kernel = services.own_kernels(self.user).filter(pk=int(start)).first()
            if kernel is None or kernel.problem_id != problem.pk:
                self.add_error("start", f"Kernel #{start} is not one of your kernels for {problem.address}.")
            else:
                data["start_kernel"] = kernel
        if start == BASELINE and problem is not None and problem.baseline_kernel_id is None:
            self.add_error("start", f"{problem.address} has no baseline kernel; upload one to start from.")
        self._check_platform(data, problem)
        return data

    def _check_platform(self, data: dict[str, Any], problem: Any) -> None:
        """The platform must run the problem's kernel language, and the backend that platform's kernels."""
        platform, backend = data.get("platform"), data.get("backend")
        if problem is None or not platform:
            return
        try:
            benchmark_services.check_platform_for(problem, platform)
        except ValidationError as error:
            self.add_error("platform", error)
            return
        supported = get_definition(platform).backends
        if backend and backend not in supported:
            names = ", ".join(b.value for b in supported)
            self.add_error("backend", f"{backend} does not evaluate {platform} kernels; choose one of {names}.")

    def search_params(self) -> dict[str, Any]:
        params = {name: self.cleaned_data[name] for name in self.SEARCH_FIELDS}
        params["strategy"] = params["strategy"] or BEAM  # a form posted without the field: beam search
        return params

    def budget(self) -> dict[str, Any]:
        return {name: self.cleaned_data.get(name) for name in self.BUDGET_FIELDS}

    def role_models(self) -> dict[str, str]:
        return {role: (self.cleaned_data.get(f"{role}_model") or "").strip() for role in conf.ROLES}

    def run_arguments(self) -> dict[str, Any]:
        """The valid form as `services.create_run`'s arguments, after the user."""
        data = self.cleaned_data
        pasted = data["start"] == UPLOAD
        return {
            "problem": data["problem"],
            "start_kernel": data["start_kernel"],
            "start_source": data["source"] if pasted else None,
            "start_name": "uploaded from the run form" if pasted else "",
            "agent": data["agent"],
            "platform": data["platform"],
            "backend": data["backend"],
            "search": self.search_params(),
            "models": self.role_models() if data["agent"] == AgentKind.LLM else None,
            "is_public": data["is_public"],
            "budget": self.budget(),
            "current_generation": data.get("current_generation", False),
        }


class RunFilterForm(forms.Form):
    SCOPES = (("mine", "Mine"), ("team", "Team"), ("public", "Public"))

    scope = forms.ChoiceField(choices=SCOPES, required=False)
    problem = forms.CharField(required=False, help_text="Problem name contains")
    status = forms.ChoiceField(required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["status"].choices = [("", "any status"), *RunStatus.choices]
