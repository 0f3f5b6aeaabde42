"""Keep `is_staff` in step with the admin role, so whoever is put in the admin group can open /admin/."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import m2m_changed

from accounts.roles import ADMIN


def sync_staff_flag(sender: Any, instance: Any, action: str, reverse: bool, **kwargs: Any) -> None:
    if reverse or action not in {"post_add", "post_remove", "post_clear"}:
        return  # changes made from the Group side are rare (the admin edits users); not worth a query per member
    is_admin_member = instance.groups.filter(name=ADMIN).exists()
    wanted = instance.is_superuser or is_admin_member
    # Only ever switch staff on for admins, and off for people leaving the admin role: someone made staff
    # by hand for another reason keeps it.
    if wanted and not instance.is_staff:
        instance.is_staff = True
    elif not wanted and instance.is_staff and action != "post_add":
        instance.is_staff = False
    else:
        return
    instance.save(update_fields=["is_staff"])


def connect() -> None:
    m2m_changed.connect(
        sync_staff_flag, sender=get_user_model().groups.through, dispatch_uid="accounts-staff-sync"
    )
