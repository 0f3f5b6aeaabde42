"""Problems, kernels and their evaluations: the state behind the benchmark pages, API and CLI.

Models hold state only; evaluating, caching and importing live in `benchmark.services`. Platform, Backend
and ErrorKind are defined once in the pure layer (`engine.platforms.registry`, `engine.evaluator.result`);
the fields here take their choices from them, and they are importable from here too.
"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from engine.evaluator.requirements import CONFIGURATION_LABEL, is_missing_package
from engine.evaluator.result import ErrorKind
from engine.platforms.nki.generations import kernel_generation
from engine.platforms.nki.hardware import UNCALIBRATED
from engine.platforms.registry import (
    DEFAULT_BACKEND,
    DEFAULT_PLATFORM,
    FLASHINFER_FORMAT,
    NKI,
    PREDICTED,
    REFERENCE_FORMAT,
    Backend,
    Platform,
    backend_choices,
    get_backend_definition,
    platform_choices,
    platforms_for,
)

# A problem is addressed as `[SUITE/]SLUG[:CASE]`; without a case the mini one is meant, because it
# evaluates in seconds (the published full shapes take minutes in the simulator).
DEFAULT_SUITE = "nkibench"
DEFAULT_CASE = "mini"
# The suite of the problems users create from their own reference files (private to them).
CUSTOM_SUITE = "custom"


def reference_digest(
    reference_source: str, parameters: dict[str, Any], tolerance: float | None, counts: tuple[Any, Any, Any]
) -> str:
    """What a result was measured against: the reference, its shape parameters, the tolerance and the peak
    counts. A result keeps counting only while its problem still has this digest (`Evaluation.is_stale`)."""
    payload = json.dumps(
        {"reference": reference_source, "parameters": parameters, "tolerance": tolerance, "counts": list(counts)},
        sort_keys=True, default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


class Visibility(models.TextChoices):
    PUBLIC = "public", "Public"
    PRIVATE = "private", "Private (owner only)"


# The kernel language of NKIBench's problems (the languages are the `PlatformDefinition.language` values of
# engine.platforms.registry).
DEFAULT_LANGUAGE = DEFAULT_PLATFORM.definition.language


class Problem(models.Model):
    """One case (shape set) of one problem of one suite, e.g. nkibench/silu:mini.

    A problem of a platform whose problems are FlashInfer-Bench definitions (`is_flashinfer`: Triton's, imported
    from FlashInfer-Bench) holds its FIB definition and its workloads; its reference_source is the definition's
    reference, for the pages.
    """

    suite = models.CharField(max_length=64, default=DEFAULT_SUITE)
    slug = models.SlugField(max_length=100)
    case = models.CharField(max_length=32, default=DEFAULT_CASE)
    family = models.CharField(max_length=64, blank=True)
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    parameters = models.JSONField(default=dict, blank=True)  # shape values, e.g. {"M": 256, "N": 512}
    # NKIBench's reference format: get_inputs(), forward(*inputs), transform_to_nki_inputs(inputs),
    # transform_nki_outputs(outputs, reference).
    reference_source = models.TextField()
    # Counts for the theoretical peak; null when unknown (a user's own reference), so no peak fraction.
    vector_flops = models.BigIntegerField(null=True, blank=True)
    matmul_flops = models.BigIntegerField(null=True, blank=True)
    hbm_bytes = models.BigIntegerField(null=True, blank=True)
    # Where the three counts came from, shown with the peak: the suite, the upload form, or counted from a
    # user's reference (bytes measured, FLOPs not counted); blank for the built-in suites.
    peak_counts_method = models.CharField(max_length=300, blank=True)
    tolerance = models.FloatField(null=True, blank=True)  # null: the evaluation pipeline's default
    # reference_digest() of the reference, parameters, tolerance and counts, kept by save(); evaluations record
    # the one they ran against.
    reference_digest = models.CharField(max_length=64, blank=True, editable=False)
    # Which platforms may evaluate its kernels: those whose definition has this language.
    language = models.CharField(max_length=16, default=DEFAULT_LANGUAGE, db_index=True)
    # FlashInfer-Bench's definition (axes, inputs, outputs, reference) and workloads, as their JSON objects;
    # empty for an NKI problem. The Triton evaluation core (engine.platforms.triton) reads them.
    definition = models.JSONField(default=dict, blank=True)
    workloads = models.JSONField(default=list, blank=True)
    # The suite's current baseline; older baselines stay as kernels when the suite's source changes.
    baseline_kernel = models.ForeignKey(
        "Kernel", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    visibility = models.CharField(max_length=16, choices=Visibility.choices, default=Visibility.PUBLIC)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["suite", "slug", "case"]
        constraints = [
            models.UniqueConstraint(fields=["suite", "slug", "case"], name="benchmark_problem_unique_address"),
        ]

    def __str__(self) -> str:
        return self.address

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.reference_digest = self.current_reference_digest()
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "reference_digest" not in update_fields:
            kwargs["update_fields"] = [*update_fields, "reference_digest"]
        super().save(*args, **kwargs)

    def current_reference_digest(self) -> str:
        reference = self.reference_source
        if self.definition or self.workloads:
            # A Triton problem is measured against its FlashInfer-Bench definition and workloads too (an NKI
            # problem has neither, so its digest is what it always was).
            flashinfer = json.dumps({"definition": self.definition, "workloads": self.workloads}, sort_keys=True)
            reference = f"{reference}\n# flashinfer: {flashinfer}"
        return reference_digest(
            reference, self.parameters, self.tolerance, (self.vector_flops, self.matmul_flops, self.hbm_bytes)
        )

    @property
    def address(self) -> str:
        prefix = "" if self.suite == DEFAULT_SUITE else f"{self.suite}/"
        return f"{prefix}{self.slug}:{self.case}"

    @property
    def platforms(self) -> tuple[Platform, ...]:
        """The platforms that may evaluate its kernels (trn1, trn2 for NKI; h100, h200 for Triton)."""
        return platforms_for(self.language)

    @property
    def default_platform(self) -> Platform:
        return DEFAULT_PLATFORM if DEFAULT_PLATFORM in self.platforms else self.platforms[0]

    @property
    def backends(self) -> tuple[Backend, ...]:
        """The backends that evaluate its kernels on any of its platforms, in their definitions' order."""
        return tuple(dict.fromkeys(b for p in self.platforms for b in p.definition.backends))

    @property
    def default_backend(self) -> Backend:
        return self.default_platform.definition.default_backend

    # What the pages say and show about its language come from its platforms' registrations (a language no
    # registered platform runs any more still names itself, in a reference file's format).
    @property
    def language_name(self) -> str:
        return self.platforms[0].definition.language_name if self.platforms else self.language

    @property
    def problem_format(self) -> str:
        return self.platforms[0].definition.problem_format if self.platforms else REFERENCE_FORMAT

    @property
    def is_flashinfer(self) -> bool:
        """Stored as a FlashInfer-Bench definition with workloads (`definition`, `workloads`), not a reference file:
        evaluated on those workloads, exported as a FlashInfer-Bench solution."""
        return self.problem_format == FLASHINFER_FORMAT

    @property
    def has_peak_counts(self) -> bool:
        return None not in (self.vector_flops, self.matmul_flops, self.hbm_bytes)

    @property
    def peak_counts(self) -> tuple[int, int, int] | None:
        if not self.has_peak_counts:
            return None
        return (self.vector_flops, self.matmul_flops, self.hbm_bytes)

    @property
    def shape_text(self) -> str:
        return " ".join(f"{key}={value}" for key, value in self.parameters.items())

    def get_absolute_url(self) -> str:
        return reverse("benchmark:problem_detail", args=[self.pk])


class KernelOrigin(models.TextChoices):
    BASELINE = "baseline", "Baseline"
    UPLOADED = "uploaded", "Uploaded"
    GENERATED = "generated", "Generated"
    IMPORTED = "imported", "Imported"


class Kernel(models.Model):
    problem = models.ForeignKey(Problem, on_delete=models.CASCADE, related_name="kernels")
    name = models.CharField(max_length=200, blank=True)  # file name or a label such as "baseline"
    source = models.TextField()
    sha256 = models.CharField(max_length=64)
    origin = models.CharField(max_length=16, choices=KernelOrigin.choices, default=KernelOrigin.UPLOADED)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="kernels"
    )
    # The optimization run that wrote it, as that run's id in the app that generated the kernel. A plain id,
    # not a foreign key: a foreign key would make benchmark depend on the optimizer app (dependencies point
    # optimizer -> benchmark). Only the generator registered in benchmark.provenance resolves it.
    run_id = models.PositiveBigIntegerField(null=True, blank=True, db_index=True)
    # A Triton kernel's entry point as FlashInfer-Bench names it ("main.py::run"); blank for NKI, whose
    # kernel function the static check finds.
    entry_point = models.CharField(max_length=200, blank=True)
    # What a FlashInfer-Bench solution said that we do not model (its name, author, description, target
    # hardware, dependencies, source path), so an export gives it back.
    solution_meta = models.JSONField(default=dict, blank=True)
    # Which copy of its source the row is: blank for the first. The same source for the same problem is one row,
    # except where the row holding it is work the one storing it now may not show (another person's private
    # run: benchmark.services.shareable_kernels): then a row of their own, "run:<id>" or "upload".
    scope = models.CharField(max_length=40, blank=True, default="")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            # The same source for the same problem is the same kernel: uploads and generated rewrites dedupe.
            models.UniqueConstraint(fields=["problem", "sha256", "scope"], name="benchmark_kernel_unique_source_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.display_name} ({self.problem.address})"

    @property
    def display_name(self) -> str:
        return self.name or f"kernel {self.sha256[:10]}"

    @cached_property
    def nki_generation(self) -> str | None:
        """An NKI kernel's generation (`engine.platforms.nki.generations`: legacy or current); None otherwise."""
        if self.problem.language != NKI:
            return None
        return kernel_generation(self.source)

    def get_absolute_url(self) -> str:
        return reverse("benchmark:kernel_detail", args=[self.pk])


class EvaluationStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"


class Review(models.TextChoices):
    """A correct result held back from the beam and the leaderboard until a curator decides (blank: never held).

    Held either by the evaluation pipeline (error_kind "suspicious": faster than the theoretical peak,
    invisible work, input-dependent traces) or by an optimization run (a speedup over the parent kernel
    above the run's `suspicious_speedup`; error_kind stays blank, since the result itself was clean).
    """

    HELD = "held", "Held for review"
    ACCEPTED = "accepted", "Accepted by a curator"
    REJECTED = "rejected", "Rejected by a curator"


class EvaluationQuerySet(models.QuerySet):
    def rankable(self) -> EvaluationQuerySet:
        """Results that may be ranked (leaderboard, problem pages, best kernel): see `Evaluation.is_rankable`."""
        return self.fresh().filter(status=EvaluationStatus.DONE, correct=True, latency_ms__isnull=False).filter(
            Q(error_kind="", review="") | Q(error_kind__in=["", ErrorKind.SUSPICIOUS], review=Review.ACCEPTED)
        )

    def fresh(self) -> EvaluationQuerySet:
        """Run against the problem's current reference and parameters (see `Evaluation.is_stale`)."""
        return self.filter(reference_digest=F("kernel__problem__reference_digest"))

    def held(self) -> EvaluationQuerySet:
        return self.filter(review=Review.HELD)


class Evaluation(models.Model):
    """One kernel on one platform and backend; the cache entry for that combination."""

    objects = EvaluationQuerySet.as_manager()

    kernel = models.ForeignKey(Kernel, on_delete=models.CASCADE, related_name="evaluations")
    # Callables: a platform or backend registered after import (engine.platforms.registry) is a valid choice too.
    platform = models.CharField(max_length=16, choices=platform_choices, default=DEFAULT_PLATFORM.value)
    backend = models.CharField(max_length=32, choices=backend_choices, default=DEFAULT_BACKEND.value)
    # For the simulator, the performance-model version: a new model means new numbers, a new cache entry.
    backend_version = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=EvaluationStatus.choices, default=EvaluationStatus.QUEUED)
    compiled = models.BooleanField(null=True)
    runnable = models.BooleanField(null=True)
    correct = models.BooleanField(null=True)
    error_kind = models.CharField(max_length=32, choices=ErrorKind.choices, blank=True)
    error_message = models.TextField(blank=True)
    error_line = models.PositiveIntegerField(null=True, blank=True)
    correctness = models.JSONField(default=dict, blank=True)  # relative L2 error per output and seed
    seeds = models.JSONField(default=list, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    peak_fraction = models.FloatField(null=True, blank=True)
    profile = models.JSONField(default=dict, blank=True)  # neuron-profile summary field names
    timeline = models.JSONField(default=dict, blank=True)  # per-engine busy intervals
    provenance = models.JSONField(default=dict, blank=True)  # versions, platform, seeds: enough to reproduce
    result = models.JSONField(default=dict, blank=True)  # the full EvaluationResult.to_dict()
    wall_time_s = models.FloatField(null=True, blank=True)
    # The problem's reference_digest when this evaluation ran (blank: before digests were kept, so unknown).
    # The cache key does not include it: a changed reference re-runs the same row (request_evaluation).
    reference_digest = models.CharField(max_length=64, blank=True)
    attempts = models.PositiveIntegerField(default=0)  # > 1 when infrastructure errors were retried
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    # When it last entered the executor's queue: its place in line (benchmark.services.queue_places). A row run
    # again keeps `created`, so that cannot say it.
    queued = models.DateTimeField(null=True, blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    # Review of a held result (benchmark.review): why and when it was held, who decided and when.
    review = models.CharField(max_length=16, choices=Review.choices, blank=True)
    held_reason = models.TextField(blank=True)
    held_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            # The cache key: the kernel row stands for (problem, sha256).
            models.UniqueConstraint(
                fields=["kernel", "platform", "backend", "backend_version"],
                name="benchmark_evaluation_cache_key",
            ),
        ]
        indexes = [
            # best_evaluation(): the fastest correct evaluation per platform.
            models.Index(fields=["platform", "correct", "latency_ms"], name="benchmark_eval_best"),
            # The curators' review queue: held results, oldest first.
            models.Index(fields=["review", "held_at"], name="benchmark_eval_review"),
        ]

    def __str__(self) -> str:
        return f"{self.kernel.display_name} on {self.platform}/{self.backend}: {self.outcome}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self._state.adding and not self.reference_digest:
            # A new row is for the problem as it is now; running it records the digest again (_mark_running).
            self.reference_digest = self.kernel.problem.reference_digest
        super().save(*args, **kwargs)

    @property
    def is_pending(self) -> bool:
        return self.status != EvaluationStatus.DONE

    @property
    def is_stale(self) -> bool:
        """Run against another reference, shapes, tolerance or peak counts than the problem has now (or
        before digests were recorded): never ranked, and run again when next requested."""
        return self.reference_digest != self.kernel.problem.reference_digest

    @property
    def uncalibrated(self) -> bool:
        """A simulated latency on a platform no hardware measurement has checked the performance model against
        (engine.platforms.nki.hardware.UNCALIBRATED): the page says so beside the number."""

        return self.is_simulated and self.platform in UNCALIBRATED

    @property
    def is_simulated(self) -> bool:
        """Its latency is a model's prediction (the registry's latency kind of its backend), not a measurement."""
        try:
            return get_backend_definition(self.backend).latency == PREDICTED
        except ValueError:  # a backend no longer registered: say nothing about how it was timed
            return False

    @property
    def breakdown(self) -> dict | None:
        """Where the model's time goes (engine.platforms.nki.perf.explain), kept in `result`; None when the backend
        measured the kernel (nothing explains a measured number) or the result predates it."""
        value = (self.result or {}).get("breakdown") if isinstance(self.result, dict) else None
        return value if isinstance(value, dict) and value.get("path_share") else None

    @property
    def is_held(self) -> bool:
        """Held for review, or rejected by a curator: its number must never read as a plain result."""
        return self.review in (Review.HELD, Review.REJECTED)

    @property
    def is_rankable(self) -> bool:
        """Done, correct, timed and fresh (not `is_stale`), and either never held (no error_kind) or accepted
        by a curator.

        Mirrors `EvaluationQuerySet.rankable`. A suspicious result keeps correct=True and its latency for
        the curator, so `correct` alone never decides.
        """
        if self.status != EvaluationStatus.DONE or not self.correct or self.latency_ms is None or self.is_stale:
            return False
        if self.review == Review.ACCEPTED:
            return self.error_kind in ("", ErrorKind.SUSPICIOUS)
        return not self.error_kind and not self.review

    def hold(self, reason: str) -> None:
        """Put the result in the curators' queue (unsaved: the caller saves within its transaction)."""
        self.review = Review.HELD
        self.held_reason = reason
        self.held_at = timezone.now()

    @property
    def lacks_a_package(self) -> bool:
        """A package missing where evaluations run: a configuration error for the operator to fix, never
        "ours, retried" (engine.evaluator.requirements)."""
        return self.error_kind == ErrorKind.INFRASTRUCTURE_ERROR and is_missing_package(self.error_message)

    def get_error_kind_display(self) -> str:
        """The kind's label; a missing package says so (lacks_a_package)."""
        if self.lacks_a_package:
            return CONFIGURATION_LABEL
        return str(ErrorKind(self.error_kind).label) if self.error_kind in ErrorKind.values else self.error_kind

    @property
    def outcome(self) -> str:
        if self.is_pending:
            return self.get_status_display().lower()
        if self.is_stale:
            return "stale: the problem changed since"
        if self.is_held:
            return self.get_review_display().lower()
        if self.review == Review.ACCEPTED and self.correct:
            return "correct (accepted on review)"
        if self.error_kind:
            return self.get_error_kind_display()
        return "correct" if self.correct else "incorrect"

    def get_absolute_url(self) -> str:
        return reverse("benchmark:kernel_detail", args=[self.kernel_id]) + f"#evaluation-{self.pk}"
