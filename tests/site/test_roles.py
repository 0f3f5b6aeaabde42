"""Roles are groups, cumulative from engineer up to admin; bootstrap_roles creates them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from accounts.roles import ROLES, bootstrap_roles, has_role, is_admin, is_curator, is_engineer, roles_of

pytestmark = pytest.mark.django_db


def test_anonymous_and_roleless_accounts_hold_no_role(viewer):
    from django.contrib.auth.models import AnonymousUser

    assert roles_of(AnonymousUser()) == []
    assert roles_of(viewer) == []
    assert not is_engineer(viewer)


def test_each_role_includes_the_ones_below_it(engineer, curator, site_admin):
    assert roles_of(engineer) == ["engineer"]
    assert roles_of(curator) == ["engineer", "curator"]
    assert roles_of(site_admin) == ["engineer", "curator", "admin"]
    assert is_curator(site_admin) and not is_curator(engineer)


def test_superuser_holds_every_role_without_groups(make_user):
    root = make_user("root", is_superuser=True)
    assert roles_of(root) == list(ROLES) and is_admin(root)


def test_deactivated_account_loses_its_roles(engineer):
    engineer.is_active = False
    assert roles_of(engineer) == []


def test_asking_for_an_unknown_role_is_a_programming_error(engineer):
    with pytest.raises(ValueError, match="unknown role 'reviewer'"):
        has_role(engineer, "reviewer")


def test_bootstrap_roles_is_idempotent_and_lets_admins_manage_users():
    assert bootstrap_roles() == ["engineer", "curator", "admin"]
    assert bootstrap_roles() == []
    assert sorted(Group.objects.values_list("name", flat=True)) == ["admin", "curator", "engineer"]
    admin_permissions = set(Group.objects.get(name="admin").permissions.values_list("codename", flat=True))
    assert {"add_user", "change_user", "change_group", "delete_apitoken"} <= admin_permissions
    assert not Group.objects.get(name="engineer").permissions.exists()


def test_joining_the_admin_group_opens_the_django_admin_and_leaving_closes_it(client, site_admin, engineer):
    assert site_admin.is_staff and not engineer.is_staff
    client.force_login(site_admin)
    assert client.get("/admin/auth/user/").status_code == 200
    site_admin.groups.remove(Group.objects.get(name="admin"))
    site_admin.refresh_from_db()
    assert not site_admin.is_staff
    assert client.get("/admin/auth/user/").status_code == 302  # back to the admin login
