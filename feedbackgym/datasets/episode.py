"""One recorded episode as named columns, plus its metadata.

An :class:`Episode` holds its data as flat, ``/``-separated column names that
are also the dataset paths under a round group on disk:

* one row per observation (``length + 1`` rows; row 0 is the reset):
  ``observations`` (or ``observations/<key>`` for Dict spaces, ``_index_<i>``
  for Tuple spaces), ``feedback/type``, ``schedule/phase``,
  ``schedule/guide_weight``, ``schedule/review_weight``, ``subgoals/done``;
* one row per step (``length`` rows): ``actions`` (or ``actions/<key>``),
  ``rewards``, ``env_rewards``, ``shaping_rewards``, ``terminations``,
  ``truncations``;
* one row per feedback event: ``events/row`` (the observation row it came
  with), ``events/type`` and ``events/payload`` (the hint or review as JSON).

The columns in :data:`NEUTRAL` follow from the others when the env gives no
such data (no shaping, no feedback wrappers, no subgoals): an episode in
memory or in a log may leave them out, and :meth:`Episode.complete` (which
every sealed segment goes through) fills them in, so files always hold them.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntFlag
from typing import Any

import numpy as np

__all__ = [
    "CONTAINERS",
    "NEUTRAL",
    "OBSERVATION_ROWS",
    "PHASE_DTYPE",
    "STEP_ROWS",
    "Episode",
    "EpisodeMeta",
    "FeedbackEvent",
    "FeedbackType",
    "Schema",
    "column_rows",
    "compatible",
    "concat_columns",
    "flatten_values",
    "leaf_at",
    "leaf_paths",
    "leaf_values",
    "nest_columns",
    "row_count",
    "row_bytes",
    "stack_rows",
    "with_neutral",
]

OBSERVATION_ROWS = ("observations", "feedback", "schedule", "subgoals")
"""Top-level names of the columns with one row per observation."""
STEP_ROWS = ("actions", "rewards", "env_rewards", "shaping_rewards", "terminations", "truncations")
"""Top-level names of the columns with one row per step."""
EVENT_ROWS = "events"
"""Top-level name of the columns with one row per feedback event."""


class FeedbackType(IntFlag):
    """What feedback came with an observation (a bit set; ``GUIDE | REVIEW`` is 3)."""

    NONE = 0
    GUIDE = 1
    REVIEW = 2


@dataclass(frozen=True)
class FeedbackEvent:
    """A hint or review that came with an observation.

    Attributes:
        row: The observation row (0 is the reset observation, ``t + 1`` the
            observation after step ``t``).
        type: :attr:`FeedbackType.GUIDE` or :attr:`FeedbackType.REVIEW`.
        payload: The hint or review as JSON-safe data (``Hint.to_dict()``,
            ``Review.to_dict()``).
    """

    row: int
    type: FeedbackType
    payload: dict[str, Any]


@dataclass
class EpisodeMeta:
    """Everything known about an episode besides its per-step data.

    Attributes:
        task_id: The task (by default the env id).
        round: The training round (or split, for expert datasets), as text.
        start_time: Wall-clock time of the reset (Unix seconds).
        end_time: Wall-clock time of the last step.
        length: Number of steps.
        seed: The reset seed, or ``None``.
        success: ``info["is_success"]`` at the end, or ``None`` when absent.
        outcome: ``info["outcome"]`` at the end, or ``""``.
        episode_return: Sum of the rewards.
        phase: The schedule phase at the reset (``""`` without a schedule).
        switch_time: When the recorded phase first left ``"guide"``, or ``None``.
        config_version: The feedback config version, or ``None`` without a
            config file.
        config_changes: The config edits seen so far (``version``, ``time``,
            ``applied``, ``reason``).
        env_spec: The env spec as JSON (``""`` when the env has none).
        subgoal_ids: The subgoal ids, in the bit order of ``subgoals/done``.
        shard: The writer that stored it (stamped by the store).
        episode: The episode number within its shard (stamped by the store).
    """

    task_id: str
    round: str
    start_time: float
    end_time: float
    length: int
    seed: int | None = None
    success: bool | None = None
    outcome: str = ""
    episode_return: float = 0.0
    phase: str = ""
    switch_time: float | None = None
    config_version: int | None = None
    config_changes: tuple[dict[str, Any], ...] = ()
    env_spec: str = ""
    subgoal_ids: tuple[str, ...] = ()
    shard: str = ""
    episode: int = -1

    @property
    def timestamp(self) -> str:
        """The start time as ``YYYYmmddTHHMMSS.ffffffZ`` (UTC)."""
        whole = math.floor(self.start_time)
        micros = min(999_999, round((self.start_time - whole) * 1e6))
        return f"{_utc_second(whole)}.{micros:06d}Z"

    @property
    def name(self) -> str:
        """The episode's address under its round: ``{timestamp}-{episode}``."""
        return f"{self.timestamp}-{self.episode:06d}"

    @property
    def wall_time(self) -> float:
        """Seconds from the reset to the last step."""
        return self.end_time - self.start_time

    @property
    def key(self) -> tuple[str, int]:
        """``(shard, episode)``: unique within a store."""
        return (self.shard, self.episode)

    def to_dict(self) -> dict[str, Any]:
        """Returns the metadata as JSON-safe data (tuples for lists)."""
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeMeta:
        """Rebuilds the metadata from :meth:`to_dict` output."""
        return cls(
            **{
                **data,
                "config_changes": tuple(data.get("config_changes", ())),
                "subgoal_ids": tuple(data.get("subgoal_ids", ())),
            }
        )


@functools.lru_cache(maxsize=64)
def _utc_second(whole: int) -> str:
    """``YYYYmmddTHHMMSS`` (UTC) of a whole Unix second: episodes of one second share it."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(whole))


PHASE_DTYPE = np.dtype("S16")
"""``schedule/phase`` holds phase names as ASCII, cut to 16 characters."""

NEUTRAL: dict[str, tuple[np.dtype[Any], Any]] = {
    "env_rewards": (np.dtype(np.float64), None),
    "shaping_rewards": (np.dtype(np.float64), 0.0),
    "feedback/type": (np.dtype(np.uint8), 0),
    "schedule/phase": (PHASE_DTYPE, b""),
    "schedule/guide_weight": (np.dtype(np.float32), np.nan),
    "schedule/review_weight": (np.dtype(np.float32), np.nan),
    "subgoals/done": (np.dtype(np.uint64), 0),
    "events/row": (np.dtype(np.int32), 0),
    "events/type": (np.dtype(np.uint8), 0),
    "events/payload": (np.dtype(object), ""),
}
"""Columns that may be left out, with their dtype and neutral value (``env_rewards``
defaults to ``rewards``; an absent event column means no events)."""

Schema = tuple[tuple[str, np.dtype[Any], tuple[int, ...]], ...]
"""Per column: name, dtype and the shape of one row."""


@dataclass
class Episode:
    """A recorded episode: metadata and named columns (see the module docstring).

    Attributes:
        meta: The metadata.
        columns: Column name -> array.
    """

    meta: EpisodeMeta
    columns: dict[str, np.ndarray] = field(repr=False)

    @functools.cached_property
    def schema(self) -> Schema:
        """The columns' names, dtypes and row shapes (computed once: columns do not change)."""
        return tuple((n, c.dtype, c.shape[1:]) for n, c in self.columns.items())

    def rows(self, name: str) -> int:
        """How many rows column ``name`` has in this episode."""
        return row_count(name, self.meta.length, len(self.columns.get("events/row", ())))

    def column(self, name: str) -> np.ndarray:
        """Column ``name``, or its neutral value (see :data:`NEUTRAL`) when left out.

        Raises:
            KeyError: The column is neither present nor neutral.
        """
        column = self.columns.get(name)
        if column is not None:
            return column
        if name == "env_rewards":
            return self.columns["rewards"]
        dtype, fill = NEUTRAL[name]
        column = np.empty(self.rows(name), dtype)
        column[:] = fill
        return column

    def complete(self) -> Episode:
        """This episode with every neutral column present."""
        if all(name in self.columns for name in NEUTRAL):
            return self
        return Episode(self.meta, {**self.columns, **{n: self.column(n) for n in NEUTRAL}})

    @property
    def observations(self) -> Any:
        """Observations, ``length + 1`` rows: an array, or a dict/tuple of them."""
        return nest_columns(self.columns, "observations")

    @property
    def actions(self) -> Any:
        """Actions, ``length`` rows."""
        return nest_columns(self.columns, "actions")

    @property
    def rewards(self) -> np.ndarray:
        """Rewards as the trainer saw them (env reward plus shaping)."""
        return self.columns["rewards"]

    @property
    def env_rewards(self) -> np.ndarray:
        """The env's own rewards."""
        return self.column("env_rewards")

    @property
    def shaping_rewards(self) -> np.ndarray:
        """The shaping terms (0 without shaping)."""
        return self.column("shaping_rewards")

    @property
    def terminations(self) -> np.ndarray:
        """Per-step ``terminated`` flags."""
        return self.columns["terminations"]

    @property
    def truncations(self) -> np.ndarray:
        """Per-step ``truncated`` flags."""
        return self.columns["truncations"]

    @property
    def feedback_types(self) -> np.ndarray:
        """The :class:`FeedbackType` bits with each observation."""
        return self.column("feedback/type")

    @property
    def phases(self) -> list[str]:
        """The schedule phase with each observation (``""`` without a schedule)."""
        return [p.decode() for p in self.column("schedule/phase")]

    @property
    def subgoals(self) -> list[dict[str, bool]]:
        """Subgoal progress with each observation, decoded from ``subgoals/done``."""
        ids = self.meta.subgoal_ids
        return [
            {sid: bool(int(m) >> bit & 1) for bit, sid in enumerate(ids)}
            for m in self.column("subgoals/done")
        ]

    @property
    def events(self) -> list[FeedbackEvent]:
        """The hints and reviews, in order."""
        return [
            FeedbackEvent(int(row), FeedbackType(int(kind)), json.loads(payload))
            for row, kind, payload in zip(
                self.column("events/row"),
                self.column("events/type"),
                self.column("events/payload"),
                strict=True,
            )
        ]


def column_rows(name: str) -> str:
    """Which row count a column has: ``"observation"``, ``"step"`` or ``"event"``.

    Raises:
        ValueError: The name belongs to no known column family.
    """
    top = name.split("/", 1)[0]
    if top in OBSERVATION_ROWS:
        return "observation"
    if top in STEP_ROWS:
        return "step"
    if top == EVENT_ROWS:
        return "event"
    raise ValueError(f"unknown column {name!r}")


def row_count(name: str, length: int, events: int) -> int:
    """How many rows column ``name`` has in an episode of ``length`` steps and ``events`` events.

    Raises:
        ValueError: The name belongs to no known column family.
    """
    family = column_rows(name)
    if family == "event":
        return events
    return length + (family == "observation")


def flatten_values(prefix: str, values: Sequence[Any]) -> dict[str, np.ndarray]:
    """Turns a sequence of (possibly nested) values into columns named from ``prefix``.

    Dicts become ``prefix/<key>`` columns, tuples ``prefix/_index_<i>`` columns;
    strings become an object array of ``str``; anything else goes through
    :func:`stack_rows`.

    Example:
        >>> cols = flatten_values("obs", [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}])
        >>> cols["obs/a"].tolist(), cols["obs/b"].tolist()
        ([1, 2], ['x', 'y'])

    Raises:
        ValueError: A dict key contains ``/``.
    """
    return {name: _column(leaf) for name, leaf in leaf_values(prefix, values)}


def leaf_values(prefix: str, values: Sequence[Any]) -> list[tuple[str, Sequence[Any]]]:
    """Splits like (possibly nested) values into leaves: ``(column name, every value's leaf)``.

    The first value's structure names the columns (see :func:`flatten_values`).

    Raises:
        ValueError: A dict key contains ``/``, or a value lacks a key or
            index that the first one has.
    """
    paths = leaf_paths(prefix, values[0])
    if paths == [(prefix, ())]:  # the values are the leaves
        return [(prefix, values)]
    return [(name, [leaf_at(value, path) for value in values]) for name, path in paths]


CONTAINERS = (dict, tuple)
"""The value types whose items :func:`leaf_paths` names as columns of their own."""


def leaf_paths(prefix: str, value: Any) -> list[tuple[str, tuple[Any, ...]]]:
    """The leaves of a (possibly nested) value: ``(column name, path of keys and indices)``.

    Dicts name their leaves ``prefix/<key>`` (in the dict's order), tuples
    ``prefix/_index_<i>``; anything else is a leaf.

    Example:
        >>> leaf_paths("obs", {"a": 1, "b": (2, 3)})
        [('obs/a', ('a',)), ('obs/b/_index_0', ('b', 0)), ('obs/b/_index_1', ('b', 1))]

    Raises:
        ValueError: A dict key contains ``/``.
    """
    if isinstance(value, dict):
        keys: tuple[Any, ...] = tuple(value)
        names = _key_names(prefix, keys)
        children = list(value.values())
    elif isinstance(value, tuple):
        keys = tuple(range(len(value)))
        names = [f"{prefix}/_index_{i}" for i in keys]
        children = list(value)
    else:
        return [(prefix, ())]
    paths: list[tuple[str, tuple[Any, ...]]] = []
    for key, name, child in zip(keys, names, children, strict=True):
        if isinstance(child, CONTAINERS):
            paths += [(leaf, (key, *path)) for leaf, path in leaf_paths(name, child)]
        else:
            paths.append((name, (key,)))
    return paths


def leaf_at(value: Any, path: tuple[Any, ...]) -> Any:
    """The leaf of ``value`` at ``path`` (see :func:`leaf_paths`).

    Raises:
        ValueError: ``value`` lacks one of the keys or indices.
    """
    for step in path:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError) as error:
            raise ValueError(
                f"a value lacks {'/'.join(map(str, path))!r}, which the first value has"
            ) from error
    return value


@functools.lru_cache(maxsize=256)
def _key_names(prefix: str, keys: tuple[Any, ...]) -> list[str]:
    for key in keys:
        if "/" in str(key):
            raise ValueError(f"observation and action keys may not contain '/': {key!r}")
    return [f"{prefix}/{key}" for key in keys]


def _column(values: Sequence[Any]) -> np.ndarray:
    if isinstance(values[0], str):
        column = np.empty(len(values), object)
        column[:] = values
        return column
    return stack_rows(values)


_dtype_of = operator.attrgetter("dtype")


def row_bytes(values: Sequence[Any]) -> bytes | None:
    """Like arrays (one dtype and size, C-contiguous) joined as bytes; ``None`` for others.

    Example:
        >>> row_bytes([np.full(2, 66, np.int8), np.full(2, 65, np.int8)])
        b'BBAA'
    """
    first = values[0]
    if type(first) is not np.ndarray or first.dtype.kind == "O":
        return None
    try:
        if list(map(_dtype_of, values)) != [first.dtype] * len(values):
            return None
    except AttributeError:  # a row that is not an array
        return None
    try:
        data = b"".join(values)
    except (TypeError, ValueError, BufferError):  # a non-contiguous array
        return None
    return data if len(data) == first.nbytes * len(values) else None


def stack_rows(values: Sequence[Any]) -> np.ndarray:
    """``np.asarray(values)``, several times faster for a sequence of like arrays.

    Arrays of one dtype and size are joined as bytes (:func:`row_bytes`:
    ``np.asarray`` inspects every element's shape and type first, which for a
    few dozen small arrays costs more than copying them); rows keep the first
    array's shape. Anything else goes through ``np.asarray``.

    Example:
        >>> stack_rows([np.zeros(2, np.int8), np.ones(2, np.int8)]).tolist()
        [[0, 0], [1, 1]]
    """
    data = row_bytes(values)
    if data is None:
        return np.asarray(values)
    first = values[0]
    return np.frombuffer(data, first.dtype).reshape(len(values), *first.shape)


def nest_columns(columns: dict[str, np.ndarray], prefix: str) -> Any:
    """Rebuilds the value structure that :func:`flatten_values` flattened.

    Example:
        >>> cols = flatten_values("obs", [{"a": (1, 2)}, {"a": (3, 4)}])
        >>> nest_columns(cols, "obs")["a"][1].tolist()
        [2, 4]

    Raises:
        KeyError: No column is named ``prefix`` or starts with ``prefix/``.
    """
    if prefix in columns:
        return columns[prefix]
    start = prefix + "/"
    children: dict[str, dict[str, np.ndarray]] = {}
    for name, column in columns.items():
        if name.startswith(start):
            child = name[len(start) :].split("/", 1)[0]
            children.setdefault(child, {})[name] = column
    if not children:
        raise KeyError(prefix)
    nested = {key: nest_columns(cols, start + key) for key, cols in children.items()}
    if all(key.startswith("_index_") for key in nested):
        return tuple(nested[f"_index_{i}"] for i in range(len(nested)))
    return nested


def compatible(a: Schema, b: Schema) -> bool:
    """Whether episodes of schemas ``a`` and ``b`` can share datasets.

    Both must have the same columns apart from :data:`NEUTRAL` ones, and the
    columns both have must match in row shape and in kind of dtype (text,
    bytes, numbers: ``int32`` and ``int64`` mix, text and numbers do not).
    """
    if a == b:
        return True
    first = {name: (_kind(dtype), shape) for name, dtype, shape in a}
    second = {name: (_kind(dtype), shape) for name, dtype, shape in b}
    return set(first) - set(NEUTRAL) == set(second) - set(NEUTRAL) and all(
        first[name] == second[name] for name in set(first) & set(second)
    )


def _kind(dtype: np.dtype[Any]) -> str:
    return dtype.kind if dtype.kind in "OSU" else "number"


def concat_columns(episodes: Sequence[Episode]) -> dict[str, np.ndarray]:
    """Concatenates the columns of compatible episodes (at least one), neutral ones filled in."""
    layouts = {tuple(e.columns) for e in episodes}  # usually one or two distinct layouts
    everywhere = set.intersection(*(set(layout) for layout in layouts))
    columns = {}
    for name in dict.fromkeys(n for layout in layouts for n in layout):
        if name in everywhere:
            columns[name] = np.concatenate([e.columns[name] for e in episodes])
        else:
            columns[name] = np.concatenate([e.column(name) for e in episodes])
    return with_neutral(columns, sum(e.meta.length for e in episodes), len(episodes))


def with_neutral(
    columns: dict[str, np.ndarray], steps: int, episodes: int
) -> dict[str, np.ndarray]:
    """Fills the absent :data:`NEUTRAL` columns into ``columns`` (no event column: no events).

    Args:
        columns: Concatenated columns, changed in place.
        steps: Steps of all the episodes together.
        episodes: How many episodes.

    Returns:
        ``columns``.
    """
    rows = {"step": steps, "observation": steps + episodes, "event": 0}
    for name, (dtype, fill) in NEUTRAL.items():
        if name not in columns:
            if name == "env_rewards":
                columns[name] = columns["rewards"]
            else:
                columns[name] = np.empty(rows[column_rows(name)], dtype)
                columns[name][:] = fill
    return columns
