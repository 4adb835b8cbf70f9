"""Validation: a policy on held-out seeds in the current feedback phase, hints shown and masked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
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
from feedbackgym.training.workers.env_groups import steps_slowly

__all__ = [
    "VALIDATION_ENVS",
    "Evaluation",
    "Policy",
    "evaluate_policy",
    "one_at_a_time",
    "validation_envs",
    "validation_seeds",
]

VALIDATION_ENVS = 16
"""Copies of the stack a run validates on at once (envs with slow steps, web and code:
one, so that a run does not hold 16 browsers or sandboxes)."""

Policy = Callable[[list[Any]], Sequence[int]]
"""Maps a list of observations (one per validation env in play) to their actions
(validations sample them)."""


def one_at_a_time(act: Callable[[Any], int]) -> Policy:
    """A :data:`Policy` from a function that maps one observation to an action.

    Example:
        >>> one_at_a_time(lambda obs: obs + 1)([1, 2])
        [2, 3]
    """
    return lambda observations: [act(obs) for obs in observations]


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
        self,
        step: int,
        round_: int,
        phase: str,
        replayed_steps: int = 0,
        seconds: float | None = None,
        curriculum: float | None = None,
    ) -> dict[str, Any]:
        """This validation as a row of a run's ``curve.csv`` (its ``CURVE_FIELDS``).

        ``curriculum`` is the width in force at the validation (the next round's; empty
        without a curriculum).

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
            "seconds": "" if seconds is None else round(seconds, 2),
            "curriculum": "" if curriculum is None else curriculum,
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


def validation_envs(config: Any) -> int:
    """How many copies of its stack a run (a ``RunConfig``) validates on at once.

    Example:
        >>> from types import SimpleNamespace
        >>> ops = SimpleNamespace(env_id="feedbackgym/OpsIncidentEasy-v0", eval_episodes=30)
        >>> validation_envs(ops)
        16
        >>> validation_envs(SimpleNamespace(env_id="feedbackgym/WebForm-v0", eval_episodes=30))
        1
    """
    if steps_slowly(config.env_id):
        return 1
    return max(1, min(VALIDATION_ENVS, config.eval_episodes))


def _play(
    envs: Sequence[gym.Env[Any, Any]], policy: Policy, seeds: Sequence[int]
) -> tuple[float, float, float]:
    """Plays one episode per seed, the envs in lockstep: one policy call per step of them all.

    Each env plays the next seed not yet started as soon as its episode ends.
    """
    results: dict[int, tuple[bool, float, int]] = {}
    pending = iter(enumerate(seeds))
    playing: dict[int, list[Any]] = {}  # env -> [seed's index, observation, return, length]

    def start(env: int) -> None:
        index, seed = next(pending, (None, None))
        if index is not None:
            obs, _ = envs[env].reset(seed=seed)
            playing[env] = [index, obs, 0.0, 0]

    for env in range(min(len(envs), len(seeds))):
        start(env)
    while playing:
        order = list(playing)
        actions = policy([playing[env][1] for env in order])
        for env, action in zip(order, actions, strict=True):
            episode = playing[env]
            obs, reward, terminated, truncated, info = envs[env].step(int(action))
            episode[1] = obs
            episode[2] += float(info.get(ENV_REWARD, reward))
            episode[3] += 1
            if terminated or truncated:
                results[episode[0]] = (bool(info.get(IS_SUCCESS, False)), episode[2], episode[3])
                del playing[env]
                start(env)
    successes, returns, lengths = zip(*(results[k] for k in range(len(seeds))), strict=True)
    return float(np.mean(successes)), float(np.mean(returns)), float(np.mean(lengths))


def evaluate_policy(
    envs: Sequence[gym.Env[Any, Any]], policy: Policy, seeds: Sequence[int], state: FeedbackState
) -> Evaluation:
    """Evaluates ``policy`` on ``seeds`` in feedback ``state``, hints shown and masked.

    Args:
        envs: Copies of the arm's env stack (with
            :class:`~feedbackgym.wrappers.FadeGuideToReview`), played in lockstep:
            ``len(envs)`` episodes at a time, one batched policy call a step.
        policy: Maps the observations of the envs in play to their actions.
        seeds: Validation seeds, one episode each.
        state: The controller's state to evaluate in (pushed to every env).

    Example:
        >>> import feedbackgym
        >>> from feedbackgym.protocol import FeedbackState
        >>> envs = [feedbackgym.make("feedbackgym/OpsIncidentEasy-v0") for _ in range(2)]
        >>> wait = one_at_a_time(lambda obs: 0)
        >>> state = FeedbackState(phase="none", guide_weight=0.0, review_weight=0.0)
        >>> evaluate_policy(envs, wait, [10_000, 10_001, 10_002], state).success
        0.0
    """

    def push(feedback: FeedbackState) -> None:
        for env in envs:
            call_envs(env, SET_FEEDBACK_STATE, feedback)

    state = replace(state, curriculum=None)  # validation plays the preset, never the curriculum
    push(state.masked(False))
    success, mean_return, mean_length = _play(envs, policy, seeds)
    if state.guide_weight == 0:
        unguided = success
    else:
        push(state.masked())
        unguided = _play(envs, policy, seeds)[0]
        push(state.masked(False))
    return Evaluation(success, unguided, mean_return, mean_length)
