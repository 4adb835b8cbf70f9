"""Where the web suite's Chromium is; light (no Playwright), so ``feedbackgym doctor`` can look.

The web envs launch :func:`configured_chromium`: ``FEEDBACKGYM_CHROMIUM``, or
Debian's ``/usr/bin/chromium`` when it is unset. A Chromium that Playwright
downloaded (``python -m playwright install chromium``, no root needed) works
too once ``FEEDBACKGYM_CHROMIUM`` names it; :func:`playwright_chromiums` finds
those.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CHROMIUM_ENV", "DEFAULT_CHROMIUM", "configured_chromium", "playwright_chromiums"]

CHROMIUM_ENV = "FEEDBACKGYM_CHROMIUM"
"""Environment variable naming the Chromium executable."""
DEFAULT_CHROMIUM = "/usr/bin/chromium"
"""Debian's Chromium, used when :data:`CHROMIUM_ENV` is unset."""
_PLAYWRIGHT_BROWSERS_ENV = "PLAYWRIGHT_BROWSERS_PATH"


def configured_chromium() -> str:
    """The Chromium executable the web envs launch (it may not exist).

    Example:
        >>> import os
        >>> configured_chromium() == os.environ.get("FEEDBACKGYM_CHROMIUM", "/usr/bin/chromium")
        True
    """
    return os.environ.get(CHROMIUM_ENV, DEFAULT_CHROMIUM)


def playwright_chromiums() -> list[Path]:
    """The Chromium executables Playwright has downloaded, newest revision first.

    They lie under ``PLAYWRIGHT_BROWSERS_PATH`` (default ``~/.cache/ms-playwright``)
    as ``chromium-REVISION/chrome-linux*/chrome``.

    Example:
        >>> all(path.name == "chrome" for path in playwright_chromiums())
        True
    """
    browsers = os.environ.get(_PLAYWRIGHT_BROWSERS_ENV) or str(
        Path.home() / ".cache" / "ms-playwright"
    )
    found = Path(browsers).glob("chromium-*/chrome-linux*/chrome")
    return sorted((path for path in found if path.is_file()), key=_revision, reverse=True)


def _revision(path: Path) -> int:
    revision = path.parent.parent.name.removeprefix("chromium-")
    return int(revision) if revision.isdigit() else -1
