"""Export to a Minari dataset, so that ``minari.load_dataset`` reads the trajectories.

Observations, actions, rewards, terminations and truncations map one to one.
Minari's ``infos`` get one row per observation (row 0 is the reset):
``feedback_type``, ``phase``, ``guide_weight``, ``review_weight``,
``subgoals_done``, and ``env_reward`` and ``shaping_reward`` (0 at the reset).
Hint and review payloads stay in the store.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Unpack

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec

from feedbackgym.datasets.episode import Episode
from feedbackgym.datasets.store import EpisodeFilter, TrajectoryStore
from feedbackgym.errors import requires_extra

__all__ = ["export_minari"]


def export_minari(
    store: TrajectoryStore | str | os.PathLike[str],
    dataset_id: str,
    *,
    env: str | EnvSpec | gym.Env[Any, Any] | None = None,
    description: str | None = None,
    algorithm_name: str | None = None,
    author: str | None = None,
    **filters: Unpack[EpisodeFilter],
) -> Any:
    """Writes the matching episodes as a new Minari dataset (in ``MINARI_DATASETS_PATH``).

    Args:
        store: The store, or its path.
        dataset_id: The Minari id, ``[namespace/]name-v<N>``.
        env: The env (or its id or spec) the episodes came from; default: the
            env spec recorded with the first episode.
        description: The dataset's description.
        algorithm_name: How the episodes were collected (``"expert"``, ...).
        author: The dataset's author.
        **filters: Which episodes (see :class:`~feedbackgym.datasets.EpisodeFilter`);
            they must share one env.

    Returns:
        The ``minari.MinariDataset``.

    Raises:
        DependencyNotInstalled: minari is missing.
        ValueError: No episode matches, or no env is known.
    """
    with requires_extra("minari"):
        import minari
        from minari.data_collector import EpisodeBuffer
    if not isinstance(store, TrajectoryStore):
        store = TrajectoryStore(store)
    episodes = list(store.iter_episodes(**filters))
    if not episodes:
        raise ValueError(f"no episodes in {store.path} match {filters}")
    if env is None:
        if not episodes[0].meta.env_spec:
            raise ValueError("the episodes carry no env spec: pass env=")
        env, left_out = _rebuildable(EnvSpec.from_json(episodes[0].meta.env_spec))
        if left_out and description is None:
            description = (
                f"feedbackgym trajectories from {store.path.name}, recorded through "
                f"{', '.join(left_out)} (not in the env spec: it cannot be rebuilt from one)"
            )
    buffers = [
        EpisodeBuffer(
            id=index,
            seed=episode.meta.seed,
            observations=episode.observations,
            actions=episode.actions,
            rewards=episode.rewards,
            terminations=episode.terminations,
            truncations=episode.truncations,
            infos=_infos(episode),
        )
        for index, episode in enumerate(episodes)
    ]
    return minari.create_dataset_from_buffers(
        dataset_id,
        buffers,
        env=env,
        eval_env=env,
        algorithm_name=algorithm_name,
        author=author,
        description=description or f"feedbackgym trajectories from {store.path.name}",
        data_format="hdf5",
    )


def _rebuildable(spec: EnvSpec) -> tuple[EnvSpec, list[str]]:
    """``spec`` without the wrappers ``gym.make`` cannot rebuild (no arguments), and their names.

    Such a wrapper (:class:`~feedbackgym.wrappers.WithSubgoals`, whose
    predicates are code) adds to the info, not to the spaces, so the episodes
    fit the env without it.
    """
    kept = tuple(w for w in spec.additional_wrappers if w.kwargs is not None)
    left_out = [w.name for w in spec.additional_wrappers if w.kwargs is None]
    return dataclasses.replace(spec, additional_wrappers=kept), left_out


def _infos(episode: Episode) -> dict[str, np.ndarray]:
    def from_reset(step_values: np.ndarray) -> np.ndarray:
        return np.concatenate([[0.0], step_values])

    return {
        "feedback_type": episode.feedback_types,
        "phase": episode.column("schedule/phase"),
        "guide_weight": episode.column("schedule/guide_weight"),
        "review_weight": episode.column("schedule/review_weight"),
        "subgoals_done": episode.column("subgoals/done"),
        "env_reward": from_reset(episode.env_rewards),
        "shaping_reward": from_reset(episode.shaping_rewards),
    }
