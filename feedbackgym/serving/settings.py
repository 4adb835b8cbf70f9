"""What one ``serve-env`` server serves: the env, its arm, its limits.

Plain data, no server library: the command line builds a :class:`ServeSettings`,
and every session's env is built from it (:meth:`ServeSettings.feedback_config`,
:meth:`ServeSettings.make_env`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym

from feedbackgym.config import FeedbackConfig, merge_config
from feedbackgym.core import DEFAULT_HINT_LEVEL, HINT_LEVELS
from feedbackgym.errors import ConfigError
from feedbackgym.wrappers.stack import make

__all__ = ["DEFAULT_SERVE_ARM", "ServeSettings"]

DEFAULT_SERVE_ARM = "guide-then-review+shaping"
"""The arm a server's sessions play unless ``--arm`` says otherwise."""

_INFO_CHANNELS = {"guide": {"channels": ["info"]}, "review": {"channels": ["info"]}}
"""Hints and reviews reach the wire as declared fields, read from ``info["feedback"]``."""


@dataclass(frozen=True)
class ServeSettings:
    """The env every session of a server plays, and the server's limits.

    Attributes:
        env_id: A registered env id with a text mode (``obs_mode="text"``).
        arm: The comparison arm (``feedbackgym.schedules.ARMS``): who speaks when.
        level: What hints and reviews disclose (``core.HINT_LEVELS``).
        env_kwargs: More ``gym.make`` keyword arguments.
        max_sessions: Concurrent WebSocket sessions; one more is refused
            with ``CAPACITY_REACHED``.
        idle_timeout_s: Seconds a session may stay silent before its env (and
            whatever it started: a browser, a container) is closed; ``None``: never.
        rounds: The length of the arm's schedule in rounds, for the session's
            own controller.
        round_episodes: Finished episodes of a session per round of its controller.

    Example:
        >>> settings = ServeSettings("feedbackgym/OpsIncidentEasy-v1")
        >>> config = settings.feedback_config()
        >>> config.schedule.arm, config.guide.level, config.guide.channels
        ('guide-then-review+shaping', 'phase', ('info',))
    """

    env_id: str
    arm: str = DEFAULT_SERVE_ARM
    level: str = DEFAULT_HINT_LEVEL
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    max_sessions: int = 64
    idle_timeout_s: float | None = 300.0
    rounds: int = 100
    round_episodes: int = 8

    def __post_init__(self) -> None:
        if self.level not in HINT_LEVELS:
            raise ConfigError(f"level must be one of {', '.join(HINT_LEVELS)}, got {self.level!r}")
        if self.max_sessions < 1 or self.rounds < 1 or self.round_episodes < 1:
            raise ConfigError(
                "max_sessions, rounds and round_episodes must be at least 1; got "
                f"{self.max_sessions}, {self.rounds}, {self.round_episodes}"
            )
        if self.idle_timeout_s is not None and self.idle_timeout_s <= 0:
            raise ConfigError(f"idle_timeout_s must be positive or None, got {self.idle_timeout_s}")
        self.feedback_config()  # an unknown arm fails here, before the server starts

    def feedback_config(self) -> FeedbackConfig:
        """The arm's preset over ``rounds`` rounds, at ``level``, hints and reviews in ``info``.

        Raises:
            ConfigError: An unknown arm.
        """
        base = merge_config(FeedbackConfig(), {"schedule": {"total": self.rounds}})
        config = FeedbackConfig.for_arm(self.arm, base)
        levels = {"guide": {"level": self.level}, "review": {"level": self.level}}
        return merge_config(merge_config(config, _INFO_CHANNELS), levels, source="serve-env")

    def env_arguments(self) -> dict[str, Any]:
        """``gym.make``'s keyword arguments: text observations and ``env_kwargs``."""
        return {"obs_mode": "text", **self.env_kwargs}

    def describe(self) -> dict[str, Any]:
        """What ``/settings`` says: these settings and the env's whole ``gym.make`` kwargs.

        Example:
            >>> ServeSettings("feedbackgym/OpsIncidentEasy-v1").describe()["spec_kwargs"]
            {'difficulty': 'easy', 'obs_mode': 'text', 'split': 'train'}
        """
        spec_kwargs = {**gym.spec(self.env_id).kwargs, **self.env_arguments()}
        return {**asdict(self), "spec_kwargs": spec_kwargs}

    def make_env(self, config: FeedbackConfig) -> gym.Env[Any, Any]:
        """One session's env: the text env with the whole feedback stack of ``config``."""
        return make(self.env_id, config, **self.env_arguments())
