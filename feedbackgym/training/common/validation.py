"""Validation: a policy on held-out seeds in the current feedback phase, hints shown and masked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from feedbackgym.envs.base import VALIDATION_SEED_START
from feedbackgym.experts import held_out_seeds
from feedbackgym.protocol import (
    ENV_REWARD,
    IS_SUCCESS,
    SET_FEEDBACK_STATE,
    FeedbackState,
    call_envs,
)

__all__ = ["Evaluation", "Policy", "evaluate_policy", "validation_seeds"]

Policy = Callable[[Any], int]
"""Maps one observation to an action (validations sample it)."""


@dataclass(frozen=True)
class Evaluation:
    """What a policy achieved on the validation seeds.

    Attributes:
        success: Success rate with the feedback the schedule gives now.
        success_unguided: Success rate with hints masked (guide weight 0).
        mean_return: Mean env return (without shaping) with the scheduled feedback.
        mean_length: Mean episode length with the scheduled feedback.
    """

    success: float
    success_unguided: float
    mean_return: float
    mean_length: float

    @property
    def reliance(self) -> float:
        """How much success depends on the hints: success shown minus success masked."""
        return self.success - self.success_unguided

    def curve_row(
        self, step: int, round_: int, phase: str, replayed_steps: int = 0
    ) -> dict[str, Any]:
        """This validation as a row of a run's ``curve.csv`` (its ``CURVE_FIELDS``).

        Example:
            >>> Evaluation(0.5, 0.25, 0.5, 12.0).curve_row(1024, 1, "guide")["success_unguided"]
            0.25
        """
        return {
            "step": step,
            "round": round_,
            "phase": phase,
            "success": self.success,
            "success_unguided": self.success_unguided,
            "mean_return": self.mean_return,
            "mean_length": self.mean_length,
            "replayed_steps": replayed_steps,
        }


def validation_seeds(env: gym.Env[Any, Any], count: int) -> list[int]:
    """The first ``count`` held-out seeds (:func:`~feedbackgym.experts.held_out_seeds`).

    A third-party env without ``validation_seeds`` is validated on seeds from
    :data:`~feedbackgym.envs.base.VALIDATION_SEED_START` on, which training
    seeds stay below.
    """
    try:
        return list(held_out_seeds(env))[:count]
    except ValueError:
        return list(range(VALIDATION_SEED_START, VALIDATION_SEED_START + count))


def _play(
    env: gym.Env[Any, Any], policy: Policy, seeds: Sequence[int]
) -> tuple[float, float, float]:
    successes, returns, lengths = [], [], []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        total, length, done = 0.0, 0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy(obs))
            total += float(info.get(ENV_REWARD, reward))
            length += 1
            done = terminated or truncated
        successes.append(bool(info.get(IS_SUCCESS, False)))
        returns.append(total)
        lengths.append(length)
    return float(np.mean(successes)), float(np.mean(returns)), float(np.mean(lengths))


def evaluate_policy(
    env: gym.Env[Any, Any], policy: Policy, seeds: Sequence[int], state: FeedbackState
) -> Evaluation:
    """Evaluates ``policy`` on ``seeds`` in feedback ``state``, hints shown and masked.

    Args:
        env: The arm's env stack (with :class:`~feedbackgym.wrappers.FadeGuideToReview`).
        policy: Maps an observation to an action.
        seeds: Validation seeds.
        state: The controller's state to evaluate in (pushed to ``env``).
    """
    call_envs(env, SET_FEEDBACK_STATE, state.masked(False))
    success, mean_return, mean_length = _play(env, policy, seeds)
    if state.guide_weight == 0:
        unguided = success
    else:
        call_envs(env, SET_FEEDBACK_STATE, state.masked())
        unguided = _play(env, policy, seeds)[0]
        call_envs(env, SET_FEEDBACK_STATE, state.masked(False))
    return Evaluation(success, unguided, mean_return, mean_length)
