"""``WidenTasks``: hands the controller's curriculum width to a training env at each reset."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from feedbackgym.errors import ConfigError

__all__ = ["WidenTasks"]

SET_CURRICULUM = "set_curriculum"
"""The task env's method that takes a width (``None``: its own preset); OpsIncident v1 and v2
have it (:meth:`feedbackgym.envs.incident.env.IncidentEnv.set_curriculum`)."""


class WidenTasks(gym.Wrapper[Any, Any, Any, Any]):
    """Plays each episode at the curriculum width in force (the feedback state's ``curriculum``).

    :class:`~feedbackgym.wrappers.FadeGuideToReview` hands it each state's width
    (:meth:`set_width`); at the next reset the task env draws its task at that
    width. An env of the test split always plays its own preset: validation and
    evaluation never see the curriculum.

    Args:
        env: The env (its task env needs ``set_curriculum`` once a width is set).

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> env = WidenTasks(gym.make("feedbackgym/OpsIncidentHard-v2"))
        >>> env.set_width(0.0)
        >>> _ = env.reset(seed=0)
        >>> env.unwrapped.preset.faults, env.unwrapped.preset_name
        (1, 'custom')
        >>> test = WidenTasks(gym.make("feedbackgym/OpsIncidentHard-v2", split="test"))
        >>> test.set_width(0.0)
        >>> _ = test.reset(seed=0)
        >>> test.unwrapped.preset.faults
        2
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.width: float | None = None
        self.training = getattr(env.unwrapped, "split", "train") == "train"
        """Whether the curriculum applies (a test-split env plays its own preset)."""

    def set_width(self, width: float | None) -> None:
        """Plays episodes at ``width`` from the next reset on (``None``: the env's own preset).

        Raises:
            ConfigError: A width, and the task env has no knobs to widen.
        """
        if width is not None and not hasattr(self.env.unwrapped, SET_CURRICULUM):
            raise ConfigError(
                f"a curriculum needs an env with task knobs ({SET_CURRICULUM}: OpsIncident v1 "
                f"and v2); {type(self.env.unwrapped).__name__} has none"
            )
        self.width = width

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Resets the env, its task drawn at the width in force."""
        if self.training and hasattr(self.env.unwrapped, SET_CURRICULUM):
            getattr(self.env.unwrapped, SET_CURRICULUM)(self.width)
        return self.env.reset(seed=seed, options=options)
