"""``Reexplore``: start an episode from a state that a review flagged (Go-Explore style)."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from feedbackgym.errors import FeedbackGymError
from feedbackgym.protocol import FEEDBACK
from feedbackgym.wrappers.common import find_wrapper, json_safe, seeded_rng
from feedbackgym.wrappers.review import AddReview

__all__ = ["Reexplore"]

SEED_LIMIT = 2**31 - 1


class Reexplore(
    gym.Wrapper[Any, Any, Any, Any],
    gym.utils.RecordConstructorArgs,
):
    """Restores a flagged state by replaying the episode from its seed. Opt-in.

    Every episode gets a known seed (drawn from the wrapper's generator when
    ``reset`` is called without one) and its actions are recorded, so any of
    its states can be reached again by ``reset(seed)`` plus the replayed
    action prefix. This is exact for deterministic envs, the contract every
    feedbackgym env id without ``nondeterministic=True`` meets.

    ``reset(options={"restore": point})`` starts from ``point``: a re-explore
    point from a review (``{"step": t, ...}``, the state before step ``t`` of
    the last finished episode) or an explicit ``{"seed": s, "actions": [...]}``.
    With ``restore_prob > 0`` (and :class:`AddReview` inside), a reset without
    options starts from the last review's first re-explore point with that
    probability. ``info["restored_from"]`` names the point.

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> env = Reexplore(gym.make("feedbackgym/OpsIncidentEasy-v0"))
        >>> _ = env.reset(seed=0)
        >>> _ = env.step("wait"); _ = env.step("escalate")
        >>> env.reset(options={"restore": {"step": 1}})[1]["restored_from"]
        {'seed': 0, 'step': 1}

    Change logs:
     * v0.1.0 - Initially added
    """

    def __init__(self, env: gym.Env[Any, Any], *, restore_prob: float = 0.0) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, restore_prob=restore_prob)
        gym.Wrapper.__init__(self, env)
        if not 0.0 <= restore_prob <= 1.0:
            raise ValueError(f"restore_prob must be in [0, 1], got {restore_prob}")
        if restore_prob > 0 and find_wrapper(env, AddReview) is None:
            raise ValueError(
                "restore_prob > 0 needs AddReview inside Reexplore (it reads the reviews)"
            )
        self.restore_prob = restore_prob
        self._rng: np.random.Generator | None = None
        self._seed = 0
        self._actions: list[Any] = []
        self._finished: tuple[int, list[Any]] | None = None
        self._last_review: dict[str, Any] | None = None
        self.restores = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Resets the env, or restores a point given in ``options["restore"]``."""
        self._rng = seeded_rng(seed, 0x7265, self._rng)
        options = dict(options or {})
        point = options.pop("restore", None)
        if point is None and self._auto_restore_due():
            assert self._last_review is not None
            point = self._last_review["reexplore"][0]
        if point is not None:
            return self._restore(point, options)
        self._seed = int(seed) if seed is not None else int(self._rng.integers(SEED_LIMIT))
        self._actions = []
        return self.env.reset(seed=self._seed, options=options or None)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps the env and records the action."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._actions.append(json_safe(action))
        if terminated or truncated:
            self._finished = (self._seed, list(self._actions))
            review = (info.get(FEEDBACK) or {}).get("review")
            if review is not None and review.get("reexplore"):
                self._last_review = review
        return obs, reward, terminated, truncated, info

    def _auto_restore_due(self) -> bool:
        if self.restore_prob <= 0 or self._last_review is None:
            return False
        assert self._rng is not None
        return bool(self._rng.random() < self.restore_prob)

    def _restore(
        self, point: dict[str, Any], options: dict[str, Any]
    ) -> tuple[Any, dict[str, Any]]:
        if "seed" in point and "actions" in point:
            seed, actions = int(point["seed"]), list(point["actions"])
        elif "step" in point:
            if self._finished is None:
                raise FeedbackGymError("no finished episode to restore from; pass seed and actions")
            seed, episode = self._finished
            step = int(point["step"])
            if not 0 <= step <= len(episode):
                raise FeedbackGymError(
                    f"restore step {step} is outside the last episode (0..{len(episode)})"
                )
            actions = episode[:step]
        else:
            raise FeedbackGymError(
                f"a restore point needs 'step', or 'seed' and 'actions'; got {sorted(point)}"
            )
        obs, info = self.env.reset(seed=seed, options=options or None)
        for replayed, action in enumerate(actions):
            obs, _, terminated, truncated, info = self.env.step(action)
            if (terminated or truncated) and replayed < len(actions) - 1:
                raise FeedbackGymError(
                    f"the replay ended at step {replayed}: the env is not deterministic"
                )
        self._seed, self._actions = seed, list(actions)
        self.restores += 1
        info["restored_from"] = {"seed": seed, "step": len(actions)}
        return obs, info
