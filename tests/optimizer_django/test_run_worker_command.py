"""python manage.py run_worker --once: drive one queued run and say so."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

import optimizer.worker
from optimizer import services
from optimizer.models import RunStatus

from .conftest import SMALL_SEARCH

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_drives_the_queued_run_to_the_end(fake_pipeline, problem, owner, fake_agents_factory, monkeypatch):
    monkeypatch.setattr(optimizer.worker, "default_agents", fake_agents_factory)
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    out = StringIO()
    call_command("run_worker", "--once", stdout=out)
    run.refresh_from_db()
    assert out.getvalue().strip() == "drove one run"
    assert run.status == RunStatus.SUCCEEDED


def test_with_nothing_queued_it_says_so(db):
    out = StringIO()
    call_command("run_worker", "--once", stdout=out)
    assert out.getvalue().strip() == "no queued run"
