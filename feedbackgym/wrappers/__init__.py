"""Composable feedback wrappers (Gymnasium 1.x shape).

Stack them as ``FadeGuideToReview(AddReview(AddGuide(ShapeWithSubgoals(env))))``
(shaping optional); ``WithSubgoals`` makes a third-party env guidable;
``Reexplore`` (opt-in) restarts episodes from states a review flagged.
"""

from __future__ import annotations

from feedbackgym.wrappers.guide import AddGuide
from feedbackgym.wrappers.reexplore import Reexplore
from feedbackgym.wrappers.review import AddReview
from feedbackgym.wrappers.schedule import FadeGuideToReview
from feedbackgym.wrappers.shaping import ShapeWithSubgoals
from feedbackgym.wrappers.subgoals import SubgoalContext, WithSubgoals

__all__ = [
    "AddGuide",
    "AddReview",
    "FadeGuideToReview",
    "Reexplore",
    "ShapeWithSubgoals",
    "SubgoalContext",
    "WithSubgoals",
]
