"""feedbackgym: long-horizon Gymnasium tasks and "guide first, review later" feedback.

Importing the package registers the env ids (``feedbackgym/OpsIncident-v0``,
...) and loads nothing heavier than gymnasium and numpy. :func:`make` (the env
with its whole feedback stack, from one config), :class:`FeedbackController`
(the trainer's side of the feedback) and :class:`FeedbackState` load on first use.

Example:
    >>> import gymnasium as gym
    >>> import feedbackgym
    >>> env = gym.make("feedbackgym/OpsIncidentEasy-v0")
    >>> obs, info = env.reset(seed=0)
    >>> sorted(info["subgoals"])[:2]
    ['declare_resolved', 'find_root_cause']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from feedbackgym.core import Subgoal, SubgoalTracker
from feedbackgym.errors import (
    ConfigError,
    DependencyNotInstalled,
    FeedbackGymError,
    InvalidAction,
    SandboxError,
)
from feedbackgym.registration import register_envs

if TYPE_CHECKING:
    from feedbackgym.control import FeedbackController
    from feedbackgym.protocol import FeedbackState
    from feedbackgym.wrappers.stack import make

__all__ = [
    "ConfigError",
    "DependencyNotInstalled",
    "FeedbackController",
    "FeedbackGymError",
    "FeedbackState",
    "InvalidAction",
    "SandboxError",
    "Subgoal",
    "SubgoalTracker",
    "__version__",
    "make",
]

__version__ = "0.1.0"

register_envs()

_LAZY = {
    "FeedbackController": "feedbackgym.control",
    "FeedbackState": "feedbackgym.protocol",
    "make": "feedbackgym.wrappers.stack",
}
"""Public names loaded on first use (PEP 562), to keep ``import feedbackgym`` light."""


def __getattr__(name: str) -> Any:
    """Loads :data:`_LAZY`'s names on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)
