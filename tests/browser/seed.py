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
print("seeded")
