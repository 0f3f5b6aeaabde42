"""`manage.py prepare`, which `make run` calls on every start: migrate, roles, first admin, optional steps."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command

from accounts.roles import roles_of

pytestmark = pytest.mark.django_db


def run_prepare(*args: str) -> str:
    out = StringIO()
    call_command("prepare", *args, stdout=out)
    return out.getvalue()


def test_first_prepare_creates_roles_and_an_admin_whose_printed_password_works():
    output = run_prepare("--skip-optional")
    assert Group.objects.filter(name__in=["engineer", "curator", "admin"]).count() == 3
    password = output.split("with password ")[1].split()[0]
    admin = authenticate(username="admin", password=password)
    assert admin is not None and admin.is_superuser
    assert roles_of(admin) == ["engineer", "curator", "admin"]


def test_second_prepare_keeps_the_admin_password_and_prints_no_password():
    first = run_prepare("--skip-optional")
    password = first.split("with password ")[1].split()[0]
    second = run_prepare("--skip-optional")
    assert "password unchanged" in second and "with password" not in second
    assert authenticate(username="admin", password=password) is not None
    assert get_user_model().objects.filter(username="admin").count() == 1


def test_admin_passwords_differ_between_installations():
    first = run_prepare("--skip-optional").split("with password ")[1].split()[0]
    get_user_model().objects.filter(username="admin").delete()
    second = run_prepare("--skip-optional").split("with password ")[1].split()[0]
    assert first != second


def test_optional_steps_that_no_app_provides_are_skipped(monkeypatch):
    monkeypatch.setattr(
        "accelopt_site.management.commands.prepare.OPTIONAL_STEPS", (("load_imaginary_suite", ("x",)),)
    )
    assert "Skipped `load_imaginary_suite`: no app provides it yet." in run_prepare()


def test_optional_steps_that_exist_are_run(monkeypatch):
    monkeypatch.setattr(
        "accelopt_site.management.commands.prepare.OPTIONAL_STEPS", (("bootstrap_roles", ()),)
    )
    output = run_prepare()
    assert output.count("Roles ready") == 2
