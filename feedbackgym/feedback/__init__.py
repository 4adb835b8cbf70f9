"""Feedback generators: the protocols, the subgoal guide, the trajectory reviewer, the service.

A guide and a reviewer are any objects meeting the small protocols of
:mod:`feedbackgym.feedback.generators` (:class:`Guide`, :class:`Reviewer`);
:class:`SubgoalGuide` and :class:`TrajectoryReviewer` are the built-in ones.
Requests are JSON-safe data (the subgoal library's ids, descriptions and
prerequisites, the progress dict, step records), so the same generator runs
in-process or behind ``feedbackgym serve-feedback`` (:mod:`~feedbackgym.feedback.service`,
with its client in :mod:`~feedbackgym.feedback.remote`).
"""

from __future__ import annotations

from feedbackgym.feedback.generators import (
    Guide,
    GuideRequest,
    Reviewer,
    ReviewRequest,
    as_guide,
    as_reviewer,
)
from feedbackgym.feedback.guide import SubgoalGuide
from feedbackgym.feedback.review import TrajectoryReviewer

__all__ = [
    "Guide",
    "GuideRequest",
    "ReviewRequest",
    "Reviewer",
    "SubgoalGuide",
    "TrajectoryReviewer",
    "as_guide",
    "as_reviewer",
]
