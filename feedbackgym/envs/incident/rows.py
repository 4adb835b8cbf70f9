"""The vector observation's storage: every field a view of one buffer per dtype.

An env writes each field in place, through :meth:`ObservationRows.field`, as
things change (a row per inspection, the alerts per step), and
:meth:`ObservationRows.observation` hands out a fresh observation with two
copies (one per dtype) and a view per field, instead of a copy per field.
The fields of one observation share its two buffers but never overlap, and no
observation shares memory with the env or with another observation. A pickled or
deep-copied one rebuilds its fields as views of its own buffers.

Example:
    >>> from gymnasium import spaces
    >>> space = spaces.Dict({"a": spaces.MultiBinary(4), "t": spaces.Box(0, 1, (1,))})
    >>> rows = ObservationRows(space)
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
        layout: dict[str, list[tuple[str, int, int]]] = {"int8": [], "float32": []}
        for key, field in space.spaces.items():
            if not isinstance(field, (spaces.MultiBinary, spaces.Box)):
                continue
            dtype = str(field.dtype)
            if dtype not in layout:
                raise TypeError(f"field {key!r} has dtype {field.dtype}; int8 or float32 only")
            start = layout[dtype][-1][2] if layout[dtype] else 0
            layout[dtype].append((key, start, start + int(np.prod(field.shape))))
        self._buffers = {
            dtype: np.zeros(fields[-1][2] if fields else 0, dtype)
            for dtype, fields in layout.items()
        }
        order = {key: i for i, key in enumerate(space.spaces)}
        self._slices = sorted(
            (
                (key, dtype, slice(start, stop))
                for dtype, fields in layout.items()
                for key, start, stop in fields
            ),
            key=lambda entry: order[entry[0]],
        )
        self._fields = self._views()

    def _views(self) -> dict[str, np.ndarray]:
        return {key: self._buffers[dtype][s] for key, dtype, s in self._slices}

    def __getstate__(self) -> dict[str, object]:
        return {"_buffers": self._buffers, "_slices": self._slices}

    def __setstate__(self, state: dict[str, object]) -> None:
        """Restores the buffers, then the fields as views of them (a pickle copies views apart)."""
        self.__dict__.update(state)
        self._fields = self._views()

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
