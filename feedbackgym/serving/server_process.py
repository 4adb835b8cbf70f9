"""A ``serve-env`` server as a child process: for scripts, docs examples, tests and benchmarks.

Example:
    >>> import json, urllib.request
    >>> with env_server("feedbackgym/OpsIncidentEasy-v1", "--max-sessions", "2") as url:
    ...     json.loads(urllib.request.urlopen(f"{url}/health").read())
    {'status': 'healthy'}
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator

from feedbackgym.errors import FeedbackGymError

__all__ = ["env_server"]


@contextlib.contextmanager
def env_server(env_id: str, *options: str, stop_timeout_s: float = 20.0) -> Iterator[str]:
    """Runs ``feedbackgym serve-env --env ENV_ID --port 0 OPTIONS...``; yields its base URL.

    The server is stopped when the block ends (SIGTERM: every session's env
    is closed; SIGKILL after ``stop_timeout_s``).

    Raises:
        FeedbackGymError: It did not start (its error output is in the message).
    """
    errors = tempfile.TemporaryFile("w+")  # a pipe nobody reads could fill and block the server
    process = subprocess.Popen(
        [sys.executable, "-m", "feedbackgym", "serve-env", "--env", env_id, "--port", "0"]
        + list(options),
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the child exits (empty line) if it cannot start
        if not line.startswith("listening on "):
            process.wait(timeout=stop_timeout_s)
            errors.seek(0)
            raise FeedbackGymError(f"serve-env did not start: {errors.read().strip()}")
        yield line.removeprefix("listening on ").strip()
    finally:
        process.terminate()
        try:
            process.wait(timeout=stop_timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
        errors.close()
