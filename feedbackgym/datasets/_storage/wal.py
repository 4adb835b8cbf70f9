"""The write-ahead log: an append-only file of framed episode records.

A log starts with :data:`FILE_MAGIC` and a framed JSON header; each episode is
one frame: ``b"FGEP"``, a CRC-32 and a ``u64`` length of the body, then the
body (see :mod:`.codec`). A frame cut short by a crash, or one whose CRC does
not match, ends the log: everything before it is intact, because frames are
only ever appended.

A writer holds an exclusive ``flock`` on its log for as long as it has it open;
the kernel drops the lock when the process dies (``kill -9`` included), which
is how a reader or a recovering writer tells a live log from an orphan. A log
is created under a hidden name, locked, then renamed into place, so a visible
log is never unlocked while its writer lives.
"""

from __future__ import annotations

import fcntl
import json
import os
import struct
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["FILE_MAGIC", "LogFile", "Piece", "frame", "fsync_directory", "read_log", "try_lock"]

Piece = bytes | memoryview
"""Part of what :meth:`LogFile.append` writes (with one ``writev``)."""

FILE_MAGIC = b"FGTLOG1\n"
_FRAME = struct.Struct("<4sIQ")
_RECORD = b"FGEP"


def frame(body: Sequence[Piece]) -> list[Piece]:
    """A record body, given in pieces, behind its prefix (magic, CRC-32, length): one append."""
    crc = 0
    for piece in body:
        crc = zlib.crc32(piece, crc)
    return [_FRAME.pack(_RECORD, crc, sum(map(len, body))), *body]


class LogFile:
    """An open, locked log that episodes are appended to.

    Args:
        path: Where the log goes (created; must not exist).
        header: JSON-safe data written at the start (shard, format, ...).
        fsync: ``fsync`` after every append (survives power loss, slower).

    Raises:
        OSError: The file cannot be created or locked.
    """

    def __init__(self, path: Path, header: dict[str, Any], *, fsync: bool = False) -> None:
        self.path = path
        self.fsync = fsync
        hidden = path.with_name(f".{path.name}.new")
        self._fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.size = 0
            self.append([FILE_MAGIC, *frame([json.dumps(header).encode()])])
            os.replace(hidden, path)
            if fsync:
                fsync_directory(path.parent)
        except BaseException:
            os.close(self._fd)
            _unlink(hidden)
            raise

    def append(self, pieces: Sequence[Piece]) -> None:
        """Appends whole frames, given in pieces (one ``writev``); on failure, cuts them off.

        Raises:
            OSError: The write failed (disk full, file size limit, I/O error).
        """
        total = sum(len(piece) for piece in pieces)
        try:
            written = os.writev(self._fd, pieces)
            if written < total:  # rare: finish what the kernel took only in part
                rest = memoryview(b"".join(pieces))[written:]
                while rest:
                    rest = rest[os.write(self._fd, rest) :]
            if self.fsync:
                os.fsync(self._fd)
        except OSError:
            try:
                os.ftruncate(self._fd, self.size)
            except OSError:
                pass  # a torn frame at the end is ignored by readers anyway
            raise
        self.size += total

    def close(self, *, unlink: bool = False) -> None:
        """Closes the log (releasing the lock), and deletes it first if ``unlink``."""
        if unlink:
            _unlink(self.path)
        os.close(self._fd)


def read_log(path: Path, start: int = 0) -> tuple[list[bytes], int]:
    """Reads the complete record bodies of a log from byte ``start`` on.

    Args:
        path: The log.
        start: 0 for the whole log, or an offset this function returned before
            (to read only what was appended since).

    Returns:
        The bodies, and the offset just past the last complete record.

    Raises:
        OSError: The file cannot be read.
        ValueError: The file is not a feedbackgym log.
    """
    with open(path, "rb") as file:
        file.seek(start)
        data = memoryview(file.read())
    offset = 0
    if start == 0:
        if not data[: len(FILE_MAGIC)] == FILE_MAGIC:
            raise ValueError("not a feedbackgym trajectory log")
        header = next(_frames(data, len(FILE_MAGIC)), None)
        if header is None:
            return [], 0
        offset = len(FILE_MAGIC) + _FRAME.size + len(header)
    bodies = list(_frames(data, offset))
    return bodies, start + offset + sum(_FRAME.size + len(b) for b in bodies)


def _frames(data: memoryview, offset: int) -> Iterator[bytes]:
    while offset + _FRAME.size <= len(data):
        magic, crc, length = _FRAME.unpack_from(data, offset)
        start = offset + _FRAME.size
        body = bytes(data[start : start + length])
        if magic != _RECORD or len(body) != length or zlib.crc32(body) != crc:
            return
        yield body
        offset = start + length


def fsync_directory(path: Path) -> None:
    """Makes the renames and deletions in directory ``path`` survive power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def try_lock(path: Path) -> int | None:
    """Opens and locks ``path`` if no live writer holds it; returns the fd, else ``None``.

    Raises:
        FileNotFoundError: ``path`` is gone.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
