"""Gathering stores written on different machines into one (``feedbackgym datasets gather``).

On a cluster every node records into a store on its own disk. :func:`gather`
joins such stores into one directory that reads as one store, episode by
episode, with nothing lost and nothing twice: an episode is known by its
key (its writer's shard, which names the machine, the process and a random
token, and its number in the shard), so a store gathered twice, or two
sources holding the same episode, add it once.

A sealed segment whose episodes are all new is copied whole (under its own
name, or a new one if the destination has another file of that name); one
whose episodes are partly there already is rewritten with only the new ones;
a source's write-ahead log (a live writer's, or one a crash left) is sealed
into a new segment in the destination, its complete records only, as
recovery would. Sources are only read. Every file is written under a
temporary name and renamed, so an interrupted gather leaves whole files,
and running it again finishes the job.

A source with a file that cannot be read is refused before anything is
written (``feedbackgym datasets verify --quarantine`` moves such files aside).
Stores on a filesystem every node mounts need no gathering: each writer
writes its own shard into the one directory.

Example:
    >>> import gymnasium as gym, feedbackgym, tempfile
    >>> from feedbackgym.wrappers import RecordTrajectories
    >>> from feedbackgym.datasets import TrajectoryStore
    >>> tmp = Path(tempfile.mkdtemp())
    >>> for node in ("a", "b"):
    ...     env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), tmp / node)
    ...     _ = env.reset(seed=0)
    ...     while not env.step(env.unwrapped.expert_action())[2]:
    ...         pass
    ...     env.close()
    >>> print(gather([tmp / "a", tmp / "b"], tmp / "all").describe())
    2 episode(s) gathered from 2 source(s) (0 already there): 2 file(s) copied, 0 written
    >>> len(TrajectoryStore(tmp / "all"))
    2
    >>> gather([tmp / "a"], tmp / "all").episodes
    0
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from feedbackgym.datasets._storage.catalog import Catalog, Entry, load_episodes, segment_files
from feedbackgym.datasets._storage.codec import decode_episode
from feedbackgym.datasets._storage.segment import read_index, write_segment
from feedbackgym.datasets._storage.wal import read_log
from feedbackgym.datasets.episode import Episode
from feedbackgym.datasets.errors import DamagedFile, StoreError, damaged_file

__all__ = ["GatherReport", "gather"]

Key = tuple[str, int]


@dataclass
class GatherReport:
    """What :func:`gather` did.

    Attributes:
        sources: The stores read.
        episodes: Episodes added to the destination.
        already: Episodes of the sources the destination held already.
        copied: Segments copied whole (their paths in the destination).
        written: Segments written from logs or from part of a segment.
    """

    sources: int = 0
    episodes: int = 0
    already: int = 0
    copied: list[Path] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)

    def describe(self) -> str:
        """One line for people."""
        return (
            f"{self.episodes} episode(s) gathered from {self.sources} source(s) "
            f"({self.already} already there): {len(self.copied)} file(s) copied, "
            f"{len(self.written)} written"
        )


@dataclass(frozen=True)
class _Segment:
    path: Path
    entries: list[Entry]


@dataclass(frozen=True)
class _Log:
    path: Path
    episodes: list[Episode]


def gather(sources: Sequence[str | os.PathLike[str]], dest: str | os.PathLike[str]) -> GatherReport:
    """Adds every episode of the stores ``sources`` that ``dest`` lacks to ``dest``.

    Args:
        sources: Store directories (or single segment files), only read.
        dest: The store to gather into (created if missing; it may be in use).

    Returns:
        What was added.

    Raises:
        StoreError: A source is missing or has a file that cannot be read;
            ``dest`` is a file, is one of the sources, or has damaged files;
            or, after gathering, an episode of a source cannot be found in
            ``dest`` (nothing is deleted).
    """
    root = Path(dest)
    if root.is_file():
        raise StoreError(f"{root} is a file: a store to gather into is a directory")
    roots = [Path(source) for source in sources]
    for source in roots:
        if not source.exists():
            raise StoreError(f"no store at {source}")
        if root.exists() and source.resolve() == root.resolve():
            raise StoreError(f"{source} is the destination itself")
    files = {source: _files(source) for source in roots}  # every source read before any write
    target = Catalog(root)
    have = {entry.meta.key for entry in target.entries()}
    if target.damaged:
        raise StoreError(_damaged_message(str(root), target.damaged, "the destination"))
    root.mkdir(parents=True, exist_ok=True)
    report = GatherReport(sources=len(roots))
    wanted: set[Key] = set()
    for source, (segments, logs) in files.items():
        catalog = Catalog(source)
        for segment in segments:
            keys = [entry.meta.key for entry in segment.entries]
            wanted.update(keys)
            new = [entry for entry in segment.entries if entry.meta.key not in have]
            report.already += len(keys) - len(new)
            if not new:
                continue
            relative = segment.path.relative_to(source) if source.is_dir() else segment.path.name
            place = _free(root / relative)
            if len(new) == len(keys) and len(set(keys)) == len(keys):
                _copy(segment.path, place)
                report.copied.append(place)
            else:
                unique = list({entry.meta.key: entry for entry in new}.values())
                write_segment(place, list(load_episodes(catalog, unique)), attrs=_ATTRS)
                report.written.append(place)
            have.update(entry.meta.key for entry in new)
            report.episodes += len({entry.meta.key for entry in new})
        for log in logs:
            keys = [episode.meta.key for episode in log.episodes]
            wanted.update(keys)
            fresh = list({e.meta.key: e for e in log.episodes if e.meta.key not in have}.values())
            report.already += len(keys) - len(fresh)
            if fresh:
                place = _free(root / log.path.with_suffix(".h5").name)
                write_segment(place, fresh, attrs={**_ATTRS, "shard": fresh[0].meta.shard})
                report.written.append(place)
                have.update(episode.meta.key for episode in fresh)
                report.episodes += len(fresh)
    missing = wanted - {entry.meta.key for entry in Catalog(root).entries()}
    if missing:
        raise StoreError(f"{len(missing)} episode(s) of the sources are not readable in {root}")
    return report


_ATTRS = {"source": "gather"}


def _files(source: Path) -> tuple[list[_Segment], list[_Log]]:
    """A source's sealed segments and the logs not sealed yet, all read.

    Raises:
        StoreError: A file cannot be read.
    """
    damaged: list[DamagedFile] = []
    segments = []
    for path in segment_files(source):
        try:
            segments.append(_Segment(path, [Entry(meta, ref) for meta, ref in read_index(path)]))
        except (OSError, ValueError) as error:
            damaged.append(damaged_file(path, error))
    sealed = {segment.path for segment in segments}
    logs = []
    for path in sorted(source.glob("*.log")) if source.is_dir() else []:
        if path.with_suffix(".h5") in sealed:
            continue  # sealed (or sealed while we looked); a leftover log of it is stale
        try:
            bodies, _ = read_log(path)
            logs.append(_Log(path, [decode_episode(body) for body in bodies]))
        except FileNotFoundError:  # sealed meanwhile: read its segment
            segment = path.with_suffix(".h5")
            try:
                segments.append(_Segment(segment, [Entry(m, r) for m, r in read_index(segment)]))
            except (OSError, ValueError) as error:
                damaged.append(damaged_file(segment, error))
        except (OSError, ValueError) as error:
            damaged.append(damaged_file(path, error))
    if damaged:
        raise StoreError(_damaged_message(str(source), damaged, "a source"))
    return segments, logs


def _damaged_message(where: str, damaged: Iterable[DamagedFile], what: str) -> str:
    listed = "; ".join(str(d) for d in damaged)
    return (
        f"{what} ({where}) has files that cannot be read, so nothing was gathered: {listed} "
        "(`feedbackgym datasets verify --quarantine` moves them aside)"
    )


def _free(path: Path) -> Path:
    """``path``, or a new name beside it if a file has that name already."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while path.exists() or path.with_suffix(".log").exists():
        path = path.with_name(f"{path.stem.split('+')[0]}+{secrets.token_hex(3)}.h5")
    return path


def _copy(source: Path, place: Path) -> None:
    """Copies a segment under a temporary name, checks that it reads, renames it into place.

    Raises:
        StoreError: The copy does not read as the source does.
    """
    tmp = place.with_name(place.name + ".tmp")
    shutil.copyfile(source, tmp)
    try:
        if [meta.key for meta, _ in read_index(tmp)] != [m.key for m, _ in read_index(source)]:
            raise StoreError(f"the copy of {source} does not read as the original")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(place)
