"""Transition batches from the catalog: recent rounds favoured, with a floor for old ones."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from gymnasium import spaces

from feedbackgym.datasets._storage.catalog import Catalog, Entry
from feedbackgym.datasets._storage.segment import SegmentRef
from feedbackgym.datasets.columns import nest_columns
from feedbackgym.datasets.episode import Episode

__all__ = ["fill_replay_buffer", "sample_batch", "split_recent", "to_torch"]

_SAMPLED = (
    "observations",
    "actions",
    "rewards",
    "env_rewards",
    "shaping_rewards",
    "terminations",
    "truncations",
)


def _sampled(name: str) -> bool:
    return name.split("/", 1)[0] in _SAMPLED


def split_recent(entries: list[Entry]) -> tuple[list[Entry], list[Entry]]:
    """Splits episodes into each task's latest round (recent) and the rest (old).

    A task's latest round is its highest round number when every round name is
    an integer, else the round whose last episode ended last.
    """
    rounds: dict[str, dict[str, list[Entry]]] = {}
    for entry in entries:
        rounds.setdefault(entry.meta.task_id, {}).setdefault(entry.meta.round, []).append(entry)
    recent: list[Entry] = []
    old: list[Entry] = []
    for by_round in rounds.values():
        latest = max(by_round, key=lambda name: _round_order(name, by_round))
        for name, members in by_round.items():
            (recent if name == latest else old).extend(members)
    return recent, old


def _round_order(name: str, by_round: dict[str, list[Entry]]) -> tuple[float, float]:
    if all(r.lstrip("-").isdigit() for r in by_round):
        return (float(name), 0.0)
    return (0.0, max(e.meta.end_time for e in by_round[name]))


def sample_batch(
    catalog: Catalog,
    entries: list[Entry],
    batch_size: int,
    recent_fraction: float,
    min_old_fraction: float,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """Draws ``batch_size`` transitions (see :meth:`TrajectoryStore.sample`).

    Raises:
        ValueError: No episode matches, or a bad size or fraction.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    for name, value in (
        ("recent_fraction", recent_fraction),
        ("min_old_fraction", min_old_fraction),
    ):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    if not entries:
        raise ValueError("no episodes match: nothing to sample")
    recent, old = split_recent(entries)
    n_old = 0
    if old:
        share = max(1.0 - recent_fraction, min_old_fraction) if recent else 1.0
        n_old = round(batch_size * share)
    picks = _draw(recent, batch_size - n_old, rng) + _draw(old, n_old, rng)
    batch = _gather(catalog, picks)
    batch["recent"] = np.arange(batch_size) < batch_size - n_old
    return batch


def _draw(pool: list[Entry], count: int, rng: np.random.Generator) -> list[tuple[Entry, int]]:
    """Uniform over the pool's steps: episodes weighted by length."""
    if count == 0:
        return []
    ends = np.cumsum([e.meta.length for e in pool])
    steps = rng.integers(ends[-1], size=count)
    which = np.searchsorted(ends, steps, side="right")
    starts = ends[which] - np.array([pool[i].meta.length for i in which])
    return [(pool[i], int(s - start)) for i, s, start in zip(which, steps, starts, strict=True)]


def _gather(catalog: Catalog, picks: list[tuple[Entry, int]]) -> dict[str, Any]:
    groups: dict[object, tuple[dict[str, Any], list[tuple[int, int, int]]]] = {}
    for position, (entry, t) in enumerate(picks):
        source = entry.source
        key: object
        if isinstance(source, SegmentRef):
            key = (source.path, source.group)
            step, obs = source.step_start + t, source.obs_start + t
        else:
            key, step, obs = id(source), t, t
        if key not in groups:
            groups[key] = (_columns(catalog, source), [])
        groups[key][1].append((position, step, obs))
    _check_same_layout([columns for columns, _ in groups.values()])
    flat: dict[str, np.ndarray] = {}
    following: dict[str, np.ndarray] = {}
    for columns, rows in groups.values():
        positions, steps, observations = (np.array(r) for r in zip(*rows, strict=True))
        for name, column in columns.items():
            if name.startswith("observations"):
                _put(flat, name, column, positions, observations, len(picks))
                _put(following, name, column, positions, observations + 1, len(picks))
            else:
                _put(flat, name, column, positions, steps, len(picks))
    return {
        "observations": nest_columns(flat, "observations"),
        "next_observations": nest_columns(following, "observations"),
        "actions": nest_columns(flat, "actions"),
        **{name: flat[name] for name in _SAMPLED[2:]},
    }


def _check_same_layout(groups: list[dict[str, Any]]) -> None:
    """One batch needs one layout: the same columns, with the same row shapes, everywhere."""
    first = {name: column.shape[1:] for name, column in groups[0].items()}
    for columns in groups[1:]:
        other = {name: column.shape[1:] for name, column in columns.items()}
        if other != first:
            differ = sorted(set(first) ^ set(other)) or sorted(
                name for name in first if first[name] != other[name]
            )
            raise ValueError(
                f"the sampled episodes have different observations or actions ({differ}): "
                "sample one task at a time (task=...)"
            )


def _columns(catalog: Catalog, source: SegmentRef | Episode) -> dict[str, Any]:
    if isinstance(source, Episode):
        return {n: c for n, c in source.complete().columns.items() if _sampled(n)}
    return catalog.cached_columns(source.path, source.group, _sampled)


def _put(
    out: dict[str, np.ndarray],
    name: str,
    column: np.ndarray,
    positions: np.ndarray,
    rows: np.ndarray,
    size: int,
) -> None:
    if name not in out:
        out[name] = np.empty((size, *column.shape[1:]), column.dtype)
    out[name][positions] = column[rows]


def to_torch(batch: dict[str, Any], device: str | None) -> dict[str, Any]:
    """Turns a batch's numeric arrays into torch tensors (text stays a list of ``str``).

    Raises:
        DependencyNotInstalled: torch is missing.
    """
    try:
        import torch
    except ImportError as error:
        from feedbackgym.errors import DependencyNotInstalled

        raise DependencyNotInstalled.for_extra("torch", "baselines") from error

    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        if isinstance(value, tuple):
            return tuple(convert(v) for v in value)
        if value.dtype == object:
            return value.tolist()
        return torch.as_tensor(value, device=device)

    return {key: convert(value) for key, value in batch.items()}


def fill_replay_buffer(buffer: Any, episodes: Iterable[Episode], reward: str) -> int:
    """Adds the episodes' transitions to an SB3 ``ReplayBuffer``/``DictReplayBuffer``.

    Transitions go in ``buffer.n_envs`` at a time; a remainder smaller than
    that is left out. ``done`` is termination or truncation, and truncations
    are flagged as ``TimeLimit.truncated`` so SB3 bootstraps through them.

    Returns:
        How many transitions were added.
    """
    space = buffer.observation_space
    keys = list(space.spaces) if isinstance(space, spaces.Dict) else None
    parts: dict[str, list[Any]] = {}
    for episode in episodes:
        obs = episode.observations
        for name, value in (
            ("obs", {k: obs[k] for k in keys} if keys is not None else obs),
            ("rewards", episode.columns[reward]),
            ("terminations", episode.terminations),
            ("truncations", episode.truncations),
            ("actions", episode.actions),
        ):
            parts.setdefault(name, []).append(value)
    if not parts:
        return 0
    n_envs = buffer.n_envs
    transitions = sum(len(r) for r in parts["rewards"])
    merged = {name: _concat(values, False) for name, values in parts.items() if name != "obs"}
    current, following = _concat(parts["obs"], True)
    added = transitions - transitions % n_envs
    for i in range(0, added, n_envs):
        rows = slice(i, i + n_envs)
        truncated = merged["truncations"][rows] & ~merged["terminations"][rows]
        buffer.add(
            _rows(current, rows),
            _rows(following, rows),
            merged["actions"][rows],
            merged["rewards"][rows],
            merged["terminations"][rows] | merged["truncations"][rows],
            [{"TimeLimit.truncated": bool(t)} for t in truncated],
        )
    return added


def _concat(values: list[Any], observations: bool) -> Any:
    """Concatenates per-episode columns; observations give (current, next) pairs."""
    first = values[0]
    if isinstance(first, dict):
        pairs = {k: _concat([v[k] for v in values], observations) for k in first}
        if observations:
            return ({k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()})
        return pairs
    if observations:
        return np.concatenate([v[:-1] for v in values]), np.concatenate([v[1:] for v in values])
    return np.concatenate(values)


def _rows(value: Any, rows: slice) -> Any:
    if isinstance(value, dict):
        return {k: v[rows] for k, v in value.items()}
    return value[rows]
