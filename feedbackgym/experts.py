"""Standard-answer datasets: a built-in policy (the expert) played and recorded.

The ``train`` split plays seeds ``seed, seed + 1, ...`` (never a held-out
seed); the ``validation`` split plays the env's held-out seeds. Both are
stored as rounds of the same name, so one store can hold both. Stores go under
``$FEEDBACKGYM_DATASETS_PATH`` unless given a path (see :func:`default_dataset_path`).
The store (and h5py) loads only when a dataset is made.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from feedbackgym.registration import evaluation_kwargs
from feedbackgym.rollout import make_policy

if TYPE_CHECKING:
    from feedbackgym.datasets import TrajectoryStore

__all__ = [
    "DATASETS_PATH_ENV",
    "SPLITS",
    "default_dataset_path",
    "held_out_seeds",
    "make_expert_dataset",
]

SPLITS = ("train", "test", "validation")
"""Dataset splits (stored as the round name)."""
DATASETS_PATH_ENV = "FEEDBACKGYM_DATASETS_PATH"
"""Environment variable naming where expert datasets go by default."""


def default_dataset_path(env_id: str, policy: str) -> Path:
    """``$FEEDBACKGYM_DATASETS_PATH/<id>-<policy>`` (default root ``~/.feedbackgym/datasets``).

    Example:
        >>> default_dataset_path("feedbackgym/OpsIncident-v0", "expert").name
        'feedbackgym_OpsIncident-v0-expert'
    """
    root = os.environ.get(DATASETS_PATH_ENV) or Path.home() / ".feedbackgym" / "datasets"
    return Path(root) / f"{env_id.replace('/', '_')}-{policy}"


def held_out_seeds(env: gym.Env[Any, Any]) -> tuple[int, ...]:
    """The env's held-out validation seeds: ``env.unwrapped.validation_seeds``.

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> held_out_seeds(gym.make("feedbackgym/OpsIncidentEasy-v0"))[:2]
        (10000000, 10000001)

    Raises:
        ValueError: The env has no held-out seeds.
    """
    seeds = getattr(env.unwrapped, "validation_seeds", None)
    if seeds is not None:
        return tuple(seeds)
    name = env.spec.id if env.spec else type(env.unwrapped).__name__
    raise ValueError(f"{name} has no held-out validation seeds (env.unwrapped.validation_seeds)")


def make_expert_dataset(
    env: str | gym.Env[Any, Any],
    path: str | os.PathLike[str],
    episodes: int,
    policy: str = "expert",
    split: str = "train",
    *,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    task_id: str | None = None,
    compression: str | None = None,
    progress: bool = False,
) -> TrajectoryStore:
    """Plays ``episodes`` episodes of a built-in policy and records them.

    Args:
        env: A registered env id, or an env (for instance the wrapped stack a
            learner trains on, so the observations match its input exactly).
            An env passed in is not closed.
        path: The store directory.
        episodes: How many episodes.
        policy: ``"expert"`` (the env's oracle) or ``"random"``.
        split: ``"train"`` (seeds ``seed, seed + 1, ...``) or ``"test"``
            (alias ``"validation"``: the env's held-out seeds, in order, of
            its test split when it has one); stored as the round.
        seed: First seed of the train split.
        env_kwargs: Keyword arguments for ``gym.make`` (with an env id).
        task_id: The task id to store; default: the env id.
        compression: ``None``, ``"lzf"`` or ``"gzip"``.
        progress: Show a progress bar on stderr (when tqdm is installed).

    Returns:
        The store, with every episode sealed.

    Raises:
        ValueError: A bad split or episode count, a train seed that is held
            out, or more validation episodes than held-out seeds.
    """
    from feedbackgym.datasets import TrajectoryStore
    from feedbackgym.wrappers.record import RecordTrajectories

    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if episodes < 1:
        raise ValueError(f"episodes must be positive, got {episodes}")
    owned = isinstance(env, str)
    kwargs = dict(env_kwargs or {})
    if isinstance(env, str) and split != "train":
        kwargs = evaluation_kwargs(env, kwargs)
    base = gym.make(env, **kwargs) if isinstance(env, str) else env
    store = TrajectoryStore(path, compression=compression)
    try:
        seeds = _seeds(base, split, seed, episodes)
        recorder = RecordTrajectories(base, store, task_id=task_id, round=split)
        act = make_policy(recorder, policy, seeds[0])
        for episode_seed in _progress(seeds, f"{policy} {split}", progress):
            recorder.reset(seed=episode_seed)
            done = False
            while not done:
                _, _, terminated, truncated, _ = recorder.step(act())
                done = terminated or truncated
    finally:
        store.close()
        if owned:
            base.close()
    return store


def _seeds(env: gym.Env[Any, Any], split: str, seed: int, episodes: int) -> Sequence[int]:
    if split != "train":
        held = held_out_seeds(env)
        if episodes > len(held):
            raise ValueError(f"the env has {len(held)} held-out seeds, asked for {episodes}")
        return held[:episodes]
    seeds = range(seed, seed + episodes)
    if getattr(env.unwrapped, "split", None) is not None:
        return seeds  # the split, not the seed, keeps train and test apart
    try:
        held = held_out_seeds(env)
    except ValueError:
        return seeds
    clash = set(seeds) & set(held)
    if clash:
        raise ValueError(f"train seeds must avoid the held-out seeds, {min(clash)} is one")
    return seeds


def _progress(seeds: Sequence[int], label: str, show: bool) -> Iterable[int]:
    if not show:
        return seeds
    try:
        from tqdm import tqdm
    except ImportError:
        return seeds
    return tqdm(seeds, desc=label, unit="episode", file=sys.stderr)
