"""Retention: rounds past the hot limit move to a compressed cold file; past the cold limit they go.

A round's age is the time since its last episode ended. :func:`prune` first
seals the logs of crashed writers, then writes the rounds to move into one
new gzip-compressed file under ``cold/``, then rewrites (or deletes) the
files that held them; every file is written under a temporary name and
renamed, so an interrupted prune leaves each episode in at least one file
(readers skip duplicates, and the next prune finishes the job). Rounds that
live writers are still logging are never touched.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from feedbackgym.config import RetentionConfig
from feedbackgym.datasets._storage.catalog import COLD_DIR, Catalog, Entry, load_episodes
from feedbackgym.datasets._storage.hdf5 import h5py
from feedbackgym.datasets._storage.segment import SegmentRef, write_segment
from feedbackgym.datasets._storage.writer import shard_writer_alive
from feedbackgym.datasets.errors import StoreError, describe_os_error
from feedbackgym.datasets.store import TrajectoryStore

__all__ = ["COLD_LEVEL", "PrunePlan", "RoundAge", "prune"]

COLD_LEVEL = 4
"""gzip level of cold files."""
_DAY = 86_400.0


@dataclass(frozen=True)
class RoundAge:
    """A round, its size and how long ago its last episode ended."""

    task_id: str
    round: str
    episodes: int
    age_days: float


@dataclass(frozen=True)
class PrunePlan:
    """What :func:`prune` moved and deleted (or would, on a dry run).

    Attributes:
        to_cold: Rounds moved into a cold file.
        to_delete: Rounds deleted.
        cold_file: The new cold file, or ``None`` (nothing moved, or a dry run).
        dry_run: Whether nothing was changed.
    """

    to_cold: tuple[RoundAge, ...]
    to_delete: tuple[RoundAge, ...]
    cold_file: Path | None
    dry_run: bool

    def describe(self) -> str:
        """The plan in lines of text."""
        verb = "would " if self.dry_run else ""
        lines = [
            f"{verb}move to cold: {r.task_id} round {r.round} "
            f"({r.episodes} episodes, {r.age_days:.1f} days old)"
            for r in self.to_cold
        ]
        lines += [
            f"{verb}delete: {r.task_id} round {r.round} "
            f"({r.episodes} episodes, {r.age_days:.1f} days old)"
            for r in self.to_delete
        ]
        return "\n".join(lines) or "nothing to prune"


def prune(
    path: str | os.PathLike[str],
    retention: RetentionConfig | None = None,
    *,
    now: float | None = None,
    dry_run: bool = False,
) -> PrunePlan:
    """Applies the retention limits to a store.

    Args:
        path: The store directory.
        retention: The limits (``hot_days``, ``cold_days``, ``min_raw_days``);
            default: the config defaults (7, 90, 30). Nothing is deleted
            younger than ``max(cold_days, min_raw_days)``: cold files are
            lossless, so they keep the raw records.
        now: The time to measure ages from (Unix seconds; default: now).
        dry_run: Only say what would happen.

    Returns:
        The plan, carried out unless ``dry_run``.

    Raises:
        StoreError: ``path`` is not a store directory, the store cannot be
            written, or another prune is running.
    """
    root = Path(path)
    if not root.is_dir():
        raise StoreError(f"{root} is not a trajectory store directory")
    limits = retention or RetentionConfig()
    now = time.time() if now is None else now
    with _prune_lock(root, dry_run):
        if not dry_run:
            TrajectoryStore(root).recover()
        catalog = Catalog(root)
        entries = catalog.entries(unique=False)
        rounds: dict[tuple[str, str], list[Entry]] = {}
        for entry in entries:
            rounds.setdefault((entry.meta.task_id, entry.meta.round), []).append(entry)
        hot_limit = now - limits.hot_days * _DAY
        cold_limit = now - max(limits.cold_days, limits.min_raw_days) * _DAY
        to_cold: list[RoundAge] = []
        to_delete: list[RoundAge] = []
        for (task_id, round), members in rounds.items():
            if any(_still_logged(e, dry_run) for e in members):
                continue  # a writer is still logging it
            newest = max(e.meta.end_time for e in members)
            age = RoundAge(task_id, round, len(members), (now - newest) / _DAY)
            if newest < cold_limit:
                to_delete.append(age)
            elif newest < hot_limit and any(_is_hot(root, e) for e in members):
                to_cold.append(age)
        plan = PrunePlan(tuple(to_cold), tuple(to_delete), None, dry_run)
        if dry_run or not (to_cold or to_delete):
            return plan
        try:
            cold_file = _move_and_delete(root, catalog, entries, plan)
        except OSError as error:
            raise StoreError(describe_os_error(error, "prune", root)) from error
    return PrunePlan(plan.to_cold, plan.to_delete, cold_file, False)


def _still_logged(entry: Entry, dry_run: bool) -> bool:
    """Whether ``entry`` is in a live writer's log.

    A prune seals dead writers' logs before it plans; a dry run, which changes
    nothing, counts them as sealed instead, so that it plans the same.
    """
    if isinstance(entry.source, SegmentRef):
        return False
    return not dry_run or shard_writer_alive(entry.meta.shard)


def _is_hot(root: Path, entry: Entry) -> bool:
    """Whether ``entry`` is in the store's top level: a hot segment, or a log."""
    return not isinstance(entry.source, SegmentRef) or entry.source.path.parent == root


def _move_and_delete(
    root: Path, catalog: Catalog, entries: list[Entry], plan: PrunePlan
) -> Path | None:
    entries = [e for e in entries if isinstance(e.source, SegmentRef)]  # not live writers' logs
    moving = {(r.task_id, r.round) for r in plan.to_cold}
    deleting = {(r.task_id, r.round) for r in plan.to_delete}
    in_cold = {e.meta.key for e in entries if not _is_hot(root, e)}
    cold_file = None
    moved = [
        e
        for e in entries
        if (e.meta.task_id, e.meta.round) in moving
        and _is_hot(root, e)
        and e.meta.key not in in_cold  # already copied by an interrupted prune
    ]
    if moved:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        cold_file = root / COLD_DIR / f"cold-{stamp}-{secrets.token_hex(3)}.h5"
        cold_file.parent.mkdir(exist_ok=True)
        write_segment(
            cold_file,
            list(load_episodes(catalog, moved)),
            compression="gzip",
            compression_opts=COLD_LEVEL,
            attrs={"source": "retention"},
        )
    by_file: dict[Path, list[Entry]] = {}
    for entry in entries:
        assert isinstance(entry.source, SegmentRef)
        by_file.setdefault(entry.source.path, []).append(entry)
    for path, members in by_file.items():
        gone = deleting | (moving if path.parent == root else set())
        keep = [e for e in members if (e.meta.task_id, e.meta.round) not in gone]
        if len(keep) == len(members):
            continue
        if not keep:
            os.unlink(path)
            continue
        with h5py.File(path, "r") as file:
            attrs = dict(file.attrs)
        compression = None if attrs.get("compression") == "none" else attrs.get("compression")
        write_segment(
            path,
            list(load_episodes(catalog, keep)),
            compression=compression,
            compression_opts=COLD_LEVEL if compression == "gzip" else None,
            attrs={"shard": attrs.get("shard", ""), "source": "retention"},
        )
    return cold_file


@contextmanager
def _prune_lock(root: Path, dry_run: bool) -> Iterator[None]:
    """Serialises prunes of one store (a dry run needs no lock)."""
    if dry_run:
        yield
        return
    try:
        fd = os.open(root / ".prune.lock", os.O_WRONLY | os.O_CREAT, 0o644)
    except OSError as error:
        raise StoreError(describe_os_error(error, "prune", root)) from error
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(f"{root}: another prune is running") from None
        for leftover in [*root.glob("*.h5.tmp"), *(root / COLD_DIR).glob("*.h5.tmp")]:
            if not leftover.with_name(leftover.name[: -len(".h5.tmp")] + ".log").exists():
                leftover.unlink(missing_ok=True)  # from an interrupted prune
        yield
    finally:
        os.close(fd)
