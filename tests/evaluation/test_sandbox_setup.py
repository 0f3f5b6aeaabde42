"""The setup step (`make sandbox`) installs bubblewrap, opens only what the sandbox uids need, closes var/ to
other users; and the uid leases.

These tests use directories of their own; the step itself is run on the host by `make sandbox`.
"""

from __future__ import annotations

import os
import stat

import pytest

from engine.evaluator.sandbox import isolation
from engine.evaluator.sandbox.setup import (
    SetupFailed,
    close_var_dir,
    directories_to_open,
    ensure_tools,
    reachable_neighbours,
    uid_range_conflicts,
)
from engine.evaluator.sandbox.user import UIDS_VARIABLE, SandboxUnavailable, lease_uid, uid_range


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_it_finds_each_directory_on_the_way_that_others_cannot_traverse(tmp_path) -> None:
    closed = tmp_path / "home"
    inner = closed / "python" / "bin"
    inner.mkdir(parents=True)
    interpreter = inner / "python3"
    interpreter.write_text("")
    os.chmod(closed, 0o700)
    found = directories_to_open([str(interpreter)])
    assert str(closed) in found
    assert str(inner) not in found and str(closed / "python") not in found  # 0755 already


def test_it_names_what_else_a_newly_traversable_directory_exposes(tmp_path) -> None:
    home = tmp_path / "home"
    (home / ".pyenv" / "bin").mkdir(parents=True)
    (home / ".bashrc").write_text("")
    (home / ".npmrc").write_text("")
    os.chmod(home / ".npmrc", 0o600)
    (home / ".ssh").mkdir(mode=0o700)
    exposed = reachable_neighbours(str(home), [str(home / ".pyenv" / "bin")])
    assert exposed == [".bashrc"]  # not the path it needs, not the files only their owner can read


def test_it_closes_the_var_directory_to_other_users_once(tmp_path, monkeypatch) -> None:
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    os.chmod(var, 0o755)
    monkeypatch.setenv("ACCELOPT_VAR_DIR", str(var))
    assert close_var_dir(check_only=True) and mode_of(var) == 0o755  # --check changes nothing
    assert close_var_dir(check_only=False)
    assert mode_of(var) == 0o750
    assert close_var_dir(check_only=False) == []  # idempotent: nothing left to change


def test_a_missing_bwrap_is_installed_with_apt_get_by_root_and_named_otherwise(monkeypatch) -> None:
    monkeypatch.setattr(isolation, "tools", lambda: {"bwrap": None, "unshare": "/usr/bin/unshare"})
    planned = ensure_tools(root=True, check_only=True)  # --check: says what it would run, runs nothing
    assert planned == ["apt-get update && apt-get install -y --no-install-recommends bubblewrap"]
    with pytest.raises(SetupFailed, match="not root.*make sandbox"):
        ensure_tools(root=False, check_only=False)
    monkeypatch.setattr(isolation, "tools", lambda: {"bwrap": "/usr/bin/bwrap", "unshare": "/usr/bin/unshare"})
    assert ensure_tools(root=True, check_only=False) == []  # present: nothing to do


def test_the_sandbox_uids_must_be_nobodys() -> None:
    assert any("user root" in c for c in uid_range_conflicts(range(0, 1)))
    assert uid_range_conflicts(uid_range()) == []  # the default range is free on this host


def test_a_uid_is_leased_to_one_child_at_a_time_and_can_be_leased_again_once_released(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(UIDS_VARIABLE, "2000000000-2000000001")
    first, second = lease_uid(str(tmp_path)), lease_uid(str(tmp_path))
    assert {first.uid, second.uid} == {2000000000, 2000000001}
    with pytest.raises(SandboxUnavailable, match="all 2 sandbox uids"):
        lease_uid(str(tmp_path))
    first.release()
    third = lease_uid(str(tmp_path))
    assert third.uid == first.uid and third.gid == third.uid
    second.release()
    third.release()
    third.release()  # idempotent


@pytest.mark.parametrize("value", ["5-", "0-100", "60000-70000", "x", "3000000000-3000000001"])
def test_a_uid_range_that_cannot_be_used_is_refused(monkeypatch, value) -> None:
    monkeypatch.setenv(UIDS_VARIABLE, value)
    with pytest.raises(SandboxUnavailable, match=UIDS_VARIABLE):
        uid_range()
