"""The kernel page's evaluations table follows the result panel: when the polled panel comes back finished,
it also replaces that evaluation's row (htmx out-of-band), which otherwise still said "running"."""

from __future__ import annotations

from django.urls import reverse
from django.utils import timezone

from benchmark import services
from benchmark.models import Evaluation, EvaluationStatus


def test_the_finished_fragment_replaces_the_tables_result_cell(client, fake_pipeline, silu_mini):
    evaluation = Evaluation.objects.create(
        kernel=silu_mini.baseline_kernel, platform="trn1", backend="simulator",
        backend_version=services.backend_version("simulator"), status=EvaluationStatus.RUNNING, started=timezone.now(),
    )
    page = client.get(silu_mini.baseline_kernel.get_absolute_url()).content.decode()
    assert f'<span id="evaluation-{evaluation.pk}-result">' in page and "running" in page
    url = reverse("benchmark:evaluation_fragment", args=[evaluation.pk])
    assert "hx-swap-oob" not in client.get(url, headers={"HX-Request": "true"}).content.decode()
    services.save_result(evaluation.pk, fake_pipeline(platform="trn1", backend="simulator"))
    done = client.get(url, headers={"HX-Request": "true"}).content.decode()
    cell = done[done.index(f'id="evaluation-{evaluation.pk}-result" hx-swap-oob="true"'):]
    assert "running" not in cell and "of peak" in cell
