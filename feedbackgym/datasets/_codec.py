"""Episodes to bytes and back, for the write-ahead log.

A record body is a little-endian ``u32`` header length, a JSON header (the
metadata, the number of feedback events and, per column, its name, dtype and
row shape) and the column bytes in order; a column's row count follows from
its family (see :func:`~.episode.column_rows`). String columns are stored as
``int64`` UTF-8 byte lengths followed by the concatenated UTF-8 bytes. No
pickle: a log from elsewhere is only data.
"""

from __future__ import annotations

import functools
import json
import struct

import numpy as np

from feedbackgym.datasets.episode import Episode, EpisodeMeta, Schema, column_rows

__all__ = ["decode_episode", "encode_episode"]

_U32 = struct.Struct("<I")


@functools.lru_cache(maxsize=64)
def _columns_json(schema: Schema) -> str:
    return json.dumps([[name, dtype.str, list(shape)] for name, dtype, shape in schema])


def encode_episode(episode: Episode) -> bytes:
    """Returns the record body of ``episode``."""
    events = episode.rows("events/row")
    header = (
        f'{{"meta":{json.dumps(episode.meta.to_dict())},"events":{events},'
        f'"columns":{_columns_json(episode.schema)}}}'
    ).encode()
    pieces = [_U32.pack(len(header)), header]
    for column in episode.columns.values():
        if column.dtype == object:
            raw = [s.encode() for s in column]
            pieces.append(np.fromiter(map(len, raw), np.int64, len(raw)).tobytes())
            pieces.append(b"".join(raw))
        else:
            pieces.append(column.tobytes())  # C order; copying small arrays beats viewing them
    return b"".join(pieces)


def decode_episode(body: bytes) -> Episode:
    """Rebuilds an episode from a record body (arrays are read-only views of it).

    Raises:
        ValueError: The body is not a whole record.
    """
    view = memoryview(body)
    (header_length,) = _U32.unpack_from(view)
    offset = _U32.size + header_length
    header = json.loads(bytes(view[_U32.size : offset]))
    meta = EpisodeMeta.from_dict(header["meta"])
    rows = {"observation": meta.length + 1, "step": meta.length, "event": header["events"]}
    columns: dict[str, np.ndarray] = {}
    for name, dtype, shape in header["columns"]:
        count = rows[column_rows(name)]
        kind = np.dtype(dtype)
        if kind.kind == "O":
            lengths = np.frombuffer(view, np.int64, count, offset)
            offset += lengths.nbytes
            column = np.empty(count, object)
            for i, length in enumerate(lengths.tolist()):
                column[i] = bytes(view[offset : offset + length]).decode()
                offset += length
        else:
            items = count * int(np.prod(shape, dtype=np.int64))
            column = np.frombuffer(view, kind, items, offset).reshape(count, *shape)
            offset += items * kind.itemsize
        columns[name] = column
    if offset != len(body):
        raise ValueError(f"episode record has {len(body) - offset} unexpected trailing bytes")
    return Episode(meta, columns)
