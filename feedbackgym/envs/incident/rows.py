"""The vector observation's storage: every field a view of one buffer per dtype.

An env writes each field in place, through :meth:`ObservationRows.field`, as
things change (a row per inspection, the alerts per step), and
:meth:`ObservationRows.observation` hands out a fresh observation with two
copies (one per dtype) and a view per field, instead of a copy per field.
The fields of one observation share its two buffers but never overlap, and no
observation shares memory with the env or with another observation.

Example:
    >>> from gymnasium import spaces
    >>> rows = ObservationRows(spaces.Dict({"a": spaces.MultiBinary(4), "t": spaces.Box(0, 1, (1,))}))
    >>> rows.field("a")[2] = 1
    >>> first = rows.observation()
    >>> rows.field("a")[0] = 1
    >>> first["a"].tolist(), rows.observation()["a"].tolist(), first["t"].dtype
    ([0, 0, 1, 0], [1, 0, 1, 0], dtype('float32'))
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

__all__ = ["ObservationRows"]


class ObservationRows:
    """One int8 and one float32 buffer holding every ``MultiBinary`` and ``Box`` field of a space.

    Args:
        space: A ``Dict`` of ``MultiBinary`` (int8) and float32 ``Box``
            fields; other fields (a ``Discrete``) are left to the env.

    Raises:
        TypeError: A ``MultiBinary`` or ``Box`` field of another dtype.
    """

    def __init__(self, space: spaces.Dict) -> None:
        layout: dict[type, list[tuple[str, int, int]]] = {np.int8: [], np.float32: []}
        ends = {np.int8: 0, np.float32: 0}
        for key, field in space.spaces.items():
            if not isinstance(field, (spaces.MultiBinary, spaces.Box)):
                continue
            dtype = field.dtype.type if field.dtype is not None else None
            if dtype not in layout:
                raise TypeError(f"field {key!r} has dtype {field.dtype}; int8 or float32 only")
            size = int(np.prod(field.shape))
            layout[dtype].append((key, ends[dtype], ends[dtype] + size))
            ends[dtype] += size
        self._buffers = {dtype: np.zeros(end, dtype) for dtype, end in ends.items()}
        self._slices = [
            (key, dtype, slice(start, stop))
            for dtype, fields in layout.items()
            for key, start, stop in fields
        ]
        self._order = {key: i for i, key in enumerate(space.spaces)}
        self._slices.sort(key=lambda entry: self._order[entry[0]])
        self._fields = {key: self._buffers[dtype][s] for key, dtype, s in self._slices}

    def field(self, key: str) -> np.ndarray:
        """The env's own (flat) storage of ``key``: write into it; reshape it for rows."""
        return self._fields[key]

    def clear(self) -> None:
        """Zeroes every field."""
        for buffer in self._buffers.values():
            buffer.fill(0)

    def observation(self) -> dict[str, np.ndarray]:
        """A fresh copy of every field, in the space's order."""
        copies = {dtype: buffer.copy() for dtype, buffer in self._buffers.items()}
        return {key: copies[dtype][s] for key, dtype, s in self._slices}
