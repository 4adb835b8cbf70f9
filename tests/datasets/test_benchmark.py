"""The recorder benchmark runs (it prints figures; nothing here is timed)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_recorder_benchmark_runs():
    result = subprocess.run(
        [sys.executable, "benchmarks/recorder.py", "--steps", "300", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    for row in ("raw env", "env + RecordTrajectories", "Minari", "raw h5py", "TrajectoryStore"):
        assert row in result.stdout


def test_recorder_in_training_benchmark_runs():
    result = subprocess.run(
        [
            sys.executable,
            "benchmarks/recorder_in_training.py",
            *("--rounds", "4", "--block", "2", "--num-envs", "2"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert "stack + recorder: +" in result.stdout and "stack + writer process: +" in result.stdout
