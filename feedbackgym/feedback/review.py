"""``TrajectoryReviewer``: critiques the last N steps of a finished episode."""

from __future__ import annotations

from collections.abc import Sequence

from feedbackgym.core import (
    DEFAULT_HINT_LEVEL,
    ReexplorePoint,
    ReusableSegment,
    Review,
    StepRecord,
    Subgoal,
    as_clause,
    next_subgoal_ids,
)
from feedbackgym.feedback.generators import ReviewRequest
from feedbackgym.feedback.levels import check_level

__all__ = ["TrajectoryReviewer"]


class TrajectoryReviewer:
    """Reviews a window of steps against the subgoal timeline.

    Segments that advanced subgoals are marked reusable. Steps the env flagged
    as harmful, and the step where progress stalled for ``stall_steps`` steps,
    are marked to re-explore, with the subgoal-level suggestion for that state
    (the subgoal to reach from there, in the words of the library it is given:
    the wrappers disclose it at the review's level); the expert's action is
    added only at the ``action`` level, when the records carry it.

    A :class:`~feedbackgym.feedback.generators.Reviewer`; it answers in
    microseconds, so the wrappers call it in the step (``inline``). The
    request's ``options`` (``stall_steps``, ``level``) override the
    constructor's settings.

    Args:
        stall_steps: Steps without progress that count as a stall.
        max_points: Most re-explore points per review.
        credit_scale: Size of the per-step credit on reusable and re-explore steps.
        level: ``"action"`` adds the expert's action to re-explore points;
            ``"phase"`` (default) and ``"target"`` do not.

    Example:
        >>> lib = (Subgoal("a", "reach A", bool), Subgoal("b", "reach B", bool, ("a",)))
        >>> steps = (StepRecord(0, 1, 0.0, ()), StepRecord(1, 2, 0.0, ("a",)),
        ...          StepRecord(2, 3, 0.0, ("a",), harmful=True))
        >>> review = TrajectoryReviewer().review(ReviewRequest(steps, lib, success=False))
        >>> [(s.start, s.end, s.subgoal_id) for s in review.reusable]
        [(0, 1, 'a')]
        >>> review.reexplore[0].step, review.reexplore[0].suggestion
        (2, 'try to reach B')
    """

    inline = True
    """Called in the step: it answers in microseconds."""

    def __init__(
        self,
        *,
        stall_steps: int = 8,
        max_points: int = 3,
        credit_scale: float = 0.1,
        level: str = DEFAULT_HINT_LEVEL,
    ) -> None:
        if stall_steps < 1 or max_points < 1:
            raise ValueError("stall_steps and max_points must be at least 1")
        self.stall_steps = stall_steps
        self.max_points = max_points
        self.credit_scale = credit_scale
        self.level = check_level(level)

    def review(self, request: ReviewRequest) -> Review:
        """Reviews the request's window (its records, oldest first) of a finished episode.

        Raises:
            ValueError: The window is empty, or an option is out of range.
        """
        records, library, success = request.records, request.library, request.success
        if not records:
            raise ValueError("a review needs at least one step")
        options = request.options
        stall_steps = int(options.get("stall_steps", self.stall_steps))
        action_level = check_level(str(options.get("level", self.level))) == "action"
        if stall_steps < 1:
            raise ValueError(f"stall_steps must be at least 1, got {stall_steps}")
        reusable = self._reusable(records, request.initial_done)
        points = self._reexplore(records, library, request.initial_done, stall_steps, action_level)
        final = set(records[-1].done_ids)
        score = 1.0 if success else len(final) / max(1, len(library))
        credit = [0.0] * len(records)
        first = records[0].step
        for segment in reusable:
            for t in range(segment.start, segment.end + 1):
                credit[t - first] += self.credit_scale / (segment.end - segment.start + 1)
        for point in points:
            credit[point.step - first] -= self.credit_scale
        return Review(
            window=(first, records[-1].step),
            reusable=tuple(reusable),
            reexplore=tuple(points),
            summary=self._summary(records, library, reusable, points, success),
            score=score,
            credit=tuple(credit),
            success=success,
        )

    def _reusable(
        self, records: Sequence[StepRecord], initial_done: Sequence[str]
    ) -> list[ReusableSegment]:
        segments = []
        done, start = set(initial_done), records[0].step
        for record in records:
            reached = set(record.done_ids)
            new = reached - done
            if new:
                segments += [ReusableSegment(start, record.step, i) for i in sorted(new)]
                start = record.step + 1
            done = reached
        return segments

    def _reexplore(
        self,
        records: Sequence[StepRecord],
        library: Sequence[Subgoal],
        initial_done: Sequence[str],
        stall_steps: int,
        action_level: bool,
    ) -> list[ReexplorePoint]:
        # Where to re-explore: harmful steps first, then stalls; points are built
        # only for the ones kept (each asks what to try next in that state).
        harmful: list[tuple[StepRecord, tuple[str, ...]]] = []
        stalled: list[tuple[StepRecord, tuple[str, ...]]] = []
        done_before = tuple(initial_done)
        first = records[0].step
        stall_start = first
        for record in records:
            progressed = set(record.done_ids) - set(done_before)
            if record.harmful:
                harmful.append((record, done_before))
            elif not progressed and record.step - stall_start + 1 == stall_steps:
                stalled.append((records[stall_start - first], done_before))
            if progressed:
                stall_start = record.step + 1
            done_before = record.done_ids
        kept = [(r, d, "harmful") for r, d in harmful] + [(r, d, "stalled") for r, d in stalled]
        points = [
            self._point(r, library, d, reason, action_level)
            for r, d, reason in kept[: self.max_points]
        ]
        return sorted(points, key=lambda p: p.step)

    def _point(
        self,
        record: StepRecord,
        library: Sequence[Subgoal],
        done_before: Sequence[str],
        reason: str,
        action_level: bool,
    ) -> ReexplorePoint:
        upcoming = next_subgoal_ids(library, dict.fromkeys(done_before, True))
        target = next(
            (sg.description for sg in library if upcoming and sg.id == upcoming[0]),
            "finish the task",
        )
        summary = f"{len(done_before)}/{len(library)} subgoals done" + (
            f", last reached {done_before[-1]}" if done_before else ""
        )
        return ReexplorePoint(
            step=record.step,
            state_summary=summary,
            suggestion=f"try to {as_clause(target)}",
            reason=reason,
            action_suggestion=record.expert_action if action_level else None,
        )

    @staticmethod
    def _summary(
        records: Sequence[StepRecord],
        library: Sequence[Subgoal],
        reusable: Sequence[ReusableSegment],
        points: Sequence[ReexplorePoint],
        success: bool,
    ) -> str:
        reached = len(set(records[-1].done_ids))
        head = "Succeeded" if success else "Did not succeed"
        span = f"steps {records[0].step}-{records[-1].step}"
        text = f"{head}; reached {reached} of {len(library)} subgoals in {span}."
        if points:
            text += f" Re-explore from step {points[0].step} ({points[0].reason})."
        elif not success and not reusable:
            text += " No subgoal progress in this window."
        return text

    def __repr__(self) -> str:
        return (
            f"TrajectoryReviewer(stall_steps={self.stall_steps}, max_points={self.max_points}, "
            f"credit_scale={self.credit_scale}, level={self.level!r})"
        )
