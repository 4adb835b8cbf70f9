"""SystemMonitor counts the whole process tree: real child processes, no mocks."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from feedbackgym.training.common.system_metrics import SystemMonitor

BURN = "while True: pass"
# A grandchild that burns: the child only waits on it.
BURN_BELOW = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {BURN!r}])"
HOLD_MB = 100
HOLD = f"import time; data = b'x' * ({HOLD_MB} * 2**20); print('ready', flush=True); time.sleep(60)"


def _spawn(code: str, **kwargs) -> subprocess.Popen:
    """A Python child in its own process group (so its own children are killed with it)."""
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True, **kwargs)


def _kill(child: subprocess.Popen) -> None:
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _tree_cpu_seconds(pid: int) -> float:
    """The CPU time a process and its descendants have used (what the monitor must count)."""
    process = psutil.Process(pid)
    total = 0.0
    for each in (process, *process.children(recursive=True)):
        times = each.cpu_times()
        total += times.user + times.system
    return total


@pytest.mark.parametrize("code", [BURN, BURN_BELOW], ids=["child", "grandchild"])
def test_cpu_of_a_busy_descendant_is_counted(code):
    start = time.perf_counter()
    monitor = SystemMonitor()
    before = monitor.sample()
    child = _spawn(code)
    try:
        deadline = time.monotonic() + 10
        while _tree_cpu_seconds(child.pid) < 0.8 and time.monotonic() < deadline:
            time.sleep(0.1)  # the test process itself stays idle
        burnt = _tree_cpu_seconds(child.pid)
        metrics = monitor.sample()
        wall = time.perf_counter() - start
    finally:
        _kill(child)
    assert burnt >= 0.8
    # The monitor's window lies within [start, now] and it saw at least the CPU burnt
    # before it sampled, which the idle test process's own CPU time could never reach. A
    # bound rather than "> 60": on a loaded machine the child may get less than a core.
    assert metrics["cpu_percent"] * wall / 100 >= burnt
    extra = 2 if code == BURN_BELOW else 1
    assert metrics["processes"] == before["processes"] + extra


def test_memory_of_a_child_is_counted():
    monitor = SystemMonitor()
    child = _spawn(HOLD, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        metrics = monitor.sample()
        own_mb = psutil.Process().memory_info().rss / 2**20
    finally:
        _kill(child)
    assert metrics["rss_mb"] - own_mb > 0.9 * HOLD_MB


def test_children_that_end_between_samples_drop_out():
    monitor = SystemMonitor()
    alone = monitor.sample()
    child = _spawn("import time; time.sleep(60)")
    assert monitor.sample()["processes"] == alone["processes"] + 1
    os.kill(child.pid, signal.SIGKILL)
    time.sleep(0.2)  # killed, not yet waited for: a zombie still in the tree
    zombie = monitor.sample()
    child.wait()
    gone = monitor.sample(steps=10)
    for metrics in (zombie, gone):
        assert math.isfinite(metrics["cpu_percent"]) and metrics["cpu_percent"] >= 0
        assert metrics["rss_mb"] > 0
    assert gone["processes"] == alone["processes"]
    assert gone["steps_per_s"] > 0
