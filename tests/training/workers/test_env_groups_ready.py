"""Env workers stepped as they become ready, and the layout slow envs get by default."""

import multiprocessing
import time

import gymnasium as gym
import numpy as np
import pytest

import feedbackgym  # noqa: F401  (registers the ids)
from feedbackgym.training.common.trainer_view import TrainerView
from feedbackgym.training.workers.env_groups import (
    SLOW_ENV_WORKERS,
    EnvWorkers,
    steps_slowly,
    worker_layout,
)
from tests.training.torch_ppo.discount import discounted as _discounted


class _Sleepy(gym.Env):
    """A step takes ``action / 20`` seconds; the observation counts the steps."""

    observation_space = gym.spaces.Box(0, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(20)

    def reset(self, *, seed=None, options=None):
        self._steps = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        time.sleep(int(action) / 20)
        self._steps += 1
        return np.full(1, self._steps, np.float32), 0.0, False, False, {}


def _sleepy():
    return TrainerView(_Sleepy())


def _children():
    return [p for p in multiprocessing.active_children() if p.is_alive()]


def test_the_group_back_first_is_taken_first_and_a_slow_one_holds_up_only_itself():
    envs = EnvWorkers([_sleepy] * 2, groups=2, processes=2)
    try:
        envs.reset(seed=0)
        envs.step_async(0, np.array([10]))  # 0.5 s
        envs.step_async(1, np.array([0]))
        fast = 0
        while True:  # the fast env steps on while the slow one takes its one step
            group, batch = envs.step_wait_any()
            if group == 0:
                break
            fast += 1
            assert int(batch.obs[0, 0]) == fast
            envs.step_async(1, np.array([0]))
        assert fast >= 3 and int(batch.obs[0, 0]) == 1
        assert envs.step_wait_any()[0] == 1
        with pytest.raises(RuntimeError, match="no group is stepping"):
            envs.step_wait_any()
    finally:
        envs.close()
    assert not _children()


def test_one_worker_s_groups_are_waited_for_in_the_order_they_started():
    envs = EnvWorkers([_sleepy] * 2, groups=2, processes=1)
    try:
        envs.reset(seed=0)
        envs.step_async(0, np.array([1]))
        envs.step_async(1, np.array([0]))
        with pytest.raises(RuntimeError, match="wait for group 0 first"):
            envs.step_wait(1)
        with pytest.raises(RuntimeError, match="stepping already"):
            envs.step_async(0, np.array([0]))
        assert [envs.step_wait_any()[0] for _ in range(2)] == [0, 1]
    finally:
        envs.close()
    assert not _children()


def test_slow_suites_get_a_worker_per_env_up_to_four_unless_told_otherwise():
    assert steps_slowly("feedbackgym/CodeFix-v0") and not steps_slowly("feedbackgym/OpsIncident-v0")
    assert worker_layout("feedbackgym/CodeFix-v0", 2, None) == (2, 2)
    assert worker_layout("feedbackgym/CodeFix-v0", 8, None) == (SLOW_ENV_WORKERS, 8)
    assert worker_layout("feedbackgym/CodeFix-v0", 8, 0) == (0, 1)  # told: in the learner
    assert worker_layout("feedbackgym/CodeFix-v0", 8, 2) == (2, 8)
    assert worker_layout("feedbackgym/OpsIncident-v0", 8, None) == (0, 1)
    assert worker_layout("feedbackgym/OpsIncident-v0", 8, 2) == (2, 4)


def _ops():
    return TrainerView(feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", "sparse"))


def test_a_round_collected_as_workers_are_ready_is_the_round_collected_in_turns():
    torch = pytest.importorskip("torch")
    from feedbackgym.training.torch_ppo.ppo import Learner, PPOConfig

    config = PPOConfig(
        env_id="feedbackgym/OpsIncidentEasy-v0", n_envs=3, n_steps=24, net_arch=[8, 8], device="cpu"
    )
    rounds = []
    for processes in (0, 2):  # in workers: group 2 waits for group 0 in its worker
        torch.manual_seed(0)
        envs = EnvWorkers([_ops] * 3, groups=3, processes=processes)
        try:
            learner = Learner(config, envs, _discounted(0.99), torch.device("cpu"))
            learner.reset(0)
            learner.collect()
            buffer = learner.buffer
            rounds.append([a.copy() for a in (buffer.obs, buffer.actions, buffer.rewards)])
        finally:
            envs.close()
    for here, in_workers in zip(*rounds, strict=True):
        assert np.array_equal(here, in_workers)
    assert not _children()


def test_runs_of_slow_suites_step_their_envs_in_worker_processes(tmp_path):
    from feedbackgym.training.common.run_settings import RunConfig, in_worker_processes

    def config(env_id, **kwargs):
        return RunConfig(env_id, "sparse", 0, 64, str(tmp_path), **kwargs)

    assert in_worker_processes(config("feedbackgym/CodeFix-v0"))
    assert in_worker_processes(config("feedbackgym/WebForm-v0", trainer="sb3"))
    assert not in_worker_processes(config("feedbackgym/OpsIncident-v0"))
    assert in_worker_processes(config("feedbackgym/OpsIncident-v0", env_workers=1))
