"""`make sandbox` says what it will change outside the checkout, and why, before it changes it."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.evaluator.sandbox import setup as sandbox_setup


@pytest.fixture
def open_base() -> Iterator[Path]:
    """A directory every user may traverse (pytest's own tmp dirs are 0700 all the way up)."""
    base = Path(tempfile.mkdtemp(dir="/tmp"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base)


def test_a_private_directory_on_the_way_to_the_interpreter_is_announced_before_its_mode_changes(
        open_base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = open_base / "home"
    interpreter = home / ".pyenv" / "versions" / "3.11"
    interpreter.mkdir(parents=True)
    (home / ".bashrc").write_text("secrets\n")
    os.chmod(home / ".bashrc", 0o644)
    os.chmod(home, 0o700)
    monkeypatch.setattr(sandbox_setup, "paths_the_sandbox_needs", lambda: [str(interpreter)])
    said: list[tuple[str, int]] = []

    def announce(text: str) -> None:  # records the mode the directory had when it was announced
        said.append((text, stat.S_IMODE(os.stat(home).st_mode)))

    changes = sandbox_setup.open_directories(check_only=False, announce=announce)

    assert changes == [f"chmod o+x {home}  (was drwx------, no listing for others)"]
    assert len(said) == 1
    text, mode_then = said[0]
    assert mode_then == 0o700  # said before it changed
    assert f"changing {home} outside the checkout" in text and ".bashrc" in text and "chmod o-x" in text
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o701


def test_check_only_changes_nothing_and_announces_nothing(open_base: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    home = open_base / "home"
    (home / "python").mkdir(parents=True)
    os.chmod(home, 0o700)
    monkeypatch.setattr(sandbox_setup, "paths_the_sandbox_needs", lambda: [str(home / "python")])
    said: list[str] = []
    assert sandbox_setup.open_directories(check_only=True, announce=said.append) == [
        f"chmod o+x {home}  (was drwx------, no listing for others)"]
    assert said == [] and stat.S_IMODE(os.stat(home).st_mode) == 0o700
