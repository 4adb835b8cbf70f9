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


def test_subgoal_progress_keeps_every_id_when_the_library_changes():
    episode = _episode([{"a": False}, {"a": True, "b": False}, {"b": True, "a": True}])
    assert episode.meta.subgoal_ids == ("a", "b")
    assert episode.subgoals == [
        {"a": False, "b": False},
        {"a": True, "b": False},
        {"a": True, "b": True},
    ]


@pytest.mark.parametrize("changing", [False, True])
def test_more_subgoals_than_the_mask_holds_are_refused(changing):
    too_many = {f"s{i}": False for i in range(MAX_SUBGOALS + 1)}
    first = {"other": True} if changing else too_many
    with pytest.raises(ValueError, match="64-bit mask"):
        _episode([first, too_many])
