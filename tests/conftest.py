"""Shared fixtures and the rule for tests that need Chromium or Docker.

Locally, a test whose real dependency is missing skips with the reason. In CI
(``CI=true``) it fails instead: the test command installs and starts what the
tests need, so a missing engine there is a broken set-up, never a skip.
"""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(available: bool, what: str) -> None:
    """Skips (locally) or fails (in CI) when ``what`` is not available."""
    if available:
        return
    message = f"{what} is not available; run `bash scripts/setup.sh` first"
    if IN_CI:
        pytest.fail(f"CI: {message}")
    pytest.skip(message)
