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


@pytest.fixture(autouse=True, scope="session")
def _sb3_logs_in_a_test_dir(tmp_path_factory):
    """SB3 makes a log folder per ``learn()`` without TensorBoard: keep them out of /tmp."""
    previous = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3_logs"))
    yield
    if previous is None:
        del os.environ["SB3_LOGDIR"]
    else:
        os.environ["SB3_LOGDIR"] = previous
