"""The env stack of each comparison arm: one stack, the schedule decides who speaks.

Every arm gets the same observation space (hint and review fields are zero
when their weight is zero), so networks are comparable across arms:

* ``sparse``: the env reward only.
* ``shaping``: shaping from subgoal progress all training long, no hints or reviews.
* ``guide``: hints (vector; half the episodes unguided) and shaping, all training long.
* ``review``: reviews (vector summary and per-step credit), all training long.
* ``guide-then-review``: shaping all along; hints first, then a cross-fade into reviews.
* ``review-then-guide``: the reverse order.

Shaping is the dense reward channel of the guide arms and stays on for the whole
run: withdrawing it with the hints left the policy with the sparse reward alone
and collapsed it after the switch (measured on OpsIncidentEasy, see the README).
Hints are withheld from whole episodes (half of them), not from single steps: with
30% of single hints dropped the policy leaned on the hints (0-17% success with them
masked while 84% with them) and lost a third of its success at the switch; with
half the episodes unguided it learns to play without them and keeps its success.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from feedbackgym.schedules import ARMS
from feedbackgym.wrappers import AddGuide, AddReview, FadeGuideToReview, ShapeWithSubgoals
from feedbackgym.wrappers.shaping import checked_gamma, checked_terminal

__all__ = ["ArmSettings", "checked_keep_checkpoints", "make_arm_env", "rounds_for"]


def rounds_for(steps: int, n_envs: int, n_steps: int) -> int:
    """Training rounds (rollouts of ``n_envs`` x ``n_steps``) in ``steps`` env steps, at least 1."""
    return max(1, steps // (n_envs * n_steps))


def checked_keep_checkpoints(keep: int) -> int:
    """Returns ``keep``, the round checkpoints a run keeps (0: every one).

    Raises:
        ValueError: ``keep`` is negative.
    """
    if keep < 0:
        raise ValueError(f"keep_checkpoints must be >= 0 (0 keeps every one), got {keep}")
    return keep


@dataclass(frozen=True)
class ArmSettings:
    """Feedback settings shared by the arms of a comparison.

    Attributes:
        total_rounds: Training length in rounds (the schedule's unit).
        switch_at: Fraction of training before the fade starts.
        fade: Fade length, in rounds.
        every: Guide density (a hint every ``every`` steps).
        dropout: Chance that a due hint is withheld in the guide phase.
        dropout_scope: ``"step"`` (single hints) or ``"episode"`` (whole episodes unguided).
        window: Review window length.
        gamma: Discount of the shaping term; the runner (``compare``) also trains PPO
            with it, so the two match.
        shaping_terminal: ``"keep"`` (progress reward survives a failed episode,
            a bias towards ending with more subgoals done), ``"zero"`` (the
            policy-invariant form, which left too little signal to learn from) or
            ``"zero_on_harm"`` (kept, unless the episode ends on a harmful step);
            see :class:`ShapeWithSubgoals`.
        adaptive: :class:`~feedbackgym.schedules.TrendRule` arguments, or ``None``.
        env_kwargs: Keyword arguments for ``gym.make``.
    """

    total_rounds: int = 100
    switch_at: float = 0.4
    fade: float = 5
    every: int = 1
    dropout: float = 0.5
    dropout_scope: str = "episode"
    window: int = 40
    gamma: float = 0.99
    shaping_terminal: str = "keep"
    adaptive: dict[str, Any] | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        checked_gamma(self.gamma)
        checked_terminal(self.shaping_terminal)


def make_arm_env(env_id: str, arm: str, settings: ArmSettings = ArmSettings()) -> gym.Env[Any, Any]:
    """Builds the env stack of ``arm``.

    Raises:
        ValueError: Unknown arm.
    """
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; choose one of {', '.join(ARMS)}")
    env = gym.make(env_id, **settings.env_kwargs)
    shaping_scale = 0.0 if arm in ("sparse", "review") else 1.0
    env = ShapeWithSubgoals(
        env, gamma=settings.gamma, scale=shaping_scale, terminal=settings.shaping_terminal
    )
    env = AddGuide(
        env,
        every=settings.every,
        channels=("vector", "info"),
        dropout=settings.dropout,
        dropout_scope=settings.dropout_scope,
    )
    env = AddReview(env, window=settings.window, channels=("vector", "info", "credit"))
    schedule: dict[str, Any] = {"arm": arm, "total": settings.total_rounds}
    if arm in ("guide-then-review", "review-then-guide"):
        schedule.update(
            switch_at=settings.switch_at, fade=settings.fade, adaptive=settings.adaptive
        )
    return FadeGuideToReview(env, schedule=schedule)
