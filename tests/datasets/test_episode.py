"""Columns, the log codec and the HDF5 round trip, over every space type."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from feedbackgym.datasets import TrajectoryStore
from feedbackgym.datasets._storage.codec import (
    concat_encoded,
    decode_encoded,
    decode_episode,
    encode_episode,
    join_encoded,
    record_body,
)
from feedbackgym.datasets.builder import EpisodeBuilder
from feedbackgym.datasets.columns import (
    NEUTRAL,
    compatible,
    flatten_values,
    nest_columns,
    stack_rows,
)
from feedbackgym.datasets.episode import concat_columns
from feedbackgym.wrappers import RecordTrajectories

from .utils import feedback_stack

SPACE = spaces.Dict(
    {
        "box": spaces.Box(-1.0, 1.0, (2, 3), np.float32),
        "discrete": spaces.Discrete(5),
        "binary": spaces.MultiBinary(4),
        "multi": spaces.MultiDiscrete([3, 4]),
        "text": spaces.Text(20, min_length=1, charset="abcé→ ✓"),
        "nested": spaces.Dict({"inner": spaces.Box(0, 255, (2,), np.uint8)}),
        "pair": spaces.Tuple((spaces.Discrete(2), spaces.Box(0.0, 1.0, (1,), np.float64))),
    }
)


class EverySpaceEnv(gym.Env):
    """Samples every observation; a Dict action space; ends after 4 steps."""

    observation_space = SPACE
    action_space = spaces.Dict({"move": spaces.Discrete(3), "force": spaces.Box(-1, 1, (2,))})

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), 0.5, self.t == 4, False, {"is_success": True}


def _same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _same(a[key], b[key])
    elif isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        assert np.asarray(a).tolist() == np.asarray(b).tolist()


def test_every_space_type_round_trips_through_log_and_hdf5(store_path):
    env = RecordTrajectories(EverySpaceEnv(), store_path, task_id="every-space")
    seen = []
    obs, _ = env.reset(seed=3)
    seen.append(obs)
    actions = []
    done = False
    while not done:
        action = env.action_space.sample()
        actions.append(action)
        obs, _, done, _, _ = env.step(action)
        seen.append(obs)
    live = next(TrajectoryStore(store_path).iter_episodes())  # read from the log
    env.close()
    sealed = next(TrajectoryStore(store_path).iter_episodes())
    expected = flatten_values("observations", seen)
    for episode in (live, sealed):
        _same(episode.observations, nest_columns(expected, "observations"))
        _same(episode.actions, nest_columns(flatten_values("actions", actions), "actions"))
        assert episode.observations["text"][0] == seen[0]["text"]  # UTF-8 text intact
        assert episode.meta.task_id == "every-space" and episode.meta.success is True
        assert episode.phases == [""] * 5 and episode.events == []


def test_codec_round_trip_and_neutral_columns(store_path):
    env = RecordTrajectories(EverySpaceEnv(), store_path)
    env.reset(seed=1)
    for _ in range(4):
        env.step(env.action_space.sample())
    episode = next(TrajectoryStore(store_path).iter_episodes())
    env.close()
    encoded = encode_episode(episode)
    for again in decode_episode(b"".join(record_body(encoded))), decode_encoded(encoded):
        assert again.meta == episode.meta
        for name, column in episode.columns.items():
            np.testing.assert_array_equal(again.columns[name], column, err_msg=name)
    bare = type(episode)(
        episode.meta, {n: c for n, c in episode.columns.items() if n not in NEUTRAL}
    )
    assert compatible(bare.schema, episode.schema)
    complete = bare.complete()
    assert complete.columns["env_rewards"].tolist() == episode.rewards.tolist()
    assert np.isnan(complete.columns["schedule/guide_weight"]).all()
    assert len(complete.columns["events/payload"]) == 0


def test_incompatible_episodes_are_refused(store_path):
    store = TrajectoryStore(store_path)
    first = RecordTrajectories(EverySpaceEnv(), store, task_id="t")
    first.reset(seed=0)
    for _ in range(4):
        first.step(first.action_space.sample())
    other = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), store, task_id="t")
    other.reset(seed=0)
    with pytest.raises(ValueError, match="different spaces under different task ids"):
        while True:
            other.step(other.unwrapped.expert_action())
    store.close()
    assert len(store) == 1


STACK_CASES = [
    [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((2, 3), np.float32)],
    [np.zeros(3), np.array([1, 2, 3])],  # float64 then int64: same size, other dtype
    [np.arange(6)[::2], np.arange(3)],  # a non-contiguous row
    [np.array(1.5), np.array(2.5)],  # 0-d rows
    [np.zeros(2, np.int8), np.zeros(3, np.int8)],  # ragged: np.asarray's error
    [np.array(["a", "bc"], object), np.array(["d", "e"], object)],
    [np.zeros(2, np.int8), np.zeros(3, np.int8)[1:]],  # ragged, first row shorter
]


def _stacks_like_asarray(stack, rows):
    try:
        expected = np.asarray(rows)
    except ValueError as error:
        with pytest.raises(ValueError, match=str(error)[:20]):
            stack(rows)
        return
    stacked = stack(rows)
    assert stacked.dtype == expected.dtype
    assert stacked.shape == expected.shape
    np.testing.assert_array_equal(stacked, expected)


@pytest.mark.parametrize("rows", STACK_CASES)
def test_stack_rows_matches_asarray(rows):
    _stacks_like_asarray(stack_rows, rows)


@pytest.mark.parametrize("rows", STACK_CASES)
def test_the_builder_encodes_rows_as_asarray_stacks_them(rows):
    def encode_and_decode(rows):
        builder = EpisodeBuilder({"x": rows[0]}, {}, task_id="t", round="0", seed=0, start_time=0.0)
        builder.add(0, {"x": rows[1]}, 0.0, True, False, {})
        return builder.build(end_time=1.0).columns["observations/x"]

    if np.asarray(rows[0]).dtype == object:
        with pytest.raises(ValueError, match="only numbers and text can be recorded"):
            encode_and_decode(rows)
    else:
        _stacks_like_asarray(encode_and_decode, rows)


def _encoded(env, seeds, keep_info=True):
    """Each seed's episode as the recorder encodes it (random actions; infos kept or not)."""
    encoded = []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        env.action_space.seed(seed)
        info = info if keep_info else {}
        builder = EpisodeBuilder(obs, info, task_id="t", round="0", seed=seed, start_time=0.0)
        done = False
        while not done:
            action = env.action_space.sample()
            obs, reward, terminated, truncated, info = env.step(action)
            info = info if keep_info else {}
            builder.add(action, obs, reward, terminated, truncated, info)
            done = terminated or truncated
        encoded.append(builder.encode(end_time=1.0))
    return encoded


@pytest.mark.parametrize("make", [EverySpaceEnv, feedback_stack], ids=["every-space", "feedback"])
def test_encoded_episodes_join_like_their_columns(make):
    encoded = _encoded(make(), range(4))
    joined = concat_encoded(encoded)
    expected = concat_columns([decode_encoded(e) for e in encoded])
    assert set(expected) >= set(joined)
    for name, column in joined.items():
        assert column.dtype == expected[name].dtype, name
        np.testing.assert_array_equal(column, expected[name], err_msg=name)
    if make is feedback_stack:  # text columns, and rows of several families
        assert joined["events/payload"].dtype == object and len(joined["events/payload"]) > 0


def test_episodes_of_several_schemas_join_in_their_order_like_their_columns():
    with_feedback = _encoded(feedback_stack(), range(3))
    bare = _encoded(feedback_stack(), [3, 4], keep_info=False)  # no feedback, shaping, events
    encoded = [with_feedback[0], bare[0], with_feedback[1], with_feedback[2], bare[1]]
    assert len({e.schema for e in encoded}) == 2
    joined = join_encoded(encoded)
    expected = concat_columns([decode_encoded(e) for e in encoded])
    assert set(joined) == set(expected)
    for name, column in joined.items():
        assert column.dtype == expected[name].dtype, name
        np.testing.assert_array_equal(column, expected[name], err_msg=name)


def test_joining_episodes_of_several_schemas_refuses_rows_that_others_lack():
    with_events, without = _encoded(feedback_stack(), [0]) + _encoded(
        feedback_stack(), [1], keep_info=False
    )
    assert with_events.events
    lacking = dataclasses.replace(without, events=with_events.events)
    with pytest.raises(ValueError, match="events/"):
        join_encoded([with_events, lacking])


def test_joining_encoded_episodes_checks_their_bytes():
    first, second = _encoded(EverySpaceEnv(), [0, 1])
    with pytest.raises(ValueError, match="trailing bytes"):
        concat_encoded([first, dataclasses.replace(second, data=second.data + b"\0")])
    other = dataclasses.replace(second, schema=second.schema[1:])
    with pytest.raises(ValueError, match="different schemas"):
        concat_encoded([first, other])


def test_the_builder_reads_dict_observations_by_key_whatever_their_order():
    builder = EpisodeBuilder({"a": 1, "b": 2.5}, {}, task_id="t", round="0", seed=0, start_time=0.0)
    builder.add(0, {"b": 3.5, "a": 4}, 0.0, True, False, {})
    columns = builder.build(end_time=1.0).columns
    assert columns["observations/a"].tolist() == [1, 4]
    assert columns["observations/b"].tolist() == [2.5, 3.5]
