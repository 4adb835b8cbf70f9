"""Episodes to bytes and back, for the write-ahead log.

A record body is a little-endian ``u32`` header length, a JSON header (the
metadata, the number of feedback events and, per column, its name, dtype and
row shape) and the column bytes in order; a column's row count follows from
its family (see :func:`~feedbackgym.datasets.columns.column_rows`). String columns are stored as
``int64`` UTF-8 byte lengths followed by the concatenated UTF-8 bytes. No
pickle: a log from elsewhere is only data.

An :class:`EncodedEpisode` is a record before its header: the column bytes,
with the metadata and schema beside them. The recorder produces one straight
from an episode's steps (:meth:`~feedbackgym.datasets.builder.EpisodeBuilder.encode`), the writer
keeps it until the segment is sealed, and the header is written last, once
the store has numbered the episode.
"""

from __future__ import annotations

import functools
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from feedbackgym.datasets.columns import Schema, column_rows, row_count, with_neutral
from feedbackgym.datasets.episode import Episode, EpisodeMeta

__all__ = [
    "EncodedEpisode",
    "column_pieces",
    "concat_encoded",
    "decode_encoded",
    "decode_episode",
    "encode_episode",
    "join_encoded",
    "record_body",
    "text_pieces",
]

_U32 = struct.Struct("<I")


@dataclass
class EncodedEpisode:
    """An episode as record bytes: its columns, in :attr:`schema` order.

    Attributes:
        meta: The metadata (stamped by the store; written into the header then).
        schema: The columns' names, dtypes and row shapes.
        events: How many feedback events (rows of the ``events/*`` columns).
        data: The column bytes.
    """

    meta: EpisodeMeta
    schema: Schema
    events: int
    data: bytes

    def rows(self, name: str) -> int:
        """How many rows column ``name`` has."""
        return row_count(name, self.meta.length, self.events)


@functools.lru_cache(maxsize=64)
def _columns_json(schema: Schema) -> str:
    return json.dumps([[name, dtype.str, list(shape)] for name, dtype, shape in schema])


def text_pieces(values: Sequence[str] | np.ndarray) -> list[bytes]:
    """A string column's bytes: ``int64`` UTF-8 lengths, then the UTF-8 bytes."""
    raw = [s.encode() for s in values]
    return [np.fromiter(map(len, raw), np.int64, len(raw)).tobytes(), b"".join(raw)]


def column_pieces(name: str, column: np.ndarray) -> list[bytes]:
    """Column ``name``'s bytes in a record.

    Raises:
        ValueError: It holds objects other than one string per row.
    """
    if column.dtype != object:
        return [column.tobytes()]  # C order; copying small arrays beats viewing them
    if column.ndim != 1 or not all(isinstance(value, str) for value in column):
        first = column[0] if len(column) else None
        raise ValueError(
            f"{name} holds objects other than one string per row (first row: {first!r}): "
            "only numbers and text can be recorded"
        )
    return text_pieces(column)


def encode_episode(episode: Episode) -> EncodedEpisode:
    """Returns ``episode`` as record bytes (sharing its metadata object).

    Raises:
        ValueError: A column holds objects other than text.
    """
    pieces = [piece for name, c in episode.columns.items() for piece in column_pieces(name, c)]
    return EncodedEpisode(
        episode.meta, episode.schema, episode.rows("events/row"), b"".join(pieces)
    )


@functools.lru_cache(maxsize=64)
def _text_json(text: str) -> str:
    """``text`` as a JSON string (an env spec: the same long string every episode)."""
    return json.dumps(text)


def record_body(encoded: EncodedEpisode) -> list[bytes]:
    """The record body of ``encoded``, in pieces: header length, header, column bytes."""
    meta = encoded.meta.to_dict()
    env_spec = _text_json(meta.pop("env_spec"))
    header = (
        f'{{"meta":{json.dumps(meta)[:-1]},"env_spec":{env_spec}}},"events":{encoded.events},'
        f'"columns":{_columns_json(encoded.schema)}}}'
    ).encode()
    return [_U32.pack(len(header)), header, encoded.data]


def decode_episode(body: bytes) -> Episode:
    """Rebuilds an episode from a record body (arrays are read-only views of it).

    Raises:
        ValueError: The body is not a whole record.
    """
    view = memoryview(body)
    try:
        (header_length,) = _U32.unpack_from(view)
        offset = _U32.size + header_length
        header = json.loads(bytes(view[_U32.size : offset]))
        meta = EpisodeMeta.from_dict(header["meta"])
        columns = header["columns"]
        schema = tuple((name, np.dtype(dtype), tuple(shape)) for name, dtype, shape in columns)
        return Episode(meta, _read_columns(view, offset, schema, meta.length, header["events"]))
    except (struct.error, KeyError, TypeError, IndexError, AttributeError, OverflowError) as error:
        raise ValueError(f"not a whole episode record ({type(error).__name__}: {error})") from error


def decode_encoded(encoded: EncodedEpisode) -> Episode:
    """The episode whose record bytes ``encoded`` holds (arrays are read-only views of them).

    Raises:
        ValueError: The bytes do not match the schema.
    """
    columns = _read_columns(
        memoryview(encoded.data), 0, encoded.schema, encoded.meta.length, encoded.events
    )
    return Episode(encoded.meta, columns)


def concat_encoded(episodes: Sequence[EncodedEpisode]) -> dict[str, np.ndarray]:
    """The columns of episodes of one schema (at least one), concatenated from their bytes.

    The episodes' bytes are joined once, and every column is gathered from
    them with a few array operations (text: one decode per episode), so the
    cost does not grow with the number of episodes times columns.

    Raises:
        ValueError: The episodes' schemas differ, or their bytes do not match it.
    """
    schema = episodes[0].schema
    if any(e.schema != schema for e in episodes):
        raise ValueError("episodes of different schemas cannot be joined column by column")
    sizes = np.array([len(e.data) for e in episodes], np.int64)
    data = np.frombuffer(b"".join([e.data for e in episodes]), np.uint8)
    lengths = np.array([e.meta.length for e in episodes], np.int64)
    counts = np.stack([lengths + 1, lengths, np.array([e.events for e in episodes])], axis=1)
    layout = _layout(schema)
    rows = counts[:, [family for family, _ in layout]]  # (episodes, columns)
    starts = np.empty_like(rows)
    offset = np.cumsum(sizes) - sizes  # where each episode's next column starts in data
    for index, (_, row_size) in enumerate(layout):
        starts[:, index] = offset
        if row_size >= 0:
            offset = offset + rows[:, index] * row_size
        else:  # text: int64 lengths, then the bytes
            text_bytes = [
                int(np.frombuffer(data, np.int64, n, start).sum())
                for n, start in zip(rows[:, index].tolist(), offset.tolist(), strict=True)
            ]
            offset = offset + 8 * rows[:, index] + np.array(text_bytes, np.int64)
    bad = np.flatnonzero(offset != np.cumsum(sizes))
    if len(bad):
        extra = int(np.cumsum(sizes)[bad[0]] - offset[bad[0]])
        raise ValueError(f"episode record has {extra} unexpected trailing bytes")
    columns: dict[str, np.ndarray] = {}
    for index, ((name, dtype, shape), (_, row_size)) in enumerate(zip(schema, layout, strict=True)):
        count = rows[:, index]
        if row_size < 0:
            view = data.data
            texts = [
                text
                for n, start in zip(count.tolist(), starts[:, index].tolist(), strict=True)
                for text in _read_text(view, start, n)[0]
            ]
            columns[name] = np.empty(len(texts), object)
            columns[name][:] = texts
        else:
            columns[name] = _gather_rows(data, starts[:, index], count, row_size, dtype, shape)
    return columns


def join_encoded(episodes: Sequence[EncodedEpisode]) -> dict[str, np.ndarray]:
    """The columns of compatible episodes (at least one), joined from their bytes in their order.

    Unlike :func:`concat_encoded` the schemas may differ as
    :func:`~feedbackgym.datasets.columns.compatible` allows (an episode without feedback events
    or shaping leaves those columns out): each schema's episodes are joined
    with :func:`concat_encoded`, their absent :data:`~feedbackgym.datasets.columns.NEUTRAL`
    columns filled in, and every column's rows put back in episode order. A
    sealed segment thus costs a few array operations per schema, not a decode
    per episode.

    Raises:
        ValueError: As for :func:`concat_encoded`, or an episode with rows of a
            column that episodes of another schema lack.
    """
    by_schema: dict[Schema, list[int]] = {}
    for position, episode in enumerate(episodes):
        by_schema.setdefault(episode.schema, []).append(position)
    lengths = np.array([e.meta.length for e in episodes], np.int64)
    if len(by_schema) == 1:
        return with_neutral(concat_encoded(episodes), int(lengths.sum()), len(episodes))
    counts = {
        "observation": lengths + 1,
        "step": lengths,
        "event": np.array([e.events for e in episodes], np.int64),
    }
    starts = {family: np.cumsum(count) - count for family, count in counts.items()}
    parts = []
    for members in by_schema.values():
        index = np.array(members)
        joined = concat_encoded([episodes[i] for i in members])
        parts.append((index, with_neutral(joined, int(lengths[index].sum()), len(members))))
    columns: dict[str, np.ndarray] = {}
    for name in dict.fromkeys(name for _, joined in parts for name in joined):
        family = column_rows(name)
        pieces = [(index, joined[name]) for index, joined in parts if name in joined]
        total = int(counts[family].sum())
        if sum(len(column) for _, column in pieces) != total:
            raise ValueError(f"some episodes have rows of column {name!r} and others lack it")
        out = np.empty(
            (total, *pieces[0][1].shape[1:]),
            np.result_type(*(column.dtype for _, column in pieces)),
        )
        for index, column in pieces:
            count = counts[family][index]
            before = np.cumsum(count) - count  # where each episode's rows start in ``column``
            out[np.repeat(starts[family][index] - before, count) + np.arange(len(column))] = column
        columns[name] = out
    return columns


def _gather_rows(
    data: np.ndarray,
    starts: np.ndarray,
    count: np.ndarray,
    row_size: int,
    dtype: np.dtype[Any],
    shape: tuple[int, ...],
) -> np.ndarray:
    """The rows of a column that starts at ``starts[e]`` with ``count[e]`` rows in episode ``e``."""
    total = int(count.sum())
    if row_size == 0 or total == 0:
        return np.empty((total, *shape), dtype)
    # Row j of the column, the k-th of its episode e, starts at starts[e] + k * row_size.
    before = np.cumsum(count) - count
    offsets = np.repeat(starts - before * row_size, count) + np.arange(total) * row_size
    rows = np.lib.stride_tricks.sliding_window_view(data, row_size)[offsets]
    return rows.view(dtype).reshape(total, *shape)


@functools.lru_cache(maxsize=64)
def _layout(schema: Schema) -> tuple[tuple[int, int], ...]:
    """Per column: its row family (0 observation, 1 step, 2 event) and bytes per row (-1: text)."""
    families = {"observation": 0, "step": 1, "event": 2}
    return tuple(
        (
            families[column_rows(name)],
            -1 if dtype.kind == "O" else dtype.itemsize * int(np.prod(shape, dtype=np.int64)),
        )
        for name, dtype, shape in schema
    )


def _read_text(view: memoryview, offset: int, count: int) -> tuple[list[str], int]:
    """A string column's values and the offset after them."""
    lengths = np.frombuffer(view, np.int64, count, offset)
    offset += lengths.nbytes
    texts = []
    for size in lengths.tolist():
        texts.append(bytes(view[offset : offset + size]).decode())
        offset += size
    return texts, offset


def _read_columns(
    view: memoryview, offset: int, schema: Schema, length: int, events: int
) -> dict[str, np.ndarray]:
    rows = {"observation": length + 1, "step": length, "event": events}
    columns: dict[str, np.ndarray] = {}
    for name, dtype, shape in schema:
        count = rows[column_rows(name)]
        if dtype.kind == "O":
            texts, offset = _read_text(view, offset, count)
            column = np.empty(count, object)
            column[:] = texts
        else:
            items = count * int(np.prod(shape, dtype=np.int64))
            column = np.frombuffer(view, dtype, items, offset).reshape(count, *shape)
            offset += items * dtype.itemsize
        columns[name] = column
    if offset != len(view):
        raise ValueError(f"episode record has {len(view) - offset} unexpected trailing bytes")
    return columns
