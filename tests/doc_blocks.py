"""Runs the ``python`` blocks of a docs page, each in a fresh interpreter from the repo root."""

import os
import re
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
        result = subprocess.run(
            [sys.executable, "-c", block],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout)
    return outputs
