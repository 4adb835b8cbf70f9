"""Packs values of one structure (an env's observations) into byte rows as they arrive.

A :class:`Packer` learns a structure from one value: its leaves, named as
:func:`~feedbackgym.datasets.columns.leaf_paths` names them (``observations/<key>`` for dicts,
``/_index_<i>`` for tuples). Leaves that are C-contiguous numeric arrays are
*packed*: at each step their bytes are joined into one row (a single
``bytes.join``), so the recorder keeps a copy of the step rather than the
env's arrays, which the env may reuse in place and whose memory goes back to
it at once. Every other leaf (numbers, text) is *kept* as it is; those are
immutable. A value that does not fit (a key missing, an array of another
dtype or size, or one not contiguous) is kept whole instead, and
:meth:`Packer.columns` sorts the mix out at the end.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from feedbackgym.datasets.columns import CONTAINERS, leaf_at, leaf_paths

__all__ = ["Column", "Packer", "Row", "Rows"]

Row = tuple[bytes | None, Any]
"""A packed value: its arrays' bytes and its kept leaves, or ``(None, value)`` for a misfit."""

Rows = tuple[int, "bytes | bytearray", Sequence[Any], dict[int, Any]]
"""Rows in one block: their count, their packed bytes (:attr:`Packer.row_size` each), their
kept leaves one after another, and the misfits by row (standing in the block as
:meth:`Packer.blank`)."""

Column = tuple[str, np.dtype[Any] | None, Any]
"""A leaf over an episode: ``(name, dtype, (row shape, bytes))`` when packed,
``(name, None, values)`` otherwise."""

_dtype_of = operator.attrgetter("dtype")
_Getter = Callable[[Any], tuple[Any, ...]]
_MISFITS = (KeyError, IndexError, TypeError, ValueError, AttributeError, BufferError)
"""What picking and joining the leaves of a value of another structure raises."""


class Packer:
    """Packs values shaped like ``first`` into :data:`Row` s.

    Args:
        prefix: The name of the values' column(s), e.g. ``"observations"``.
        first: A value that shows the structure.

    Raises:
        ValueError: A dict key contains ``/``.

    Example:
        >>> packer = Packer("obs", {"a": np.zeros(2, np.int8), "b": "x"})
        >>> row = packer.pack({"a": np.full(2, 65, np.int8), "b": "y"})
        >>> row
        (b'AA', ('y',))
        >>> data, kept = row
        >>> [(name, dtype) for name, dtype, _ in packer.columns((1, data, kept, {}))]
        [('obs/a', dtype('int8')), ('obs/b', None)]
    """

    def __init__(self, prefix: str, first: Any) -> None:
        self.prefix = prefix
        paths = leaf_paths(prefix, first)
        self.names = [name for name, _ in paths]
        self._paths = [path for _, path in paths]
        leaves = [leaf_at(first, path) for path in self._paths]
        self._packed = [i for i, leaf in enumerate(leaves) if _packable(leaf)]
        self._kept = [i for i in range(len(leaves)) if i not in self._packed]
        self._dtypes = [leaves[i].dtype for i in self._packed]
        self._fields: list[tuple[int, np.dtype[Any], tuple[int, ...], int, int]] = []
        """Per packed leaf: its position, dtype, shape, and its byte range in a row."""
        offset = 0
        for i in self._packed:
            self._fields.append(
                (i, leaves[i].dtype, leaves[i].shape, offset, offset + leaves[i].nbytes)
            )
            offset += leaves[i].nbytes
        self.row_size = offset
        self._get_packed = _getter([self._paths[i] for i in self._packed])
        self._get_kept = _getter([self._paths[i] for i in self._kept])
        flat = isinstance(first, dict) and all(len(path) == 1 for path in self._paths)
        self._flat_keys = tuple(first) if flat else None
        """A flat dict's keys: then a value's structure is its keys, and no container inside."""

    def __getstate__(self) -> dict[str, Any]:
        """Pickles the structure without its getters (functions; rebuilt on load)."""
        state = self.__dict__.copy()
        del state["_get_packed"], state["_get_kept"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._get_packed = _getter([self._paths[i] for i in self._packed])
        self._get_kept = _getter([self._paths[i] for i in self._kept])

    def pack(self, value: Any) -> Row:
        """``value`` as a row (a copy of its arrays' bytes); a misfit is kept whole."""
        try:
            arrays = self._get_packed(value)
            if list(map(_dtype_of, arrays)) != self._dtypes:
                return None, value
            data = b"".join(arrays)
            kept = self._get_kept(value)
        except _MISFITS:  # a missing key, a non-array, an array that is not contiguous
            return None, value
        if len(data) != self.row_size:
            return None, value
        return data, kept

    def fits(self, value: Any) -> bool:
        """Whether ``value`` has this structure: the same leaves, packed ones alike."""
        if self._flat_keys is not None and isinstance(value, dict):
            same = tuple(value) == self._flat_keys and not any(
                isinstance(leaf, CONTAINERS) for leaf in value.values()
            )
        else:
            same = [name for name, _ in leaf_paths(self.prefix, value)] == self.names
        return same and self.pack(value)[0] is not None

    def blank(self) -> tuple[bytes, tuple[None, ...]]:
        """The row that stands in, in a block of rows, for a misfit (zero bytes, no leaves)."""
        return bytes(self.row_size), (None,) * len(self._kept)

    def columns(self, block: Rows) -> list[Column]:
        """Every leaf over the rows of ``block``, in :attr:`names` order (see :data:`Column`).

        A packed leaf comes back as its bytes when every row packed; with a
        misfit among the rows, every leaf comes back as values.

        Raises:
            ValueError: A misfit lacks a key or index that the structure has.
        """
        count, data, kept, misfits = block
        if misfits:
            return [(name, None, values) for name, values in self._values(block)]
        columns: list[Column] = [(name, None, ()) for name in self.names]
        if len(self._fields) == 1:
            i, dtype, shape, _, _ = self._fields[0]
            columns[i] = (self.names[i], dtype, (shape, bytes(data)))
        elif self._fields:
            table = np.frombuffer(data, np.uint8).reshape(count, self.row_size)
            for i, dtype, shape, start, stop in self._fields:
                columns[i] = (self.names[i], dtype, (shape, table[:, start:stop].tobytes()))
        width = len(self._kept)
        for j, i in enumerate(self._kept):
            columns[i] = (self.names[i], None, kept[j::width])
        return columns

    def _values(self, block: Rows) -> list[tuple[str, list[Any]]]:
        """Every leaf's values over rows of which some are misfits."""
        count, data, kept, misfits = block
        width = len(self._kept)
        values: list[list[Any]] = [[] for _ in self.names]
        for row in range(count):
            if row in misfits:
                for column, path in zip(values, self._paths, strict=True):
                    column.append(leaf_at(misfits[row], path))
                continue
            offset = row * self.row_size
            for i, dtype, shape, start, stop in self._fields:
                size = (stop - start) // dtype.itemsize
                values[i].append(np.frombuffer(data, dtype, size, offset + start).reshape(shape))
            for i, leaf in zip(self._kept, kept[row * width : (row + 1) * width], strict=True):
                values[i].append(leaf)
        return list(zip(self.names, values, strict=True))


def _packable(leaf: Any) -> bool:
    return (
        type(leaf) is np.ndarray
        and leaf.dtype.kind not in "OUSV"
        and leaf.flags.c_contiguous
        and leaf.nbytes > 0
    )


def _getter(paths: list[tuple[Any, ...]]) -> _Getter:
    """A function from a value to its leaves at ``paths``, as a tuple."""
    if not paths:
        return lambda value: ()
    if paths == [()]:
        return lambda value: (value,)
    if all(len(path) == 1 for path in paths):
        if len(paths) == 1:
            key = paths[0][0]
            return lambda value: (value[key],)
        get: _Getter = operator.itemgetter(*(path[0] for path in paths))
        return get
    return lambda value: tuple(leaf_at(value, path) for path in paths)
