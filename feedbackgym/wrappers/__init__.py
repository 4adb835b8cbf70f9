"""Composable feedback wrappers (Gymnasium 1.x shape).

Stack them as ``FadeGuideToReview(AddReview(AddGuide(ShapeWithSubgoals(env))))``
(shaping optional; ``AddExplorationBonus``, a count-based exploration bonus, goes
around the shaping); ``WithSubgoals`` makes a third-party env guidable;
``Reexplore`` (opt-in) restarts episodes from states a review flagged;
``WidenTasks`` (innermost) plays each episode at the curriculum's width;
``RecordTrajectories`` (outermost) records episodes to an HDF5 trajectory store,
and loads h5py only when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from feedbackgym.wrappers.curriculum import WidenTasks
from feedbackgym.wrappers.explore import AddExplorationBonus
from feedbackgym.wrappers.guide import AddGuide
from feedbackgym.wrappers.reexplore import Reexplore
from feedbackgym.wrappers.review import AddReview
from feedbackgym.wrappers.schedule import FadeGuideToReview
from feedbackgym.wrappers.shaping import ShapeWithSubgoals
from feedbackgym.wrappers.subgoals import SubgoalContext, WithSubgoals

if TYPE_CHECKING:
    from feedbackgym.wrappers.record import RecordTrajectories

__all__ = [
    "AddExplorationBonus",
    "AddGuide",
    "AddReview",
    "FadeGuideToReview",
    "RecordTrajectories",
    "Reexplore",
    "ShapeWithSubgoals",
    "SubgoalContext",
    "WidenTasks",
    "WithSubgoals",
]


def __getattr__(name: str) -> Any:
    """Loads ``RecordTrajectories`` (and h5py) on first use (PEP 562)."""
    if name == "RecordTrajectories":
        from feedbackgym.wrappers.record import RecordTrajectories

        return RecordTrajectories
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
