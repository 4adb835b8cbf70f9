"""The whole stack on every suite, in a 2-worker subprocess vector env: recorded, no leaks.

(The web suite's case plays a packaged family; the MiniWoB++ pages run on the same driver
and have their own expert tests in tests/envs/web/test_miniwob.py.)

Each suite's env is built by ``feedbackgym.make(id, "guide-then-review+shaping",
record=PATH)`` in each of two ``AsyncVectorEnv`` workers (a browser per worker, a
sandbox per worker), driven by the controller through the vector env and played by
the expert for 50 episodes; then every episode must be in the store (one shard per
worker) with its feedback, and nothing the workers started may be left.
"""

import os
import subprocess

import gymnasium as gym
import numpy as np
import pytest

import feedbackgym
from feedbackgym.control import FeedbackController
from feedbackgym.datasets import TrajectoryStore
from tests.envs.web.processes import browser_processes

EPISODES = 50
SUITES = [
    pytest.param("feedbackgym/OpsIncidentHard-v0", {}, id="ops"),
    pytest.param("feedbackgym/WebForm-v0", {}, id="web", marks=pytest.mark.web),
    pytest.param("feedbackgym/CodeFix-v0", {"difficulty": "easy"}, id="code"),
]


def _containers():
    out = subprocess.run(
        ["docker", "ps", "-q", "--filter", "ancestor=feedbackgym/sandbox"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return set(out.stdout.split())


def _build(env_id, kwargs, path):
    return lambda: feedbackgym.make(env_id, "guide-then-review+shaping", record=path, **kwargs)


@pytest.mark.parametrize("env_id, kwargs", SUITES)
def test_the_stack_records_50_episodes_in_subprocess_workers_and_leaves_nothing(
    env_id, kwargs, tmp_path
):
    if "Web" in env_id:
        from tests.conftest import require
        from tests.envs.web.conftest import chromium_available

        require(chromium_available(), "Chromium (Debian's chromium and the playwright package)")
    containers = _containers()
    path = tmp_path / "store"
    envs = gym.vector.AsyncVectorEnv([_build(env_id, kwargs, str(path))] * 2)
    workers = [p.pid for p in envs.processes]
    controller = FeedbackController(envs=envs)  # the envs keep their arm's settings
    finished = 0
    try:
        envs.reset(seed=0)
        round_ = 0
        while finished < EPISODES:
            _, _, terminated, truncated, _ = envs.step(np.array(envs.call("expert_action")))
            finished += int(np.sum(terminated | truncated))
            if finished >= 10 * (round_ + 1):  # the controller moves the schedule on
                round_ += 1
                controller.update(round_)
    finally:
        envs.close()
    with TrajectoryStore(path) as store:
        episodes = list(store.episodes())
    assert len(episodes) >= EPISODES
    assert len({e.shard for e in episodes}) == 2  # a shard a worker
    assert all(e.phase in ("guide", "fade", "review") for e in episodes)
    assert sum(e.success for e in episodes) >= 0.9 * len(episodes)  # the expert plays
    for pid in workers:  # the workers have exited, and so has what they started
        assert not os.path.exists(f"/proc/{pid}") or not browser_processes(pid)
    assert _containers() <= containers
