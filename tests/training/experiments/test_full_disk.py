"""A disk that fills while `compare` or `train` records: one line, nothing lost, a clean stop.

The commands run in a child process under a file size limit (``RLIMIT_FSIZE``: the
kernel refuses a write past it as it refuses one on a full disk, with ``EFBIG``
for ``ENOSPC``; the store reports both the same way).
"""

import re
import resource
import subprocess
import sys

import psutil
import pytest

from feedbackgym.datasets import TrajectoryStore

pytest.importorskip("h5py")
pytest.importorskip("torch")

LIMIT = 300_000
"""Bytes a file may grow to: a few dozen episodes' log."""
RUN = ["--n-envs", "4", "--n-steps", "256", "--eval-episodes", "2", "--record", "--device", "cpu"]


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def _record(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "feedbackgym", *args, *RUN],
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=_limited,
    )


def _check_stopped_cleanly(result: subprocess.CompletedProcess[str], store_dir) -> None:
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    found = re.search(
        r"error: cannot write the log (\S+): the file size limit is reached .*This episode "
        r"\(([\d,]+) bytes\) was not stored in the store (\S+); the (\d+) episode\(s\) in "
        r"sealed segments and (\d+) in logs stay readable",
        line,
    )
    assert found, line
    log, needed, store, sealed, logged = found.groups()
    assert store == str(store_dir) and log.startswith(store) and int(needed.replace(",", "")) > 0
    kept = int(sealed) + int(logged)
    # nothing lost: what the line counts is there (envs still stepping may add smaller ones)
    assert 0 < kept <= len(TrajectoryStore(store_dir).episodes())
    verify = subprocess.run(
        [sys.executable, "-m", "feedbackgym", "datasets", "verify", str(store_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    left = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if str(store_dir.parent) in " ".join(p.info["cmdline"] or [])
    ]
    assert not left  # no run, worker or writer outlives the command


def test_train_stops_with_one_line_when_the_disk_fills(tmp_path):
    out = tmp_path / "run"
    result = _record(
        "train", "--env", "feedbackgym/OpsIncidentEasy-v1", "--arm", "shaping",
        "--steps", "16384", "--out", str(out),
    )  # fmt: skip
    _check_stopped_cleanly(result, out / "trajectories")


def test_compare_stops_with_one_line_when_the_disk_fills(tmp_path):
    result = _record(
        "compare", "--env", "feedbackgym/OpsIncidentEasy-v1", "--arms", "shaping",
        "--seeds", "1", "--steps", "16384", "--out", str(tmp_path),
    )  # fmt: skip
    _check_stopped_cleanly(result, tmp_path / "runs" / "shaping-seed0" / "trajectories")
