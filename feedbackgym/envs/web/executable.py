"""Where the web suite's Chromium is; light (no Playwright), so ``feedbackgym doctor`` can look.

The web envs launch :func:`configured_chromium`: ``FEEDBACKGYM_CHROMIUM``, or
when it is unset Debian's headless shell (``/usr/bin/chromium-headless-shell``,
package ``chromium-headless-shell``) if it is installed, else Debian's full
``/usr/bin/chromium``. The headless shell renders the same pages with about a
third of the CPU a step (``python benchmarks/web_vector.py --browsers``). A Chromium that Playwright
downloaded (``python -m playwright install chromium``, no root needed) works
too once ``FEEDBACKGYM_CHROMIUM`` names it; :func:`playwright_chromiums` finds
those.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "CHROMIUM_ENV",
    "DEFAULT_CHROMIUM",
    "HEADLESS_SHELL",
    "configured_chromium",
    "playwright_chromiums",
]

CHROMIUM_ENV = "FEEDBACKGYM_CHROMIUM"
"""Environment variable naming the Chromium executable."""
HEADLESS_SHELL = "/usr/bin/chromium-headless-shell"
"""Debian's headless-only Chromium: the default when :data:`CHROMIUM_ENV` is unset, if installed."""
DEFAULT_CHROMIUM = "/usr/bin/chromium"
"""Debian's full Chromium: the default when :data:`CHROMIUM_ENV` is unset and no headless shell."""
_PLAYWRIGHT_BROWSERS_ENV = "PLAYWRIGHT_BROWSERS_PATH"


def configured_chromium() -> str:
    """The Chromium executable the web envs launch (it may not exist).

    Example:
        >>> import os
        >>> shell = "/usr/bin/chromium-headless-shell"
        >>> default = shell if Path(shell).is_file() else "/usr/bin/chromium"
        >>> configured_chromium() == os.environ.get("FEEDBACKGYM_CHROMIUM", default)
        True
    """
    configured = os.environ.get(CHROMIUM_ENV)
    if configured:
        return configured
    return HEADLESS_SHELL if Path(HEADLESS_SHELL).is_file() else DEFAULT_CHROMIUM


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
