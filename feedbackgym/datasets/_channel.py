"""The framing between a recording process and its writer process (two pipes).

Requests (recorder to writer) are a ``u64`` length and a pickle of a tuple
whose first item names the request; replies (writer to recorder) are a kind
byte, a ``u64`` sequence number and a ``u32`` length, then that many bytes of
pickle (none for an acknowledgement). Pickle is safe here: both ends are
this package, in a parent and the child it started; nothing of it is stored.

Example:
    >>> r, w = os.pipe()
    >>> write_all(w, reply(ACK, 7))
    >>> read_reply(os.fdopen(r, "rb", buffering=0))
    (65, 7, None)
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import IO, Any

__all__ = [
    "ACK",
    "DONE",
    "ERROR",
    "READY",
    "REPLY",
    "read_exact",
    "read_reply",
    "read_request",
    "reply",
    "request",
    "write_all",
]

REQUEST = struct.Struct("<Q")
REPLY = struct.Struct("<BQI")
ACK, DONE, ERROR, READY = b"A"[0], b"D"[0], b"E"[0], b"R"[0]
"""Reply kinds: an episode is in the log; a flush or close is done; an episode or a
flush failed (the payload says why); the writer is up (the payload is its shard)."""


def request(*items: Any) -> bytes:
    """A request frame."""
    body = pickle.dumps(items, pickle.HIGHEST_PROTOCOL)
    return REQUEST.pack(len(body)) + body


def reply(kind: int, seq: int, payload: Any = None) -> bytes:
    """A reply frame (an acknowledgement carries no payload)."""
    body = b"" if payload is None else pickle.dumps(payload, pickle.HIGHEST_PROTOCOL)
    return REPLY.pack(kind, seq, len(body)) + body


def write_all(fd: int, data: bytes) -> None:
    """Writes all of ``data`` to ``fd`` (blocking while the pipe is full).

    Raises:
        BrokenPipeError: The other end is gone.
    """
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_exact(file: IO[bytes], size: int) -> bytes | None:
    """``size`` bytes from ``file``, or ``None`` at its end (a torn frame counts as the end)."""
    chunks = []
    while size:
        chunk = file.read(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_request(file: IO[bytes]) -> tuple[Any, ...] | None:
    """The next request, or ``None`` when the recorder is gone (end of the pipe)."""
    head = read_exact(file, REQUEST.size)
    if head is None:
        return None
    body = read_exact(file, REQUEST.unpack(head)[0])
    return None if body is None else pickle.loads(body)


def read_reply(file: IO[bytes]) -> tuple[int, int, Any] | None:
    """The next ``(kind, seq, payload)``, or ``None`` when the writer is gone."""
    head = read_exact(file, REPLY.size)
    if head is None:
        return None
    kind, seq, size = REPLY.unpack(head)
    body = read_exact(file, size) if size else b""
    if body is None:
        return None
    return kind, seq, pickle.loads(body) if size else None
