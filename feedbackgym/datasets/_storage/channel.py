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
    >>> r, w = os.pipe()
    >>> write_all(w, request("episode", 1) + request("flush", 2))
    >>> os.close(w)
    >>> requests = RequestReader(r)
    >>> requests.next(), requests.next(), requests.next()
    (('episode', 1), ('flush', 2), None)
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import time
from typing import IO, Any

__all__ = [
    "ACK",
    "DONE",
    "ERROR",
    "READY",
    "REPLY",
    "RequestReader",
    "read_exact",
    "read_reply",
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


class RequestReader:
    """Requests off a pipe, read in batches.

    Once the pipe has run dry after serving requests, the reader waits
    ``pause_s`` before it reads again, so that a busy recorder's episodes come
    in many to a wake-up of the writer rather than one each: each wake-up can
    take the core from the recorder it serves. While the pipe holds data there
    is no pause, so a recorder waits on one only if it fills the pipe within
    it; a flush or a close is answered up to ``pause_s`` later.

    Args:
        fd: The pipe's read end (not closed by the reader).
        pause_s: Seconds to wait before reading again after serving a batch.
    """

    _READ_BYTES = 1 << 20

    def __init__(self, fd: int, pause_s: float = 0.0) -> None:
        self.fd = fd
        self.pause_s = pause_s
        self._buffer = bytearray()
        self._start = 0
        self._served = False
        self._ended = False

    def next(self) -> tuple[Any, ...] | None:
        """The next request, or ``None`` when the recorder is gone (the end of the pipe).

        A frame torn off at the end counts as the end.
        """
        while True:
            frame = self._frame()
            if frame is not None:
                self._served = True
                return pickle.loads(frame)
            if self._ended:
                return None
            self._fill()

    def answered(self) -> None:
        """Says the last request was one its sender waits on: the next read comes at once.

        A recorder's flush waits for its answer and may send another request right
        after it (every env of a trainer flushes the store it shares as it closes).
        """
        self._served = False

    def _frame(self) -> bytearray | None:
        """The next whole frame's body in the buffer, if it holds one (then consumed)."""
        head_end = self._start + REQUEST.size
        if len(self._buffer) < head_end:
            return None
        end = head_end + REQUEST.unpack_from(self._buffer, self._start)[0]
        if len(self._buffer) < end:
            return None
        self._start = end
        return self._buffer[head_end:end]

    def _fill(self) -> None:
        if self._served and self.pause_s and not select.select([self.fd], [], [], 0)[0]:
            time.sleep(self.pause_s)
        self._served = False
        del self._buffer[: self._start]  # the frames served
        self._start = 0
        data = os.read(self.fd, self._READ_BYTES)
        if data:
            self._buffer += data
        else:
            self._ended = True


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
