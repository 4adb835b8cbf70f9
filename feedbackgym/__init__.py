"""feedbackgym: long-horizon Gymnasium tasks and "guide first, review later" feedback.

Importing the package registers the env ids (``feedbackgym/OpsIncident-v0``,
...) and loads nothing heavier than gymnasium and numpy.

Example:
    >>> import gymnasium as gym
    >>> import feedbackgym
    >>> env = gym.make("feedbackgym/OpsIncidentEasy-v0")
    >>> obs, info = env.reset(seed=0)
    >>> sorted(info["subgoals"])[:2]
    ['declare_resolved', 'find_root_cause']
"""

from __future__ import annotations

from feedbackgym.core import Subgoal, SubgoalTracker
from feedbackgym.errors import (
    ConfigError,
    DependencyNotInstalled,
    FeedbackGymError,
    InvalidAction,
    SandboxError,
)
from feedbackgym.registration import register_envs

__all__ = [
    "ConfigError",
    "DependencyNotInstalled",
    "FeedbackGymError",
    "InvalidAction",
    "SandboxError",
    "Subgoal",
    "SubgoalTracker",
    "__version__",
]

__version__ = "0.1.0"

register_envs()
