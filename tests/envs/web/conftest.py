"""Fixtures of the web-suite tests: real headless Chromium, shared by all of them."""

import importlib.util
from pathlib import Path

import pytest

from tests.conftest import require


def chromium_available() -> bool:
    """Whether Playwright is installed and the Chromium executable exists."""
    from feedbackgym.envs.web.executable import configured_chromium

    executable = configured_chromium()
    return importlib.util.find_spec("playwright") is not None and Path(executable).is_file()


@pytest.fixture(scope="session")
def browser():
    """The process's browser host, kept up for the whole session (fails in CI if missing)."""
    require(chromium_available(), "Chromium (Debian's chromium and the playwright package)")
    from feedbackgym.envs.web.browser import BrowserHost

    host = BrowserHost.acquire()
    yield host
    host.release()


@pytest.fixture
def miniwob(browser):
    """Requires the miniwob package (its task pages)."""
    require(importlib.util.find_spec("miniwob") is not None, "the miniwob package")
    return browser
