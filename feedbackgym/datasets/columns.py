"""Column names and the helpers that flatten values into columns and back.

An episode's data is a set of flat, ``/``-separated column names that are
also the dataset paths under a round group on disk:

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
such data (no shaping, no feedback wrappers, no subgoals) and may be left out.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "CONTAINERS",
    "NEUTRAL",
    "OBSERVATION_ROWS",
    "PHASE_DTYPE",
    "STEP_ROWS",
    "Schema",
    "column_rows",
    "compatible",
    "flatten_values",
    "leaf_at",
    "leaf_paths",
    "leaf_values",
    "nest_columns",
    "row_bytes",
    "row_count",
    "stack_rows",
    "with_neutral",
]

OBSERVATION_ROWS = ("observations", "feedback", "schedule", "subgoals")
"""Top-level names of the columns with one row per observation."""
STEP_ROWS = ("actions", "rewards", "env_rewards", "shaping_rewards", "terminations", "truncations")
"""Top-level names of the columns with one row per step."""
EVENT_ROWS = "events"
"""Top-level name of the columns with one row per feedback event."""


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
