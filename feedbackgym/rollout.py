"""Runs a built-in policy (random or expert) on an env and summarises the episodes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from feedbackgym.errors import FeedbackGymError
from feedbackgym.protocol import IS_SUCCESS, SUBGOALS

__all__ = ["POLICIES", "EpisodeResult", "make_policy", "run_episodes", "summarize"]

POLICIES: tuple[str, ...] = ("random", "expert")
"""Names of the built-in policies."""


@dataclass(frozen=True)
class EpisodeResult:
    """What one episode came to.

    Attributes:
        seed: The seed the episode was reset with.
        success: Whether ``info["is_success"]`` was true at the end.
        episode_return: Sum of rewards.
        length: Steps taken.
        subgoals_done: Ids of the subgoals reached, in library order.
        subgoals_total: Size of the episode's subgoal library.
        outcome: ``info["outcome"]`` at the end, or ``"truncated"``.
    """

    seed: int
    success: bool
    episode_return: float
    length: int
    subgoals_done: tuple[str, ...]
    subgoals_total: int
    outcome: str


def make_policy(env: gym.Env[Any, Any], name: str, seed: int) -> Callable[[], Any]:
    """Returns a zero-argument callable giving the next action of policy ``name``.

    Raises:
        FeedbackGymError: ``name`` is unknown, or the env has no expert.
    """
    if name == "random":
        env.action_space.seed(seed)
        return env.action_space.sample
    if name == "expert":
        expert = getattr(env.unwrapped, "expert_action", None)
        if expert is None:
            env_id = env.spec.id if env.spec else type(env.unwrapped).__name__
            raise FeedbackGymError(f"{env_id} has no expert policy (env.unwrapped.expert_action)")
        return expert
    raise FeedbackGymError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")


def run_episodes(
    env: gym.Env[Any, Any],
    policy: str,
    episodes: int,
    seed: int = 0,
    *,
    progress: Callable[[Iterable[int]], Iterable[int]] = iter,
) -> Iterator[EpisodeResult]:
    """Plays ``episodes`` episodes with seeds ``seed, seed + 1, ...``.

    Args:
        env: The env, usually from ``gym.make`` (so ``TimeLimit`` truncates).
        policy: ``"random"`` or ``"expert"``.
        episodes: How many episodes.
        seed: Seed of the first episode.
        progress: Wraps the episode range, e.g. with a progress bar.

    Yields:
        One result per episode, as it finishes.
    """
    act = make_policy(env, policy, seed)
    for episode in progress(range(episodes)):
        episode_seed = seed + episode
        _, info = env.reset(seed=episode_seed)
        total, length, done = 0.0, 0, False
        terminated = False
        while not done:
            _, reward, terminated, truncated, info = env.step(act())
            total += float(reward)
            length += 1
            done = terminated or truncated
        progress_map: dict[str, bool] = info.get(SUBGOALS, {})
        yield EpisodeResult(
            seed=episode_seed,
            success=bool(info.get(IS_SUCCESS, False)),
            episode_return=total,
            length=length,
            subgoals_done=tuple(k for k, v in progress_map.items() if v),
            subgoals_total=len(progress_map),
            outcome=str(info.get("outcome", "terminated")) if terminated else "truncated",
        )


def summarize(results: list[EpisodeResult]) -> dict[str, float]:
    """Success rate, mean return, mean and median length, mean subgoal fraction."""
    if not results:
        raise ValueError("no episodes to summarise")
    return {
        "episodes": float(len(results)),
        "success_rate": float(np.mean([r.success for r in results])),
        "mean_return": float(np.mean([r.episode_return for r in results])),
        "mean_length": float(np.mean([r.length for r in results])),
        "median_length": float(np.median([r.length for r in results])),
        "subgoal_fraction": float(
            np.mean([len(r.subgoals_done) / max(1, r.subgoals_total) for r in results])
        ),
    }
