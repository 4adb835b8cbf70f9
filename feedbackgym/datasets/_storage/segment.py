"""Sealed HDF5 segment files: written whole under a temporary name, renamed, never changed.

A segment holds one group per ``(task_id, round)`` at ``/{task_id}/{round}``
(a task id with ``/`` nests). In a round group, every column of its episodes
is concatenated into one chunked dataset (see :mod:`feedbackgym.datasets.columns` for the
names), ``episodes/*`` is the episode index (one row per episode: where its
rows start, and its metadata), and ``json`` holds the distinct JSON strings
that index columns refer to by position. The file attribute ``groups`` lists
the round groups as JSON.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from feedbackgym.datasets._storage.codec import EncodedEpisode, decode_encoded, join_encoded
from feedbackgym.datasets._storage.hdf5 import h5py
from feedbackgym.datasets._storage.wal import fsync_directory
from feedbackgym.datasets.columns import column_rows, compatible
from feedbackgym.datasets.episode import Episode, EpisodeMeta, concat_columns

__all__ = [
    "DAMAGE_ERRORS",
    "FORMAT",
    "FORMAT_VERSION",
    "SegmentRef",
    "as_read_error",
    "check_not_nested",
    "group_path",
    "read_columns",
    "read_index",
    "slice_episode",
    "write_segment",
]

FORMAT = "feedbackgym-trajectories"
FORMAT_VERSION = 1
CHUNK_BYTES = 256 * 1024
"""Target size of one chunk."""
_BLOCK = 4 << 20
"""Bytes by which HDF5 grows a segment's in-memory image."""
_STRING_ROW_BYTES = 16
_RESERVED = ("episodes", "json")
DAMAGE_ERRORS = (
    OSError,
    ValueError,
    KeyError,
    TypeError,
    RuntimeError,
    AttributeError,
    IndexError,
    OverflowError,
)
"""What reading a damaged HDF5 file can raise: beside ``OSError`` (a failed read, a
checksum that does not match) h5py raises ``RuntimeError`` (a broken B-tree or
object header), ``KeyError`` (a missing link) and ``TypeError`` (an object of the
wrong kind at a name), and numpy ``ValueError`` or ``IndexError`` on nonsense sizes."""


@dataclass(frozen=True)
class SegmentRef:
    """Where an episode's rows lie in a segment's round group."""

    path: Path
    group: str
    step_start: int
    obs_start: int
    event_start: int
    event_count: int


def group_path(task_id: str, round: str) -> str:
    """The HDF5 path of a round group.

    Raises:
        ValueError: The round contains ``/``, or a part of the path is empty or a dot.
    """
    if "/" in round:
        raise ValueError(f"a round may not contain '/': {round!r}")
    path = f"{task_id}/{round}"
    if any(part in ("", ".", "..") for part in path.split("/")):
        raise ValueError(f"task id and round must be non-empty names: {path!r}")
    return path


def check_not_nested(path: str, others: Collection[str]) -> None:
    """Refuses round group ``path`` if it would lie inside one of ``others``, or hold one.

    A task id with ``/`` nests: task ``"a/b"`` round ``"c"`` would be filed
    inside the group of task ``"a"`` round ``"b"``, among its columns.

    Raises:
        ValueError: The two groups nest.
    """
    parts = path.split("/")
    inner = [p for p in others if p.startswith(path + "/")]
    outer = ["/".join(parts[:i]) for i in range(2, len(parts)) if "/".join(parts[:i]) in others]
    if inner or outer:
        other = (inner or outer)[0]
        raise ValueError(
            f"the round group {path!r} and the round group {other!r} would nest in one HDF5 "
            "file (a task id is a path): use task ids that do not continue another task's "
            "id with one of its rounds"
        )


def write_segment(
    path: Path,
    episodes: Sequence[Episode | EncodedEpisode],
    *,
    compression: str | None = None,
    compression_opts: int | None = None,
    fsync: bool = False,
    attrs: dict[str, Any] | None = None,
) -> None:
    """Writes ``episodes`` to a new segment at ``path``, atomically.

    HDF5 builds the file in memory; its bytes are then written to
    ``path.tmp`` and renamed to ``path``, so ``path`` either does not exist or
    holds every episode, and a full disk surfaces as a plain ``OSError`` from
    that write rather than inside HDF5 (where a failed write leaves the
    library's file state broken, up to crashing the process at exit).

    Raises:
        OSError: Writing failed (the temporary file is removed).
        ValueError: Episodes of one task and round have different columns, or the
            round groups of two tasks would nest (see :func:`check_not_nested`).
    """
    groups: dict[tuple[str, str], list[Episode | EncodedEpisode]] = {}
    for episode in episodes:
        groups.setdefault((episode.meta.task_id, episode.meta.round), []).append(episode)
    with h5py.File(path.name, "w", driver="core", backing_store=False, block_size=_BLOCK) as file:
        file.attrs.update(
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "created": time.time(),
                "h5py_version": h5py.__version__,
                "hdf5_version": h5py.version.hdf5_version,
                "compression": compression or "none",
                **(attrs or {}),
            }
        )
        names: list[str] = []
        for (task_id, round), members in groups.items():
            name = group_path(task_id, round)
            check_not_nested(name, names)
            names.append(name)
            _write_group(file.require_group(names[-1]), members, compression, compression_opts)
        file.attrs["groups"] = json.dumps(names)
        file.flush()
        image = file.id.get_file_image()
    _write_atomically(path, image, fsync)


def _write_atomically(path: Path, data: bytes, fsync: bool) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if fsync:
            fsync_directory(path.parent)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _write_group(
    group: Any,
    episodes: list[Episode | EncodedEpisode],
    compression: str | None,
    opts: int | None,
) -> None:
    first = episodes[0]
    schema = first.schema
    for episode in episodes[1:]:
        if not compatible(schema, episode.schema):
            raise ValueError(
                f"episodes of task {first.meta.task_id!r} round {first.meta.round!r} have "
                "different columns: record envs with different spaces under different task ids"
            )
    group.attrs["task_id"] = first.meta.task_id
    group.attrs["round"] = first.meta.round
    for name, column in _concat(episodes).items():
        _create(group, name, column, compression, opts)
    strings = _Strings()
    for name, column in _index_columns(episodes, strings).items():
        _create(group, f"episodes/{name}", column, compression, opts)
    _create(group, "json", strings.column(), None, None)


def _concat(episodes: list[Episode | EncodedEpisode]) -> dict[str, np.ndarray]:
    """The columns of compatible episodes, concatenated (from the bytes, when all are encoded)."""
    if all(isinstance(e, EncodedEpisode) for e in episodes):
        return join_encoded(episodes)  # type: ignore[arg-type]
    return concat_columns(
        [decode_encoded(e) if isinstance(e, EncodedEpisode) else e for e in episodes]
    )


def _create(
    group: Any, name: str, data: np.ndarray, compression: str | None, opts: int | None
) -> None:
    """A dataset chunked along rows (about :data:`CHUNK_BYTES` a chunk).

    Numeric chunks carry Fletcher-32 checksums (a flipped bit fails the read);
    text is neither compressed nor checksummed (HDF5 filters skip strings).
    """
    if data.dtype == object:
        dtype: Any = h5py.string_dtype()
        row_bytes = _STRING_ROW_BYTES
        compression = None
    else:
        dtype = data.dtype
        row_bytes = max(1, data[:1].nbytes)
    if len(data) == 0:
        group.create_dataset(name, data=data, dtype=dtype)
        return
    rows = max(1, min(len(data), CHUNK_BYTES // row_bytes))
    group.create_dataset(
        name,
        data=data,
        dtype=dtype,
        chunks=(rows, *data.shape[1:]),
        compression=compression,
        compression_opts=opts,
        fletcher32=data.dtype != object,  # a checksum a chunk (HDF5 filters skip strings)
    )


class _Strings:
    """Distinct strings, referred to by position (the group's ``json`` dataset)."""

    def __init__(self) -> None:
        self._positions: dict[str, int] = {}

    def ref(self, text: str) -> int:
        return self._positions.setdefault(text, len(self._positions))

    def column(self) -> np.ndarray:
        column = np.empty(len(self._positions), object)
        column[:] = list(self._positions)
        return column


def _index_columns(
    episodes: list[Episode | EncodedEpisode], strings: _Strings
) -> dict[str, np.ndarray]:
    metas = [e.meta for e in episodes]
    lengths = np.array([m.length for m in metas], np.int64)
    events = np.array([e.rows("events/row") for e in episodes], np.int64)
    step_start = np.cumsum(lengths) - lengths
    return {
        "name": _text([m.name for m in metas]),
        "shard": _text([m.shard for m in metas]),
        "episode": np.array([m.episode for m in metas], np.int64),
        "length": lengths,
        "step_start": step_start,
        "obs_start": step_start + np.arange(len(metas)),
        "event_start": np.cumsum(events) - events,
        "event_count": events,
        "seed": np.array([-1 if m.seed is None else m.seed for m in metas], np.int64),
        "start_time": np.array([m.start_time for m in metas], np.float64),
        "end_time": np.array([m.end_time for m in metas], np.float64),
        "wall_time": np.array([m.wall_time for m in metas], np.float64),
        "success": np.array([-1 if m.success is None else m.success for m in metas], np.int8),
        "outcome": _text([m.outcome for m in metas]),
        "episode_return": np.array([m.episode_return for m in metas], np.float64),
        "phase": _text([m.phase for m in metas]),
        "switch_time": np.array(
            [np.nan if m.switch_time is None else m.switch_time for m in metas], np.float64
        ),
        "config_version": np.array(
            [-1 if m.config_version is None else m.config_version for m in metas], np.int64
        ),
        "config_changes": _refs(strings, [m.config_changes for m in metas]),
        "env_spec": np.array([strings.ref(m.env_spec) for m in metas], np.int32),
        "subgoal_ids": _refs(strings, [m.subgoal_ids for m in metas]),
        "task_key": _text([m.task_key for m in metas]),
    }


def _text(values: list[str]) -> np.ndarray:
    return np.array([v.encode() for v in values], "S")


def _refs(strings: _Strings, values: list[tuple[Any, ...]]) -> np.ndarray:
    """Refs to each tuple as a JSON list (tuples of dicts are encoded each time, others once)."""
    refs: dict[tuple[Any, ...], int] = {}

    def ref(value: tuple[Any, ...]) -> int:
        try:
            return refs[value]
        except KeyError:
            found = refs[value] = strings.ref(json.dumps(value))
            return found
        except TypeError:  # unhashable: config changes are dicts
            return strings.ref(json.dumps(value))

    return np.array([ref(v) for v in values], np.int32)


def as_read_error(error: BaseException) -> OSError | ValueError:
    """``error`` (one of :data:`DAMAGE_ERRORS`) as the ``OSError`` or ``ValueError`` readers report.

    Example:
        >>> as_read_error(RuntimeError("Object visitation failed (bad heap free list)"))
        ValueError('a damaged HDF5 structure (Object visitation failed (bad heap free list))')
    """
    if isinstance(error, OSError | ValueError):
        return error
    if isinstance(error, KeyError):
        return ValueError(f"an incomplete feedbackgym trajectory file ({error})")
    return ValueError(f"a damaged HDF5 structure ({error})")


def read_index(path: Path) -> list[tuple[EpisodeMeta, SegmentRef]]:
    """Reads the episode index of every round group of a segment.

    Raises:
        OSError: The file cannot be opened or read.
        ValueError: It is not a feedbackgym segment, lacks part of one, or
            its HDF5 structure is damaged.
    """
    entries: list[tuple[EpisodeMeta, SegmentRef]] = []
    try:
        with h5py.File(path, "r") as file:
            if file.attrs.get("format") != FORMAT:
                raise ValueError("not a feedbackgym trajectory file")
            for name in json.loads(file.attrs["groups"]):
                group = file[name]
                index = {key: ds[()] for key, ds in group["episodes"].items()}
                strings = group["json"].asstr()[()]
                entries.extend(_entries(path, name, group.attrs, index, strings))
    except DAMAGE_ERRORS as error:
        if isinstance(error, OSError | ValueError):
            raise
        raise as_read_error(error) from error
    return entries


def _entries(
    path: Path, name: str, attrs: Any, index: dict[str, np.ndarray], strings: np.ndarray
) -> Iterable[tuple[EpisodeMeta, SegmentRef]]:
    task_id, round = str(attrs["task_id"]), str(attrs["round"])
    for i in range(len(index["length"])):
        seed, success = int(index["seed"][i]), int(index["success"][i])
        switch, version = float(index["switch_time"][i]), int(index["config_version"][i])
        meta = EpisodeMeta(
            task_id=task_id,
            round=round,
            start_time=float(index["start_time"][i]),
            end_time=float(index["end_time"][i]),
            length=int(index["length"][i]),
            seed=None if seed < 0 else seed,
            success=None if success < 0 else bool(success),
            outcome=index["outcome"][i].decode(),
            episode_return=float(index["episode_return"][i]),
            phase=index["phase"][i].decode(),
            switch_time=None if np.isnan(switch) else switch,
            config_version=None if version < 0 else version,
            config_changes=tuple(json.loads(strings[index["config_changes"][i]])),
            env_spec=str(strings[index["env_spec"][i]]),
            subgoal_ids=tuple(json.loads(strings[index["subgoal_ids"][i]])),
            task_key=index["task_key"][i].decode() if "task_key" in index else "",
            shard=index["shard"][i].decode(),
            episode=int(index["episode"][i]),
        )
        ref = SegmentRef(
            path,
            name,
            int(index["step_start"][i]),
            int(index["obs_start"][i]),
            int(index["event_start"][i]),
            int(index["event_count"][i]),
        )
        yield meta, ref


def read_columns(
    file: Any, group: str, include: Callable[[str], bool] | None = None
) -> dict[str, Any]:
    """Reads whole columns of a round group (all of them, or those ``include`` keeps).

    Returns:
        Column name -> array (strings as an object array of ``str``).
    """
    root = file[group]
    names: list[str] = []

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset) and name.split("/", 1)[0] not in _RESERVED:
            if include is None or include(name):
                names.append(name)

    root.visititems(visit)
    columns = {}
    for name in names:
        dataset = root[name]
        string = h5py.check_string_dtype(dataset.dtype)
        columns[name] = (
            dataset.asstr()[()] if string is not None and string.length is None else dataset[()]
        )
    return columns


def slice_episode(columns: dict[str, Any], meta: EpisodeMeta, ref: SegmentRef) -> Episode:
    """Cuts one episode's rows out of whole group columns."""
    bounds = {
        "observation": (ref.obs_start, ref.obs_start + meta.length + 1),
        "step": (ref.step_start, ref.step_start + meta.length),
        "event": (ref.event_start, ref.event_start + ref.event_count),
    }
    sliced = {}
    for name, column in columns.items():
        start, stop = bounds[column_rows(name)]
        sliced[name] = column[start:stop]
    return Episode(meta, sliced)
