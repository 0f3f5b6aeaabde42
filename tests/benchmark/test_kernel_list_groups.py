"""The kernels list is not flooded by generated kernels (issue 20): they are grouped under their run, one line
each, and uploads stay visible; a group opens the run's kernels."""

from __future__ import annotations

from benchmark.models import Kernel, KernelOrigin
from benchmark.services import source_sha256


def _generated(problem, run_id, n):
    for i in range(n):
        source = f"# generated {run_id}.{i}\n"
        Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source),
                              origin=KernelOrigin.GENERATED, run_id=run_id, name=f"rewrite {run_id}.{i}")


def test_generated_kernels_are_one_line_per_run_and_uploads_stay_listed(client, silu_mini, engineer):
    _generated(silu_mini, 41, 30)
    _generated(silu_mini, 42, 5)
    source = "# my upload\n"
    Kernel.objects.create(problem=silu_mini, source=source, sha256=source_sha256(source), author=engineer,
                          name="erin's upload")
    html = client.get("/kernels/").content.decode()
    assert "erin&#x27;s upload" in html and "rewrite 41.0" not in html
    assert 'data-run="41"' in html and "30 kernels" in html and "5 kernels" in html
    listed = client.get("/kernels/?run=41").content.decode()
    assert "rewrite 41.0" in listed and "rewrite 42.0" not in listed and "erin&#x27;s upload" not in listed


def test_the_generated_filter_still_lists_each_kernel(client, silu_mini):
    _generated(silu_mini, 7, 3)
    html = client.get("/kernels/?origin=generated").content.decode()
    assert all(f"rewrite 7.{i}" in html for i in range(3)) and "generated-groups" not in html
