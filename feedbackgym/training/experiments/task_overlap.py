"""What a comparison's validation seeds pose, counted on the evaluator's side by their task keys.

A score on the test split says something about new problems only if the
validation seeds pose problems training does not. :func:`validation_overlap`
resets the validation env on each validation seed and a train env on the
first training seeds, reads each task's key through
:func:`feedbackgym.protocol.task_key` (never through ``info``), and says how
many distinct tasks validation played and how many of them training drew;
``compare`` adds the line to its ``results.md``.

Example:
    >>> line = validation_overlap("feedbackgym/OpsIncidentEasy-v2", {}, 10, train_seeds=200)
    >>> line.startswith("10 validation seeds (split test): 9 distinct tasks, 0 of them")
    True
    >>> validation_overlap("feedbackgym/OpsIncidentEasy-v0", {}, 10) is None  # no task keys
    True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from feedbackgym.protocol import task_key
from feedbackgym.registration import evaluation_kwargs, has_splits
from feedbackgym.training.common.validation import validation_seeds

__all__ = ["TRAIN_SEEDS", "task_keys", "validation_overlap"]

TRAIN_SEEDS = 2_000
"""Training seeds whose tasks the validation tasks are compared with."""


def task_keys(env: gym.Env[Any, Any], seeds: Iterable[int]) -> list[str | None]:
    """The task key of each seed's reset of ``env`` (``None`` for an env without keys)."""
    keys = []
    for seed in seeds:
        env.reset(seed=seed)
        keys.append(task_key(env))
    return keys


def validation_overlap(
    env_id: str, env_kwargs: dict[str, Any], episodes: int, *, train_seeds: int = TRAIN_SEEDS
) -> str | None:
    """One line on the validation seeds' tasks, or ``None`` for an env without task keys.

    Args:
        env_id: The comparison's env.
        env_kwargs: Its keyword arguments.
        episodes: Validation episodes a round (the first held-out seeds).
        train_seeds: Training seeds (``0..train_seeds - 1``) to compare with.
    """
    entry_point = gym.spec(env_id).entry_point
    creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    if not hasattr(creator, "task_key"):
        return None  # nothing to count: no env is made (a browser, a sandbox)
    held_kwargs = evaluation_kwargs(env_id, env_kwargs)
    evaluation = gym.make(env_id, **held_kwargs)
    try:
        held = task_keys(evaluation, validation_seeds(evaluation, episodes))
    finally:
        evaluation.close()
    if None in held:
        return None
    train_kwargs = {**env_kwargs, "split": "train"} if has_splits(env_id) else env_kwargs
    training = gym.make(env_id, **train_kwargs)
    try:
        trained = set(task_keys(training, range(train_seeds)))
    finally:
        training.close()
    split = held_kwargs.get("split", "held-out seeds")
    return (
        f"{len(held)} validation seeds (split {split}): {len(set(held))} distinct tasks, "
        f"{len(set(held) & trained)} of them among the {len(trained):,} train tasks of the "
        f"first {train_seeds:,} train seeds (task keys, read on the evaluator side)"
    )
