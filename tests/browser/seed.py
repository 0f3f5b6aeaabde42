"""Prepare the browser tests' database: migrate, roles, the NKIBench suite (nothing evaluated), people,
one memory entry. Run as `python tests/browser/seed.py` with DATABASE_URL pointing at the test database."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelopt_site.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from accounts.roles import CURATOR, ENGINEER, bootstrap_roles, grant_role  # noqa: E402
from memory.services import add_entry  # noqa: E402

PASSWORD = "correct horse battery staple"

call_command("migrate", interactive=False, verbosity=0)
bootstrap_roles()
call_command("load_suite", "--evaluate", "none", verbosity=0)
users = get_user_model().objects
for name, role in (("erin", ENGINEER), ("tom", ENGINEER), ("cora", CURATOR)):
    user = users.create_user(username=name, password=PASSWORD)
    grant_role(user, role)
add_entry(
    title="Hoist the scale out of the inner loop",
    summary="Multiply once per tile instead of once per element row.",
    slow_kernel="def k(x):\n    for i in range(4):\n        y = x * 2.0\n    return y\n",
    fast_kernel="def k(x):\n    s = 2.0\n    for i in range(4):\n        y = x * s\n    return y\n",
    speedup=1.3, family="elementwise", user=users.get(username="cora"),
)
# A Triton problem with an interpreter result and one of erin's kernels (the run form's filter, the Triton
# result page): rows as the import and the interpreter leave them, so no evaluation has to run.
from benchmark.models import Evaluation, EvaluationStatus, Kernel, KernelOrigin, Problem  # noqa: E402
from benchmark.services import source_sha256  # noqa: E402

TRITON_SOURCE = "import torch\nimport triton\n\n\ndef run(x, y):\n    return 2.0 * x + y\n"
triton = Problem.objects.create(
    suite="flashinfer", slug="studio_axpy_h16", case="workloads", family="elementwise", language="triton",
    reference_source="import torch\n\n\ndef run(x, y):\n    return 2.0 * x + y\n",
    definition={"name": "studio_axpy_h16"}, workloads=[{"definition": "studio_axpy_h16", "workload": {"uuid": "w1"}}],
)
baseline = Kernel.objects.create(problem=triton, source=TRITON_SOURCE, sha256=source_sha256(TRITON_SOURCE),
                                 origin=KernelOrigin.IMPORTED, name="axpy solution", entry_point="main.py::run")
triton.baseline_kernel = baseline
triton.save(update_fields=["baseline_kernel"])
mine = TRITON_SOURCE + "# erin's\n"
Kernel.objects.create(problem=triton, source=mine, sha256=source_sha256(mine), origin=KernelOrigin.UPLOADED,
                      name="erin's axpy", author=users.get(username="erin"), entry_point="main.py::run")
Evaluation.objects.create(
    kernel=baseline, platform="h100", backend="triton-interpreter", backend_version="triton-interpreter-2",
    status=EvaluationStatus.DONE, compiled=True, runnable=True, correct=True, seeds=[11, 22],
    correctness={"relative_l2_errors": [[0.0], [1e-7], [0.0], [2e-7]]},
    profile={"note": "correctness only: no GPU", "workloads": [
        {"uuid": u, "latency_ms": None, "peak_fraction": None, "floor_ms": None, "spread": None}
        for u in ("axpy-b3", "axpy-b8")]},
)
print("seeded")
