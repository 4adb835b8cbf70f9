"""What a store holds, per task and round: the numbers ``feedbackgym datasets inspect`` prints."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from feedbackgym.datasets._storage.catalog import (
    COLD_DIR,
    Catalog,
    Entry,
    load_episodes,
    segment_files,
)
from feedbackgym.datasets._storage.hdf5 import h5py
from feedbackgym.datasets._storage.segment import DAMAGE_ERRORS, SegmentRef, as_read_error
from feedbackgym.datasets.episode import FeedbackType
from feedbackgym.datasets.errors import DamagedFile, StoreError, damaged_file

__all__ = ["RoundSummary", "StoreFiles", "summarize"]


@dataclass
class RoundSummary:
    """One task and round of a store.

    Attributes:
        task_id: The task.
        round: The round.
        episodes: Episodes.
        steps: Steps.
        successes: Episodes with ``is_success`` true.
        judged: Episodes that report ``is_success`` at all.
        phases: Episodes per schedule phase at their reset (without a schedule: none).
        guides: Hints given.
        reviews: Reviews given.
        size: Bytes the round's data takes in sealed files (in memory, for logs).
    """

    task_id: str
    round: str
    episodes: int = 0
    steps: int = 0
    successes: int = 0
    judged: int = 0
    phases: Counter[str] = field(default_factory=Counter)
    guides: int = 0
    reviews: int = 0
    size: int = 0


@dataclass(frozen=True)
class StoreFiles:
    """The files of a store.

    Attributes:
        hot: Sealed segments in the store's top level (damaged ones included).
        cold: Sealed segments under ``cold/`` (damaged ones included).
        logs: Live or orphan write-ahead logs.
        size: Bytes of all of them.
        damaged: The files that cannot be read (their episodes are not counted).
    """

    hot: int
    cold: int
    logs: int
    size: int
    damaged: tuple[DamagedFile, ...] = ()


def summarize(path: str | os.PathLike[str]) -> tuple[list[RoundSummary], StoreFiles]:
    """Counts episodes, steps, successes, phases, feedback and bytes per task and round.

    Raises:
        StoreError: ``path`` does not exist.
    """
    root = Path(path)
    if not root.exists():
        raise StoreError(f"{root} does not exist")
    catalog = Catalog(root)
    feedback: Counter[tuple[str, str, int]] = Counter()  # (task, round, kind) -> events
    events = load_episodes(
        catalog, catalog.entries(), lambda name: name == "events/type", skip_damaged=True
    )
    for episode in events:
        kinds = episode.column("events/type")
        for kind in (FeedbackType.GUIDE, FeedbackType.REVIEW):
            feedback[(episode.meta.task_id, episode.meta.round, kind)] += int((kinds == kind).sum())
    sizes = _sizes(catalog, catalog.entries())
    rounds: dict[tuple[str, str], RoundSummary] = {}
    for entry in catalog.entries():  # without the segments found damaged above
        meta = entry.meta
        summary = rounds.setdefault(
            (meta.task_id, meta.round), RoundSummary(meta.task_id, meta.round)
        )
        summary.episodes += 1
        summary.steps += meta.length
        summary.judged += meta.success is not None
        summary.successes += bool(meta.success)
        if meta.phase:
            summary.phases[meta.phase] += 1
    for (task_id, round), summary in rounds.items():
        summary.guides = feedback[(task_id, round, FeedbackType.GUIDE)]
        summary.reviews = feedback[(task_id, round, FeedbackType.REVIEW)]
        summary.size = sizes.get((task_id, round), 0)
    segments = segment_files(root)
    logs = [] if root.is_file() else list(root.glob("*.log"))
    files = StoreFiles(
        hot=sum(p.parent.name != COLD_DIR for p in segments),
        cold=sum(p.parent.name == COLD_DIR for p in segments),
        logs=len(logs),
        size=sum(_size(p) for p in [*segments, *logs]),
        damaged=tuple(catalog.damaged),
    )
    return list(rounds.values()), files


def _sizes(catalog: Catalog, entries: list[Entry]) -> dict[tuple[str, str], int]:
    """Bytes per task and round; a segment whose structure fails here is marked damaged."""
    sizes: Counter[tuple[str, str]] = Counter()
    groups: dict[tuple[Path, str], tuple[str, str]] = {}
    for entry in entries:
        key = (entry.meta.task_id, entry.meta.round)
        if isinstance(entry.source, SegmentRef):
            groups[(entry.source.path, entry.source.group)] = key
        else:
            sizes[key] += sum(c.nbytes for c in entry.source.columns.values())
    for (path, group), key in groups.items():
        try:
            with h5py.File(path, "r") as file:
                sizes[key] += _storage_size(file[group])
        except FileNotFoundError:  # moved by retention since it was listed
            continue
        except DAMAGE_ERRORS as error:
            catalog.mark_damaged(damaged_file(path, as_read_error(error)))
    return dict(sizes)


def _storage_size(group: Any) -> int:
    sizes: list[int] = []

    def visit(_: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset):
            sizes.append(obj.id.get_storage_size())

    group.visititems(visit)
    return sum(sizes)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # a log sealed (and removed) since it was listed
        return 0
