"""Browser tests: Playwright drives Debian's chromium against a real daphne server (the embedded run
worker included) on a free port, with its own SQLite database under a temporary directory.

The server is a subprocess, so the tests reach it only over HTTP and websockets, as a user would; they
need no database access of their own. Every page a test opens collects console errors and uncaught
exceptions, and the test fails if there are any.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]
PASSWORD = "correct horse battery staple"
SCREENSHOTS = Path(os.environ.get("ACCELOPT_SCREENSHOTS", REPO / "var" / "screenshots"))

playwright_sync = pytest.importorskip("playwright.sync_api")
if not Path(CHROMIUM).exists():
    # Only a direct pytest run gets here: `make test` installs chromium first or stops saying how (Makefile).
    pytest.skip(f"browser tests need {CHROMIUM} (apt-get install chromium, or make test)", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_up(url: str, process: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daphne exited with {process.returncode} before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"daphne did not answer {url} within {timeout:.0f} s")


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a daphne server on a fresh, seeded database (ACCELOPT_BROWSER_URL: use that one)."""
    if os.environ.get("ACCELOPT_BROWSER_URL"):
        yield os.environ["ACCELOPT_BROWSER_URL"]
        return
    with seeded_server(tmp_path_factory.mktemp("browser-var")) as base:
        yield base


@contextlib.contextmanager
def seeded_server(var: Path, **settings: str) -> Iterator[str]:
    """A daphne server, started as `make run` starts it, on a fresh database in `var` seeded by seed.py;
    `settings`: ACCELOPT_* values over the defaults below. Yields its base URL."""
    env = {
        **os.environ,
        "ACCELOPT_VAR_DIR": str(var),
        "DATABASE_URL": f"sqlite:///{var / 'browser.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "accelopt_site.settings",
        "ACCELOPT_EMBEDDED_WORKER": "1",
        # The suite's baselines stay unevaluated unless a test evaluates them (the seed loads none); the
        # first-contact test starts a server of its own with the background pass on.
        "ACCELOPT_BACKGROUND_BASELINES": "none",
        "PYTHONUNBUFFERED": "1",
        **settings,
    }
    env.pop("REDIS_URL", None)
    subprocess.run([sys.executable, str(REPO / "tests" / "browser" / "seed.py")], env=env, cwd=REPO, check=True,
                   capture_output=True, timeout=300)
    port = _free_port()
    log = (var / "daphne.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "accelopt_site.asgi:application"],
        env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(f"{base}/healthz", process)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Module scope, not session: Playwright's sync API keeps an asyncio loop on this thread while it is
    # open, and Django refuses ORM calls from a thread with a running loop (the other test areas' tests).
    with playwright_sync.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


class Pages:
    """Opens pages (one browser context per person) and records every console error they raise."""

    def __init__(self, browser: Any, base: str) -> None:
        self.browser, self.base = browser, base
        self.errors: list[str] = []
        self.contexts: list[Any] = []

    def open(self, username: str | None = None) -> Any:
        context = self.browser.new_context(viewport={"width": 1366, "height": 800}, base_url=self.base)
        self.contexts.append(context)
        # The server shares 2 cores with the evaluation children it starts; under CI load a page can take
        # far longer than Playwright's 30 s default, which says nothing about correctness.
        context.set_default_timeout(90_000)
        context.set_default_navigation_timeout(90_000)
        page = context.new_page()
        page.on("console", lambda msg: self.errors.append(f"{page.url}: {msg.text}") if msg.type == "error" else None)
        page.on("pageerror", lambda error: self.errors.append(f"{page.url}: uncaught {error}"))
        if username:
            page.goto("/accounts/login/")
            page.fill("input[name=username]", username)
            page.fill("input[name=password]", PASSWORD)
            page.click("main form button[type=submit]")
            page.wait_for_load_state()
            assert "/accounts/login/" not in page.url, f"could not log in as {username}"
        return page

    def screenshot(self, page: Any, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


@pytest.fixture
def pages(browser: Any, server: str) -> Iterator[Pages]:
    opened = Pages(browser, server)
    yield opened
    for context in opened.contexts:
        context.close()
    assert opened.errors == [], "console errors:\n" + "\n".join(opened.errors)
