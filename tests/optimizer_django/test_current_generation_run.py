"""A run asked to return kernels in the current NKI generation, end to end offline: `manage.py optimize
--current-generation` from NKIBench's legacy silu baseline, through the simulator."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from benchmark.models import Kernel
from engine.platforms.nki.generations import CURRENT, LEGACY
from optimizer.models import Candidate, Run, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_offline_run_from_a_legacy_kernel_writes_only_nki_0_6_kernels_and_its_best_is_one(settings):
    from benchmark.services import load_suite

    settings.ACCELOPT_EVALUATION_INLINE = True
    load_suite("nkibench", evaluate_cases=())
    call_command("optimize", "--problem", "silu:mini", "--iterations", "2", "--beam", "2", "--plans", "3",
                 "--samples", "1", "--current-generation", stdout=StringIO())
    run = Run.objects.order_by("-pk").first()
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    assert run.config["nki_generation"] == CURRENT
    # The run starts from the legacy baseline's migration (its parent), so every kernel of the run is NKI 0.6.
    assert run.start_kernel.nki_generation == CURRENT and run.start_kernel.parent.nki_generation == LEGACY
    written = Kernel.objects.filter(run_id=run.pk)
    assert written.exists() and {kernel.nki_generation for kernel in written} == {CURRENT}
    candidates = Candidate.objects.filter(iteration__run=run)
    assert candidates.filter(kernel__source__contains="import nki.language as nl").exists()
    assert run.best_kernel is not None and run.best_kernel.nki_generation == CURRENT


def test_the_offline_agent_is_refused_a_start_it_cannot_migrate(owner):
    from benchmark.services import create_kernel, load_suite
    from optimizer import services

    load_suite("nkibench", evaluate_cases=())
    silu = Run._meta.apps.get_model("benchmark", "Problem").objects.get(slug="silu", case="mini")
    masked = silu.baseline_kernel.source.replace(
        "tile = nl.load(x[r0:r0 + tile_rows, c0:c0 + tile_cols])",
        "tile = nl.load(x[r0:r0 + tile_rows, c0:c0 + tile_cols], mask=(nl.arange(tile_rows)[:, None] < rows))")
    kernel, _ = create_kernel(silu, masked)
    with pytest.raises(ValidationError, match="offline agent cannot return NKI 0.6 kernels from this start: .*mask="):
        services.create_run(owner, silu, start_kernel=kernel, current_generation=True)
