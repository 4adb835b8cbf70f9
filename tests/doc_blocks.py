"""Runs the ``python`` blocks of a docs page, each in a fresh interpreter from the repo root."""

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_python_blocks(text, *, timeout=120, env=None):
    """Runs each ``python`` block of ``text`` in order; returns their stdouts.

    ``env`` adds to the environment. A block that fails fails the test with its stderr.
    """
    outputs = []
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        # Each block in a session of its own: however the test ends (a timeout included),
        # every process the block started (servers, model servers) goes with it.
        process = subprocess.Popen(
            [sys.executable, "-c", block],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        assert process.returncode == 0, stderr
        outputs.append(stdout)
    return outputs
