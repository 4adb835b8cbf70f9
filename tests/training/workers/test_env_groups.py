import multiprocessing

import gymnasium as gym
import numpy as np
import pytest

import feedbackgym
from feedbackgym.training.common.trainer_view import TrainerView
from feedbackgym.training.workers.env_groups import EnvWorkerError, EnvWorkers


def _ops():
    return TrainerView(feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", "review"))


class _Fails(gym.Env):
    """Steps fine until action 1, which raises."""

    observation_space = gym.spaces.Box(0, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        if action == 1:
            raise ValueError("bad action reached the env")
        return np.ones(2, np.float32), 0.5, False, False, {}


def _failing():
    return TrainerView(_Fails())


def _play(envs, steps=40):
    """Random actions (one seeded generator), group by group; every array of every step."""
    rng = np.random.default_rng(0)
    seen = [envs.reset(seed=3).copy()]
    for _ in range(steps):
        actions = rng.integers(0, envs.single_action_space.n, envs.num_envs)
        for group, rows in enumerate(envs.groups):
            envs.step_async(group, actions[rows])
        for group in range(len(envs.groups)):
            batch = envs.step_wait(group)
            seen += [
                a.copy() for a in (batch.obs, batch.reward, batch.terminated, batch.env_reward)
            ]
    return seen


def _children():
    return [p for p in multiprocessing.active_children() if p.is_alive()]


@pytest.mark.parametrize("groups, processes", [(2, 0), (2, 1), (3, 3)])
def test_workers_step_exactly_as_the_envs_do_in_this_process(groups, processes):
    reference = EnvWorkers([_ops] * 4)
    expected = _play(reference)
    reference.close()
    envs = EnvWorkers([_ops] * 4, groups=groups, processes=processes)
    try:
        got = _play(envs)
        stats = envs.call("feedback_stats")
    finally:
        envs.close()
    assert np.array_equal(got[0], expected[0])  # the first observations
    # each step's groups' rows, put together, are the one-group step's rows
    by_step = zip(_by_step(got[1:], groups), _by_step(expected[1:], 1), strict=True)
    assert all(np.array_equal(a, b) for a, b in by_step)
    assert len(stats) == 4 and all("review" in s for s in stats)
    assert not _children()


def _by_step(seen, groups):
    """Per step and array kind, the groups' rows joined."""
    out = []
    for step in range(0, len(seen), 4 * groups):
        chunk = seen[step : step + 4 * groups]
        out += [np.concatenate(chunk[kind::4]) for kind in range(4)]
    return out


def test_an_env_error_in_a_worker_is_raised_with_its_traceback_and_nothing_is_left():
    envs = EnvWorkers([_failing] * 2, groups=2, processes=1)
    envs.reset(seed=0)
    envs.step_async(0, np.zeros(1, np.int64))
    assert envs.step_wait(0).reward.tolist() == [0.5]
    envs.step_async(1, np.ones(1, np.int64))
    with pytest.raises(EnvWorkerError, match="bad action reached the env"):
        envs.step_wait(1)
    envs.step_async(0, np.zeros(1, np.int64))  # the worker serves on after an env's error
    assert envs.step_wait(0).reward.tolist() == [0.5]
    envs.close()
    assert not _children()


def test_a_dead_worker_is_reported_as_such():
    envs = EnvWorkers([_failing] * 2, groups=2, processes=2)
    envs.reset(seed=0)
    envs._processes[1].kill()
    envs._processes[1].join()
    with pytest.raises(EnvWorkerError, match="env worker 1 died"):
        envs.step_async(1, np.zeros(1, np.int64))
        envs.step_wait(1)
    envs.close()
    assert not _children()


def test_bad_layouts_and_waits_are_refused():
    with pytest.raises(ValueError, match="groups"):
        EnvWorkers([_failing] * 2, groups=3)
    with pytest.raises(ValueError, match="processes"):
        EnvWorkers([_failing] * 2, groups=1, processes=2)
    envs = EnvWorkers([_failing] * 2, groups=2)
    with pytest.raises(RuntimeError, match="step_async"):
        envs.step_wait(0)
    envs.close()
