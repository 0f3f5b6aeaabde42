"""Fixtures shared by every test area: people with each role, and API tokens for them.

Roles come from accounts.roles; each fixture user holds exactly the role its name says (plus, because
roles are cumulative, the ones below it).
"""

from __future__ import annotations

import faulthandler
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from accounts.roles import ADMIN, CURATOR, ENGINEER, grant_role
from accounts.services import create_token

TEST_PASSWORD = "correct horse battery staple"

# The slowest test (the calibration refit) takes about four minutes here; one that runs ten is stuck. Its process then prints every thread's
# stack (the test's own frame among them) and exits: a hang costs ten minutes and says where it is, instead
# of running silently into CI's time limit.
HUNG_TEST_SECONDS = 600

# Under pytest-xdist (`make test` runs two workers), the tests of a group run on one worker, one at a time:
# each starts servers heavy enough (Chromium and a daphne; PostgreSQL, Redis and a Ray cluster, which a worker
# starts once per session; the soak's loaded server) that two at once on a 2-core machine would time each out.
XDIST_GROUPS = {"tests/browser/": "browser", "tests/scale/": "servers", "tests/site/test_soak.py": "servers"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        for prefix, group in XDIST_GROUPS.items():
            if path.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    faulthandler.dump_traceback_later(HUNG_TEST_SECONDS, exit=True, file=sys.__stderr__)
    try:
        return (yield)
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    # PBKDF2's deliberate slowness costs ~0.2 s per login; tests need none of it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _no_per_person_quotas(settings: Any) -> None:
    # Tests about other things launch many runs and evaluations as one person; the quota tests
    # (tests/site/test_quotas.py) set the limits they check.
    settings.ACCELOPT_QUOTA_QUEUED_EVALUATIONS = 0
    settings.ACCELOPT_QUOTA_RUNS_IN_FLIGHT = 0


@pytest.fixture
def make_user(db: Any) -> Callable[..., Any]:
    """make_user("ann", role="engineer") -> a saved user whose password is TEST_PASSWORD."""

    def make(username: str, *, role: str | None = None, **fields: Any) -> Any:
        user = get_user_model().objects.create_user(username=username, password=TEST_PASSWORD, **fields)
        if role is not None:
            grant_role(user, role)
        return user

    return make


@pytest.fixture
def viewer(make_user: Callable[..., Any]) -> Any:
    """Signed in, but holding no role: sees what anonymous visitors see."""
    return make_user("vera")


@pytest.fixture
def engineer(make_user: Callable[..., Any]) -> Any:
    return make_user("erin", role=ENGINEER)


@pytest.fixture
def teammate(make_user: Callable[..., Any]) -> Any:
    """A second engineer, for "someone else's object" checks."""
    return make_user("tom", role=ENGINEER)


@pytest.fixture
def curator(make_user: Callable[..., Any]) -> Any:
    return make_user("cora", role=CURATOR)


@pytest.fixture
def site_admin(make_user: Callable[..., Any]) -> Any:
    return make_user("ada", role=ADMIN)


@pytest.fixture
def make_token(db: Any) -> Callable[[Any], str]:
    """make_token(user) -> the plain bearer token (only its digest is stored)."""

    def make(user: Any, name: str = "test client") -> str:
        return create_token(user, name).secret

    return make
