import gc
import json
import pickle

import numpy as np
import pytest

from feedbackgym.datasets.builder import MAX_SUBGOALS, EpisodeBuilder


def _episode(progress):
    builder = EpisodeBuilder(
        0, {"subgoals": progress[0]}, task_id="t", round="0", seed=None, start_time=0.0
    )
    for row in progress[1:]:
        builder.add(0, 0, 0.0, False, False, {"subgoals": row})
    return builder.build(end_time=1.0)


def test_subgoal_progress_round_trips_when_the_ids_stay_the_same():
    progress = [
        {"a": False, "b": False},
        {"a": True, "b": False},
        {"a": True, "b": False},
        {"a": True, "b": True},
    ]
    episode = _episode(progress)
    assert episode.meta.subgoal_ids == ("a", "b")
    assert episode.columns["subgoals/done"].tolist() == [0, 1, 1, 3]
    assert episode.subgoals == progress


def test_subgoal_progress_that_the_env_updates_in_place_is_recorded_at_each_change():
    progress = {"a": False, "b": False}  # one dict, the env's, updated as subgoals are reached
    builder = EpisodeBuilder(
        0, {"subgoals": progress}, task_id="t", round="0", seed=None, start_time=0.0
    )
    for reached in ("a", None, "b"):
        if reached:
            progress[reached] = True
        builder.add(0, 0, 0.0, False, False, {"subgoals": progress})
    episode = builder.build(end_time=1.0)
    assert episode.columns["subgoals/done"].tolist() == [0, 1, 1, 3]


def test_subgoal_progress_keeps_every_id_when_the_library_changes():
    episode = _episode([{"a": False}, {"a": True, "b": False}, {"b": True, "a": True}])
    assert episode.meta.subgoal_ids == ("a", "b")
    assert episode.subgoals == [
        {"a": False, "b": False},
        {"a": True, "b": False},
        {"a": True, "b": True},
    ]


def test_each_observation_gets_its_own_feedback_and_schedule():
    guide = {"phase": "guide", "guide_weight": 1.0, "review_weight": 0.0}
    review = {"phase": "review", "guide_weight": 0.0, "review_weight": 1.0}
    infos = [
        {"feedback": {**guide, "guide": {"subgoal": "a"}}},
        {"feedback": {**guide, "guide": {}}},  # same schedule, no hint
        {"feedback": guide},
        {"feedback": None},
        {},
        {"feedback": {**review, "review": {"verdict": "stalled"}}},
        {"feedback": review},
        {"feedback": {**review, "review_weight": 0.5}},  # the weight changes alone
    ]
    builder = EpisodeBuilder(0, infos[0], task_id="t", round="0", seed=None, start_time=0.0)
    for info in infos[1:]:
        builder.add(0, 0, 0.0, False, False, info)
    columns = builder.build(end_time=1.0).columns
    assert columns["schedule/phase"].tolist() == [b"guide"] * 3 + [b""] * 2 + [b"review"] * 3
    np.testing.assert_array_equal(
        columns["schedule/guide_weight"], [1, 1, 1, np.nan, np.nan, 0, 0, 0]
    )
    np.testing.assert_array_equal(
        columns["schedule/review_weight"], [0, 0, 0, np.nan, np.nan, 1, 1, 0.5]
    )
    assert columns["feedback/type"].tolist() == [1, 0, 0, 0, 0, 2, 0, 0]
    assert columns["events/row"].tolist() == [0, 5]
    entries = len(builder._feedback) // 6
    assert entries < len(infos)  # kept where it changed, not at every step


def test_a_reset_info_whose_feedback_is_none_records_and_pickles():
    builder = EpisodeBuilder(0, {"feedback": None}, task_id="t", round="0", seed=0, start_time=0)
    builder.add(0, 0, 0.0, True, False, {"feedback": None})
    copy = pickle.loads(pickle.dumps(builder))
    copy.packer = builder.packer
    assert builder.build(end_time=1.0).meta.phase == copy.build(end_time=1.0).meta.phase == ""


@pytest.mark.parametrize("changing", [False, True])
def test_more_subgoals_than_the_mask_holds_are_refused(changing):
    too_many = {f"s{i}": False for i in range(MAX_SUBGOALS + 1)}
    first = {"other": True} if changing else too_many
    with pytest.raises(ValueError, match="64-bit mask"):
        _episode([first, too_many])


@pytest.mark.parametrize(
    "actions",
    [
        [np.int32(3), np.int32(1), np.int32(2)],  # NumPy scalars of one type: sent as an array
        [np.int64(3), 1, np.int64(2)],  # mixed: sent as they are
        ["click 1", "click 2", "back"],
        [np.str_("click 1"), np.str_("back")],  # text goes as it is, not as an array
        [np.bool_(True), np.bool_(False)],
        [],
    ],
)
def test_a_pickled_builder_encodes_as_the_original_does(actions):
    builder = EpisodeBuilder(
        np.zeros(2, np.float32), {}, task_id="t", round="0", seed=4, start_time=0.0
    )
    for step, action in enumerate(actions):
        done = step == len(actions) - 1
        reward, ended = np.float64(step / 2), np.bool_(done)  # NumPy scalars in every column
        builder.add(action, np.full(2, step, np.float32), reward, ended, False, {})
    copy = pickle.loads(pickle.dumps(builder))
    copy.packer = builder.packer  # a writer process gets the packer apart
    assert copy._steps == builder._steps
    assert [type(action) for action in copy._steps[0::4]] == [type(a) for a in actions]
    if actions:
        original, sent = builder.build(end_time=1.0), copy.build(end_time=1.0)
        for name, column in original.columns.items():
            assert sent.columns[name].dtype == column.dtype
            np.testing.assert_array_equal(sent.columns[name], column)


@pytest.mark.parametrize(
    "observations",
    [
        [{"a": np.zeros(2, np.int8), "b": 0}, {"a": np.ones(2, np.int8), "b": 1}],  # kept leaves
        [np.zeros(2, np.float32), np.arange(4, dtype=np.float32)[::2], np.ones(2, np.float32)],
    ],
    ids=["packed-and-kept", "a-misfit-row"],  # a strided array is kept whole, not packed
)
def test_a_pickled_builder_keeps_its_observation_rows(observations):
    builder = EpisodeBuilder(observations[0], {}, task_id="t", round="0", seed=0, start_time=0.0)
    for step, obs in enumerate(observations[1:]):
        builder.add(step, obs, 0.0, step == len(observations) - 2, False, {})
    copy = pickle.loads(pickle.dumps(builder))
    copy.packer = builder.packer
    original, sent = builder.build(end_time=1.0), copy.build(end_time=1.0)
    assert original.columns.keys() == sent.columns.keys()
    for name, column in original.columns.items():
        assert sent.columns[name].dtype == column.dtype
        np.testing.assert_array_equal(sent.columns[name], column)


def _hinted_info(hint, step):
    return {
        "feedback": {"guide": hint, "phase": "guide", "guide_weight": 1.0, "review_weight": 0.0},
        "subgoals": {"a": step > 5, "b": False},
        "env_reward": 0.0,
        "shaping_reward": 0.1,
    }


def test_a_repeated_hint_is_kept_and_sent_once_yet_recorded_at_every_row():
    hints = [{"subgoal_ids": ["a"], "texts": ["do a"]}] * 2 + [{"subgoal_ids": ["b"]}] * 2
    infos = [_hinted_info(dict(hint), step) for step, hint in enumerate(hints)]  # equal, not same
    builder = EpisodeBuilder(0, infos[0], task_id="t", round="0", seed=0, start_time=0.0)
    for step, info in enumerate(infos[1:]):
        builder.add(0, 0, 0.0, step == len(infos) - 2, False, info)
    copy = pickle.loads(pickle.dumps(builder))
    copy.packer = builder.packer
    guides = copy._feedback[1::6]
    assert guides[0] is guides[1] and guides[2] is guides[3] and guides[1] is not guides[2]
    for episode in (builder.build(end_time=1.0), copy.build(end_time=1.0)):
        assert episode.columns["events/row"].tolist() == [0, 1, 2, 3]
        assert [json.loads(p) for p in episode.columns["events/payload"]] == hints


def test_a_step_adds_no_object_the_garbage_collector_tracks():
    obs = [{"x": np.full(3, step, np.float32), "k": step} for step in range(201)]
    hint = {"subgoal_ids": ["a"], "texts": ["do a"]}
    infos = [_hinted_info(dict(hint), step) for step in range(201)]
    builder = EpisodeBuilder(obs[0], infos[0], task_id="t", round="0", seed=0, start_time=0.0)
    gc.collect()
    gc.disable()  # no collection untracks anything meanwhile
    try:
        before = len(gc.get_objects())
        for step in range(1, 201):
            builder.add(step % 3, obs[step], 0.5, False, False, infos[step])
        kept = len(gc.get_objects()) - before
    finally:
        gc.enable()
    assert kept < 10  # the subgoal progress changed once: a copy of it, and its entry
    episode = builder.build(end_time=1.0)
    assert episode.columns["observations/x"][:, 0].tolist() == list(range(201))
    assert episode.columns["shaping_rewards"].tolist() == [0.1] * 200
