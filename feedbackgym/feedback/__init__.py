"""Feedback generators: the subgoal guide, the trajectory reviewer, the remote client.

Generators work on JSON-safe inputs (the subgoal library's ids, descriptions
and prerequisites, the progress dict, step records), so the same code runs
in-process or behind ``feedbackgym serve-feedback``.
"""

from __future__ import annotations

from feedbackgym.feedback.guide import SubgoalGuide
from feedbackgym.feedback.review import TrajectoryReviewer

__all__ = ["SubgoalGuide", "TrajectoryReviewer"]
