"""The setup step (`make sandbox`) opens only what the sandbox user needs and closes var/ to other users.

These tests use directories of their own; the step itself is run on the host by `make sandbox`.
"""

from __future__ import annotations

import os
import stat

from benchmark.evaluation.sandbox_setup import close_var_dir, directories_to_open, reachable_neighbours


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
