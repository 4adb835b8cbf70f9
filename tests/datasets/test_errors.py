"""A full disk or a permission error raises a clear error, and nothing already written is lost.

The writes run in a child process: under a file size limit (``RLIMIT_FSIZE``,
which makes the kernel refuse a write just like a full disk does), and, when
the tests run as root, without the capabilities that let root ignore file
permissions.
"""

import ctypes
import os
import stat
import subprocess
import sys

import pytest

from feedbackgym.datasets import TrajectoryStore

_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2

RECORD = """
import resource, signal, sys
import gymnasium as gym, feedbackgym
from feedbackgym.datasets import StoreError, TrajectoryStore
from feedbackgym.wrappers import RecordTrajectories

path, limit, lock_after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if limit:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
store = TrajectoryStore(path)
env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentHard-v0", obs_mode="both"), store)
finished = 0
try:
    for seed in range(1000):
        if finished == lock_after:
            import os; os.chmod(path, 0o555)
            store.flush()
        env.reset(seed=seed)
        while not env.step(env.unwrapped.expert_action())[2]:
            pass
        finished += 1
except StoreError as error:
    print(finished)
    print(error)
"""


@pytest.fixture
def unprivileged_dir(tmp_path):
    yield tmp_path / "store"
    for sub in tmp_path.rglob("*"):
        if sub.is_dir():
            sub.chmod(stat.S_IRWXU)  # so that pytest can clean up


def _obey_permissions():
    """Runs in the child before exec: a root child loses its power to override permissions."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for capability in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
            if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def _run(path, limit=0, lock_after=-1):
    out = subprocess.run(
        [sys.executable, "-c", RECORD, str(path), str(limit), str(lock_after)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_obey_permissions,
    )
    assert out.returncode == 0, out.stderr
    finished, message = out.stdout.strip().split("\n", 1)
    return int(finished), message


def test_full_disk_keeps_every_finished_episode(unprivileged_dir):
    finished, message = _run(unprivileged_dir, limit=200_000)
    assert finished > 2
    assert "file size limit" in message and "bytes) was not stored in the store" in message
    assert f"{finished} in logs stay readable" in message
    store = TrajectoryStore(unprivileged_dir)
    assert [m.seed for m in store.episodes()] == list(range(finished))
    assert store.recover() == finished  # the log was cut back to whole records
    assert [m.seed for m in store.episodes()] == list(range(finished))


def test_permission_denied_keeps_the_log_for_recovery(unprivileged_dir):
    finished, message = _run(unprivileged_dir, lock_after=3)
    assert finished == 3
    assert "permission denied" in message and "Nothing is lost" in message
    store = TrajectoryStore(unprivileged_dir)
    assert [m.seed for m in store.episodes()] == [0, 1, 2]  # read from the log
    unprivileged_dir.chmod(stat.S_IRWXU)
    assert store.recover() == 3 and not list(unprivileged_dir.glob("*.log"))
    assert len(store) == 3


def test_unwritable_store_fails_at_the_first_episode(unprivileged_dir):
    unprivileged_dir.mkdir(mode=0o555)
    finished, message = _run(unprivileged_dir)
    assert finished == 0 and "permission denied" in message
