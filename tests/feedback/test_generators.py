import json

import pytest

from feedbackgym.core import Hint, Review, StepRecord, Subgoal
from feedbackgym.feedback import GuideRequest, ReviewRequest, SubgoalGuide, TrajectoryReviewer

LIB = (
    Subgoal("key", "Pick up the key.", bool),
    Subgoal("door", "Open the door.", bool, ("key",)),
    Subgoal("goal", "Reach the goal.", bool, ("door",)),
)


def _records(done_per_step, harmful=()):
    return tuple(
        StepRecord(step=i, action=i % 3, reward=0.0, done_ids=tuple(done), harmful=i in harmful)
        for i, done in enumerate(done_per_step)
    )


def test_guide_names_next_subgoals_in_order_and_never_an_action():
    guide = SubgoalGuide(lookahead=2)
    hint = guide.hint(GuideRequest(LIB, {"key": True, "door": False, "goal": False}, step=7))
    assert hint.subgoal_ids == ("door", "goal") and hint.positions == (1, 2) and hint.step == 7
    assert hint.text == "Hint: first open the door, then reach the goal"
    data = hint.to_dict()
    assert set(data) == {"subgoal_ids", "texts", "step", "positions", "targets", "kind", "text"}
    assert Hint.from_dict(json.loads(json.dumps(data))) == hint
    done = guide.hint(GuideRequest(LIB, dict.fromkeys(("key", "door", "goal"), True), step=9))
    assert done.subgoal_ids == () and "all subgoals are done" in done.text


def test_review_marks_reusable_segments_and_reexplore_points():
    steps = [(), (), ("key",), ("key",), ("key",), ("key",)]
    review = TrajectoryReviewer(stall_steps=3).review(
        ReviewRequest(_records(steps, harmful={3}), LIB, success=False)
    )
    assert [(s.start, s.end, s.subgoal_id) for s in review.reusable] == [(0, 2, "key")]
    reasons = [(p.step, p.reason) for p in review.reexplore]
    assert reasons == [(3, "harmful"), (3, "stalled")]
    assert review.reexplore[0].suggestion == "try to open the door"
    assert review.reexplore[0].action_suggestion is None
    assert review.score == pytest.approx(1 / 3) and not review.success
    assert review.window == (0, 5) and len(review.credit) == 6
    assert review.credit[0] > 0 and review.credit[3] < 0
    assert "Re-explore from step 3" in review.summary and "Step 3 (harmful)" in review.text
    assert Review.from_dict(json.loads(json.dumps(review.to_dict()))) == review


def test_review_window_uses_progress_before_it():
    records = _records([("key",), ("key", "door"), ("key", "door", "goal")])[1:]
    review = TrajectoryReviewer().review(
        ReviewRequest(records, LIB, success=True, initial_done=("key",))
    )
    assert [s.subgoal_id for s in review.reusable] == ["door", "goal"]
    assert review.score == 1.0 and review.window == (1, 2)


def test_action_suggestions_only_at_the_action_level():
    request = ReviewRequest((StepRecord(0, 1, 0.0, (), harmful=True, expert_action=2),), LIB, False)
    assert TrajectoryReviewer().review(request).reexplore[0].action_suggestion is None
    assert TrajectoryReviewer(level="target").review(request).reexplore[0].action_suggestion is None
    opted = TrajectoryReviewer(level="action").review(request)
    assert opted.reexplore[0].action_suggestion == 2
    by_request = ReviewRequest(request.records, LIB, False, options={"level": "action"})
    assert TrajectoryReviewer().review(by_request).reexplore[0].action_suggestion == 2


def test_review_rejects_empty_windows():
    with pytest.raises(ValueError, match="at least one step"):
        TrajectoryReviewer().review(ReviewRequest((), LIB, success=False))
