"""``WithSubgoals``: makes a third-party env guidable by giving it a subgoal list."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, SupportsFloat

import gymnasium as gym

from feedbackgym.core import Subgoal, SubgoalTracker

__all__ = ["SubgoalContext", "WithSubgoals"]


@dataclass(frozen=True)
class SubgoalContext:
    """What a user predicate sees after each reset and step.

    Attributes:
        obs: The observation.
        info: The env's info dict.
        env: The unwrapped env (its true state).
    """

    obs: Any
    info: dict[str, Any]
    env: Any


class WithSubgoals(gym.Wrapper[Any, Any, Any, Any]):
    """Adds a subgoal library to any env, so guides and reviews work on it.

    Each predicate is called with a :class:`SubgoalContext` (obs, info and the
    unwrapped env) after every reset and step; ``info["subgoals"]`` reports
    progress, latched and gated by prerequisites, and ``subgoals`` lists the
    library (found by ``env.get_wrapper_attr("subgoals")``). Optionally
    ``success`` sets ``info["is_success"]`` and ``expert`` gives the env an
    oracle for action-level suggestions.

    Its predicates are code, so ``gym.make(env.spec)`` cannot rebuild it: its
    entry in ``env.spec.additional_wrappers`` has no arguments (Gymnasium's mark
    of a wrapper it cannot remake), and a Minari export of its episodes names
    the base env (:func:`~feedbackgym.datasets.export_minari`).

    Example:
        >>> import gymnasium as gym
        >>> lib = [Subgoal("right", "move right of 0.5", lambda c: c.obs[0] > 0.5)]
        >>> env = WithSubgoals(gym.make("MountainCar-v0"), subgoals=lib)
        >>> env.reset(seed=0)[1]["subgoals"]
        {'right': False}

    Change logs:
     * v0.1.0 - Initially added
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        subgoals: Sequence[Subgoal],
        *,
        success: Callable[[SubgoalContext], bool] | None = None,
        expert: Callable[[Any], Any] | None = None,
    ) -> None:
        super().__init__(env)
        if not subgoals:
            raise ValueError("WithSubgoals needs at least one subgoal")
        self._library = list(subgoals)
        self._tracker = SubgoalTracker(self._library)
        self._success = success
        self._expert = expert

    @property
    def subgoals(self) -> list[Subgoal]:
        """The subgoal library."""
        return list(self._library)

    def expert_action(self) -> Any:
        """The user's expert action for the current state.

        Raises:
            AttributeError: No ``expert`` was given.
        """
        if self._expert is None:
            raise AttributeError("WithSubgoals was given no expert")
        return self._expert(self.env.unwrapped)

    def _annotate(self, obs: Any, info: dict[str, Any]) -> dict[str, Any]:
        context = SubgoalContext(obs, info, self.env.unwrapped)
        info["subgoals"] = self._tracker.update(context)
        if self._success is not None:
            info["is_success"] = bool(self._success(context))
        return info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Resets the env and the progress."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._tracker.reset()
        return obs, self._annotate(obs, info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps the env and updates the progress."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._annotate(obs, info)
