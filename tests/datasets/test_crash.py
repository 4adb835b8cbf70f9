"""``kill -9`` at random moments loses at most the episode in flight and never a file.

A child process records OpsIncident episodes (random actions, a segment sealed
every ~3 episodes, so kills land in log appends, in seals and in the recovery
a new writer runs at start) and counts the episodes whose final ``step()``
returned. Every other kill waits until the child has started sealing a batch
(it flushes every 5 episodes) and strikes within the next few milliseconds.
After each kill the store must hold every counted episode, and at most one
more per kill; every file must open with plain h5py. Set
``FEEDBACKGYM_CRASH_KILLS`` for more kills than the default 24.
"""

import multiprocessing
import os
import random
import signal
import time

import gymnasium as gym
import h5py
import numpy as np

from feedbackgym.datasets import TrajectoryStore
from feedbackgym.wrappers import RecordTrajectories

KILLS = int(os.environ.get("FEEDBACKGYM_CRASH_KILLS", "24"))
SEGMENT_STEPS = 60


def record_until_killed(path, finished, sealing, seed):
    """The child: records forever, counting durable episodes in shared memory."""
    store = TrajectoryStore(path, segment_steps=SEGMENT_STEPS)
    env = RecordTrajectories(gym.make("feedbackgym/OpsIncident-v0"), store)
    rng = random.Random(seed)
    env.reset(seed=seed)
    while True:
        _, _, terminated, truncated, _ = env.step(rng.randrange(70))
        if terminated or truncated:
            finished.value += 1
            if finished.value % 5 == 0:
                sealing.value = 1
                store.flush()
                sealing.value = 0
            env.reset()


def _read_every_dataset(path):
    with h5py.File(path, "r") as file:
        names = []
        file.visit(names.append)
        for name in names:
            if isinstance(file[name], h5py.Dataset):
                file[name][()]


def test_kill_9_at_random_moments(store_path):
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    rng = random.Random(0)
    store = TrajectoryStore(store_path)
    counted = 0
    checked: set = set()
    unsealed = 0
    for kill in range(KILLS):
        finished = context.Value("i", 0, lock=False)
        sealing = context.Value("i", 0, lock=False)
        args = (str(store_path), finished, sealing, kill)
        child = context.Process(target=record_until_killed, args=args)
        child.start()
        if kill % 2:
            deadline = time.monotonic() + 5.0
            while not sealing.value and time.monotonic() < deadline:
                time.sleep(0.0005)
            time.sleep(rng.uniform(0.0, 0.005))
        else:
            time.sleep(rng.uniform(0.0, 0.3))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        counted += finished.value
        unsealed += sum(1 for _ in store_path.glob("*.log"))
        stored = len(store)
        assert counted <= stored <= counted + kill + 1, (kill, counted, stored)
        for path in set(store_path.glob("*.h5")) - checked:
            _read_every_dataset(path)
            checked.add(path)
    before = len(store)
    store.recover()
    assert not list(store_path.glob("*.log")) and len(store) == before
    for path in store_path.glob("*.h5"):
        _read_every_dataset(path)
    for episode in store.iter_episodes():
        ends = episode.terminations | episode.truncations
        assert ends[-1] and not ends[:-1].any()
        assert len(episode.observations["metrics"]) == episode.meta.length + 1
        assert np.isfinite(episode.rewards).all()
    print(
        f"{KILLS} kills ({KILLS // 2} while sealing): {counted} episodes counted, {before} "
        f"stored ({before - counted} finished but not yet counted when killed), 0 lost; "
        f"{unsealed} logs found unsealed after a kill; all files readable"
    )
