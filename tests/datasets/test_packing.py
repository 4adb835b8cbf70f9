"""The packer copies observation arrays into rows as they come, and sorts out misfits."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from feedbackgym.datasets import TrajectoryStore
from feedbackgym.datasets._storage.packing import Packer
from feedbackgym.datasets.builder import EpisodeBuilder
from feedbackgym.datasets.columns import flatten_values
from feedbackgym.wrappers import RecordTrajectories


def _columns(values):
    """What the builder records for ``values`` as observations (first one: the reset)."""
    builder = EpisodeBuilder(values[0], {}, task_id="t", round="0", seed=0, start_time=0.0)
    for value in values[1:]:
        builder.add(0, value, 0.0, False, False, {})
    return builder.build(end_time=1.0).columns


def _assert_like_flatten(values):
    columns = _columns(values)
    expected = flatten_values("observations", values)
    assert set(columns) >= set(expected)
    for name, column in expected.items():
        assert columns[name].dtype == column.dtype, name
        np.testing.assert_array_equal(columns[name], column, err_msg=name)


def _obs(step, **changes):
    obs = {
        "a": np.full(3, step, np.float32),
        "n": step,
        "t": f"step {step}",
        "d": {"x": np.full((2, 2), step, np.int8), "y": (np.int64(step), np.arange(2) + step)},
    }
    return {**obs, **changes}


def test_rows_that_fit_record_like_their_columns():
    _assert_like_flatten([_obs(i) for i in range(5)])


@pytest.mark.parametrize(
    "misfit",
    [{"a": np.zeros(3, np.float64)}, {"a": np.arange(6, dtype=np.float32)[::2]}],
    ids=["dtype", "strided"],
)
def test_a_misfit_step_records_as_if_every_step_were_kept(misfit):
    _assert_like_flatten([_obs(0), _obs(1), _obs(2, **misfit), _obs(3)])


@pytest.mark.parametrize(
    ("misfit", "message"),
    [
        ({"a": np.zeros(4, np.float32)}, "inhomogeneous"),
        ({"a": 7.0}, "inhomogeneous"),
        ({"d": {"x": np.zeros((2, 2), np.int8)}}, "lacks 'd/y/0'"),
    ],
    ids=["size", "scalar", "nested-key"],
)
def test_a_step_that_cannot_join_the_others_is_refused(misfit, message):
    values = [_obs(0), _obs(1), _obs(2, **misfit)]
    with pytest.raises(ValueError, match=message):
        flatten_values("observations", values)
    with pytest.raises(ValueError, match=message):
        _columns(values)


def test_a_packer_is_reused_only_for_values_of_its_structure():
    packer = Packer("observations", _obs(0))
    assert packer.fits(_obs(1))
    assert not packer.fits({**_obs(1), "extra": 1})
    assert not packer.fits({**_obs(1), "a": np.zeros(3, np.float64)})
    assert not packer.fits({**_obs(1), "n": {"nested": 1}})
    first = EpisodeBuilder(_obs(0), {}, task_id="t", round="0", seed=0, start_time=0.0)
    second = EpisodeBuilder(
        {**_obs(0), "extra": 5},
        {},
        task_id="t",
        round="0",
        seed=0,
        start_time=0.0,
        packer=first.packer,
    )
    assert second.packer is not first.packer
    second.add(0, {**_obs(1), "extra": 6}, 0.0, True, False, {})
    assert second.build(end_time=1.0).columns["observations/extra"].tolist() == [5, 6]


class ReusedBufferEnv(gym.Env):
    """Writes every observation into the same arrays (as vectorised simulators do)."""

    observation_space = spaces.Dict(
        {"x": spaces.Box(0, 100, (4,), np.float32), "k": spaces.Discrete(100)}
    )
    action_space = spaces.Discrete(2)

    def __init__(self):
        self._obs = {"x": np.zeros(4, np.float32), "k": 0}
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._fill(), {}

    def step(self, action):
        self._t += 1
        return self._fill(), 1.0, self._t == 5, False, {}

    def _fill(self):
        self._obs["x"][:] = self._t
        self._obs["k"] = self._t
        return self._obs


def test_the_recorder_copies_observations_an_env_reuses_in_place(store_path):
    env = RecordTrajectories(ReusedBufferEnv(), store_path, task_id="reused")
    for seed in range(2):
        env.reset(seed=seed)
        while not env.step(0)[2]:
            pass
    env.close()
    store = TrajectoryStore(store_path)
    for episode in store.iter_episodes():
        assert episode.observations["x"][:, 0].tolist() == [0, 1, 2, 3, 4, 5]
        assert episode.observations["k"].tolist() == [0, 1, 2, 3, 4, 5]
