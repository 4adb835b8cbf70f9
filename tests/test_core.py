import pickle
from functools import partial

import pytest

from feedbackgym.core import Subgoal, SubgoalTracker


def _at_least(n, state):
    return state["x"] >= n


def _library():
    return [
        Subgoal("b", "reach two", partial(_at_least, 2), ("a",)),
        Subgoal("a", "reach one", partial(_at_least, 1)),
        Subgoal("c", "reach three", partial(_at_least, 3), ("b",)),
    ]


def test_prerequisites_gate_and_progress_latches():
    tracker = SubgoalTracker(_library())
    assert [sg.id for sg in tracker.next_subgoals()] == ["a"]
    assert tracker.update({"x": 2}) == {"b": True, "a": True, "c": False}
    assert tracker.update({"x": 0}) == {"b": True, "a": True, "c": False}
    assert [sg.id for sg in tracker.next_subgoals()] == ["c"]
    assert tracker.fraction_done == pytest.approx(2 / 3)
    tracker.reset()
    assert not any(tracker.done.values())


def test_subgoal_done_only_after_its_prerequisites():
    lib = [Subgoal("a", "A", lambda s: s == "late"), Subgoal("b", "B", lambda s: True, ("a",))]
    tracker = SubgoalTracker(lib)
    assert tracker.update("early") == {"a": False, "b": False}
    assert tracker.update("late") == {"a": True, "b": True}


@pytest.mark.parametrize(
    "library, message",
    [
        ([Subgoal("a", "A", bool), Subgoal("a", "A2", bool)], "unique"),
        ([Subgoal("a", "A", bool, ("zz",))], "unknown"),
        ([Subgoal("a", "A", bool, ("b",)), Subgoal("b", "B", bool, ("a",))], "cycle"),
    ],
)
def test_bad_libraries_are_rejected(library, message):
    with pytest.raises(ValueError, match=message):
        SubgoalTracker(library)


def test_to_dict_is_json_safe_and_tracker_pickles():
    sg = _library()[0]
    assert sg.to_dict() == {
        "id": "b",
        "description": "reach two",
        "requires": ["a"],
        "targets": [],
        "kind": "",
        "phase": "",
    }
    tracker = pickle.loads(pickle.dumps(SubgoalTracker(_library())))
    assert tracker.update({"x": 1})["a"]
