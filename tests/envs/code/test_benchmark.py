"""The sandbox benchmark script runs and prints its table (figures only, no timed asserts)."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.envs.code.conftest import require_backend

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.docker
def test_benchmark_script_runs():
    require_backend("local")
    require_backend("docker")
    done = subprocess.run(
        [sys.executable, "benchmarks/code_sandbox.py", "--runs", "2", "--episodes", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    for row in ("warm reset", "test run", "run / bare", "episodes/s", "bare docker run --rm"):
        assert row in done.stdout
    assert "docker" in done.stdout.splitlines()[0] and "local" in done.stdout.splitlines()[0]
