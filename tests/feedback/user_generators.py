"""Generators as a user would write them: no base class of ours, importable as module:Class."""

import asyncio
import time

from feedbackgym.core import Hint, ReexplorePoint, Review


class ChecklistGuide:
    """Names the first subgoal not done, and says whether the text observation was read."""

    def __init__(self):
        self.calls = 0

    def hint(self, request):
        self.calls += 1
        todo = [sg for sg in request.library if not request.progress.get(sg.id)]
        if not todo:
            return None
        seen = "text" if request.text else "no text"
        return Hint((todo[0].id,), (f"{todo[0].description} ({seen})",), request.step)


class RubricReviewer:
    """Scores an episode by the share of steps that reached something; flags the last step."""

    def review(self, request):
        records = request.records
        progress = request.progress
        reached = sum(progress.values())
        return Review(
            window=(records[0].step, records[-1].step),
            reusable=(),
            reexplore=(
                ReexplorePoint(records[-1].step, f"{reached} done", "try another way", "rubric"),
            ),
            summary=f"rubric: {reached}/{len(progress)} reached, outcome {request.outcome!r}, "
            f"episode {request.episode}, task {request.task}",
            score=reached / max(1, len(progress)),
            success=request.success,
        )


class Critic(ChecklistGuide, RubricReviewer):
    """One object that is both a guide and a reviewer."""


class SlowAsyncGuide:
    """A coroutine guide that answers after ``delay`` seconds (an LLM behind a network)."""

    delay = 0.3

    async def hint(self, request):
        await asyncio.sleep(self.delay)
        return Hint(("late",), ("too late",), request.step)


class SlowReviewer:
    """A plain reviewer that takes ``delay`` seconds (run off the step: not inline)."""

    delay = 0.3

    def review(self, request):
        time.sleep(self.delay)
        return RubricReviewer().review(request)


class BrokenGuide:
    """Fails every call."""

    def hint(self, request):
        raise RuntimeError("the critic is down")
