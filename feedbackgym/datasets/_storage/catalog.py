"""The catalog: every episode of a store, from all shards, as one list.

A store directory holds sealed segments (``*.h5``, and ``cold/*.h5`` after
retention) and the write-ahead logs of live or crashed writers (``*.log``).
The catalog reads the episode index of each segment and the records of each
log whose segment does not exist yet, caches them by file (logs are read
incrementally, as they only grow) and drops duplicates (an episode can sit in
both a log and its new segment for a moment, or in a hot and a cold file if
retention was interrupted). Reading never changes the directory.

A file that cannot be read (a truncated segment, a stray file named like
one, a log that is not one) is left out and left in place: its episodes are
missing, the store's others read as usual, and it is listed in
:attr:`Catalog.damaged` and reported with a :class:`DamagedFileWarning` once
(again only if the reason changes). A log whose segment is damaged is read instead.
A segment whose index reads but whose data does not (a checksum that fails in a
column) is found when the data is read: :func:`load_episodes` then skips it the
same way (or raises :class:`DamagedFileError`), and the catalog leaves its
episodes out from then on, until the file changes.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedbackgym.datasets._storage.codec import decode_episode
from feedbackgym.datasets._storage.hdf5 import h5py
from feedbackgym.datasets._storage.segment import (
    DAMAGE_ERRORS,
    SegmentRef,
    as_read_error,
    read_columns,
    read_index,
    slice_episode,
)
from feedbackgym.datasets._storage.wal import read_log
from feedbackgym.datasets.episode import Episode, EpisodeMeta
from feedbackgym.datasets.errors import (
    DamagedFile,
    DamagedFileError,
    DamagedFileWarning,
    damaged_file,
)

__all__ = ["COLD_DIR", "Catalog", "Entry", "load_episodes", "segment_files"]

COLD_DIR = "cold"
"""Subdirectory of a store that retention moves old rounds to."""


@dataclass(frozen=True)
class Entry:
    """One episode in the catalog: its metadata and where its data is."""

    meta: EpisodeMeta
    source: SegmentRef | Episode
    """A segment location, or the whole episode (read from a log)."""


def segment_files(root: Path) -> list[Path]:
    """The sealed segments of a store (or ``[root]`` when ``root`` is one file)."""
    if root.is_file():
        return [root]
    return sorted([*root.glob("*.h5"), *(root / COLD_DIR).glob("*.h5")])


class Catalog:
    """All episodes of a store; :meth:`entries` re-scans the directory.

    Args:
        root: The store directory, or a single segment file.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._segments: dict[Path, tuple[tuple[int, ...], list[Entry]]] = {}
        self._logs: dict[Path, tuple[int, int, list[Entry]]] = {}
        self._columns: dict[tuple[Path, str, Callable[[str], bool]], dict[str, Any]] = {}
        self._damaged: dict[Path, DamagedFile] = {}

    @property
    def damaged(self) -> list[DamagedFile]:
        """The files the last :meth:`entries` could not read, by path."""
        return sorted(self._damaged.values(), key=lambda d: d.path)

    def entries(self, *, unique: bool = True) -> list[Entry]:
        """Every episode, oldest start first, each once (every copy, if not ``unique``)."""
        if not self.root.exists():
            return []
        # Logs first: a log sealed between the two listings then shows up as its segment.
        logs = [] if self.root.is_file() else sorted(self.root.glob("*.log"))
        segments = segment_files(self.root)
        found: list[Entry] = []
        for path in segments:
            found.extend(self._segment_entries(path))
        sealed = set(segments) - set(self._damaged)
        for log in logs:
            if log.with_suffix(".h5") not in sealed:
                found.extend(self._log_entries(log))
        self._forget(set(segments), set(logs))
        if unique:
            found = list({e.meta.key: e for e in reversed(found)}.values())
        return sorted(found, key=lambda e: e.meta.start_time)

    def _segment_entries(self, path: Path) -> list[Entry]:
        try:
            stat = path.stat()
        except FileNotFoundError:
            return []
        signature = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        cached = self._segments.get(path)
        if cached is None or cached[0] != signature:
            self._drop_columns(path)
            try:
                entries = [Entry(meta, ref) for meta, ref in read_index(path)]
            except FileNotFoundError:  # removed since it was listed (retention)
                return []
            except (OSError, ValueError) as error:
                self._report(damaged_file(path, error))
                entries = []
            else:
                self._damaged.pop(path, None)
            cached = self._segments[path] = (signature, entries)
        return cached[1]

    def _log_entries(self, path: Path) -> list[Entry]:
        cached = self._logs.get(path)
        try:
            inode = path.stat().st_ino
            if cached is None or cached[0] != inode:
                cached = (inode, 0, [])
            bodies, end = read_log(path, cached[1])
            entries = cached[2] + [Entry(e.meta, e) for e in map(decode_episode, bodies)]
        except FileNotFoundError:  # sealed meanwhile: the segment has it
            segment = path.with_suffix(".h5")
            return self._segment_entries(segment)
        except (OSError, ValueError) as error:
            self._report(damaged_file(path, error))
            return [] if cached is None else cached[2]
        self._damaged.pop(path, None)
        self._logs[path] = (inode, end, entries)
        return entries

    def _report(self, damaged: DamagedFile) -> None:
        if self._damaged.get(damaged.path) != damaged:
            warnings.warn(
                f"cannot read {damaged}; its episodes are left out (the file is left in place)",
                DamagedFileWarning,
                stacklevel=_caller_level(),
            )
        self._damaged[damaged.path] = damaged

    def mark_damaged(self, damaged: DamagedFile) -> None:
        """Reports a segment found damaged past its index, and leaves its episodes out.

        They stay out until the file changes (is restored or rewritten).
        """
        self._report(damaged)
        cached = self._segments.get(damaged.path)
        if cached is not None:
            self._segments[damaged.path] = (cached[0], [])
        self._drop_columns(damaged.path)

    def _forget(self, segments: set[Path], logs: set[Path]) -> None:
        for path in set(self._segments) - segments:
            del self._segments[path]
            self._drop_columns(path)
        for path in set(self._logs) - logs:
            del self._logs[path]
        for path in set(self._damaged) - segments - logs:
            del self._damaged[path]

    def columns(
        self, path: Path, group: str, include: Callable[[str], bool] | None = None
    ) -> dict[str, Any]:
        """Reads whole columns of a segment's round group (all, or those ``include`` keeps).

        Raises:
            DamagedFileError: The file cannot be read (a checksum fails, a part is broken).
            FileNotFoundError: The file is gone (retention moved it).
        """
        try:
            with h5py.File(path, "r") as file:
                return read_columns(file, group, include)
        except FileNotFoundError:
            raise
        except DAMAGE_ERRORS as error:
            raise DamagedFileError(damaged_file(path, as_read_error(error))) from error

    def cached_columns(
        self, path: Path, group: str, include: Callable[[str], bool]
    ) -> dict[str, Any]:
        """Like :meth:`columns`, but kept in memory until the file changes (for sampling).

        Raises:
            DamagedFileError: The file cannot be read; it is left out from then on
                (:meth:`mark_damaged`), so the next draw does without it.
        """
        key = (path, group, include)
        if key not in self._columns:
            try:
                self._columns[key] = self.columns(path, group, include)
            except DamagedFileError as error:
                self.mark_damaged(error.damaged)
                raise
        return self._columns[key]

    def _drop_columns(self, path: Path) -> None:
        for key in [k for k in self._columns if k[0] == path]:
            del self._columns[key]


def _caller_level() -> int:
    """The ``stacklevel`` that points a warning at the first caller outside this package."""
    package = __name__.rsplit(".", 1)[0] + "."
    frame = inspect.currentframe()
    level = 0
    while frame is not None and f"{frame.f_globals.get('__name__')}.".startswith(package):
        frame = frame.f_back
        level += 1
    return level


def load_episodes(
    catalog: Catalog,
    entries: Iterable[Entry],
    include: Callable[[str], bool] | None = None,
    *,
    skip_damaged: bool = False,
) -> Iterator[Episode]:
    """Yields the episodes of ``entries`` with their columns (all, or those ``include`` keeps).

    Reads each round group of a segment once, whole, and cuts its episodes
    from it; episodes from logs are in memory already and come last.

    Args:
        catalog: The catalog the entries come from.
        entries: The episodes to read.
        include: Which columns to read (all when ``None``).
        skip_damaged: Skip a segment whose data cannot be read, with a
            :class:`DamagedFileWarning` (the catalog leaves it out from then
            on), instead of raising.

    Raises:
        DamagedFileError: A segment's data cannot be read (``skip_damaged`` false).
    """
    entries = list(entries)
    groups: dict[tuple[Path, str], list[tuple[EpisodeMeta, SegmentRef]]] = {}
    for entry in entries:
        if isinstance(entry.source, SegmentRef):
            ref = entry.source
            groups.setdefault((ref.path, ref.group), []).append((entry.meta, ref))
    for (path, group), members in groups.items():
        try:
            columns = catalog.columns(path, group, include)
            try:
                episodes = [slice_episode(columns, meta, ref) for meta, ref in members]
            except DAMAGE_ERRORS as error:  # the index and the columns disagree
                raise DamagedFileError(damaged_file(path, as_read_error(error))) from error
        except DamagedFileError as error:
            if not skip_damaged:
                raise
            catalog.mark_damaged(error.damaged)
            continue
        yield from episodes
    for entry in entries:
        if isinstance(entry.source, Episode):
            columns = entry.source.complete().columns
            yield Episode(
                entry.meta, {n: c for n, c in columns.items() if not include or include(n)}
            )
