r"""Ships a directory's changes as plain data, to mirror it on another machine.

A run on a cluster node writes its run directory on that node's disk.
:class:`DirChanges` notes what changed since it last looked (new files whole,
files that only grew as their new tail, deleted files), as a
:class:`Changes` mapping that pickles (Ray sends it to the head); :func:`apply_changes`
makes a mirror directory follow, and :func:`snapshot` / :func:`restore` copy a
whole directory the other way (a retried run starts from the mirror).

Temporary files (``*.tmp``, hidden files) are never shipped: every file the
run directory keeps is renamed into place whole or only appended to.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> run, mirror = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    >>> _ = (run / "curve.csv").write_text("step\n")
    >>> watch = DirChanges(run)
    >>> apply_changes(mirror, watch.changes())
    >>> with (run / "curve.csv").open("a") as file:
    ...     _ = file.write("128\n")
    >>> changes = watch.changes()
    >>> changes["appended"]
    {'curve.csv': (5, b'128\n')}
    >>> apply_changes(mirror, changes)
    >>> (mirror / "curve.csv").read_text()
    'step\n128\n'
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

__all__ = ["Changes", "DirChanges", "apply_changes", "restore", "snapshot"]

_TAIL = 4096
"""Bytes at the end of a shipped file checked again before only its growth is shipped."""


class Changes(TypedDict):
    """What changed in a directory, by path relative to it.

    Attributes:
        written: New or rewritten files, whole.
        appended: Files that only grew: ``(old size, new bytes)``.
        deleted: Files that are gone.
    """

    written: dict[str, bytes]
    appended: dict[str, tuple[int, bytes]]
    deleted: list[str]


@dataclass(frozen=True)
class _Seen:
    inode: int
    size: int
    mtime_ns: int
    tail_crc: int


def _shipped(path: Path, root: Path) -> bool:
    parts = path.relative_to(root).parts
    return not any(part.startswith(".") for part in parts) and not path.name.endswith(".tmp")


def _files(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    return {
        path.relative_to(root).as_posix(): path
        for path in root.rglob("*")
        if path.is_file() and _shipped(path, root)
    }


def _tail_crc(data: bytes) -> int:
    return zlib.crc32(data[-_TAIL:])


class DirChanges:
    """Notes the changes of one directory between calls of :meth:`changes`.

    Args:
        root: The directory (it may not exist yet).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._seen: dict[str, _Seen] = {}

    def changes(self) -> Changes:
        """What changed since the last call (everything, the first time)."""
        found: Changes = {"written": {}, "appended": {}, "deleted": []}
        files = _files(self.root)
        for name, path in files.items():
            try:
                stat = path.stat()
                before = self._seen.get(name)
                if before is not None and (before.size, before.mtime_ns, before.inode) == (
                    stat.st_size,
                    stat.st_mtime_ns,
                    stat.st_ino,
                ):
                    continue
                grown = self._grown(path, before, stat.st_ino, stat.st_size)
                if grown is not None:
                    assert before is not None
                    new, tail = grown
                    found["appended"][name] = (before.size, new)
                    size = before.size + len(new)
                else:
                    data = path.read_bytes()
                    found["written"][name] = data
                    size, tail = len(data), _tail_crc(data)
            except FileNotFoundError:  # removed while we looked: the next call says so
                continue
            self._seen[name] = _Seen(stat.st_ino, size, stat.st_mtime_ns, tail)
        for name in sorted(set(self._seen) - set(files)):
            del self._seen[name]
            found["deleted"].append(name)
        return found

    def _grown(
        self, path: Path, before: _Seen | None, inode: int, size: int
    ) -> tuple[bytes, int] | None:
        """The bytes past ``before.size`` and the new tail's CRC if it only grew, else ``None``."""
        if before is None or before.inode != inode or size <= before.size:
            return None
        with path.open("rb") as file:
            start = max(0, before.size - _TAIL)
            file.seek(start)
            data = file.read()
        old, new = data[: before.size - start], data[before.size - start :]
        if _tail_crc(old) != before.tail_crc:
            return None
        return new, _tail_crc(data)


def _inside(root: Path, name: str) -> Path:
    path = (root / name).resolve()
    if not path.is_relative_to(root.resolve()):
        raise ValueError(f"{name!r} lies outside {root}")
    return path


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def apply_changes(root: str | os.PathLike[str], changes: Changes) -> None:
    """Makes the mirror at ``root`` follow ``changes`` (each file replaced atomically).

    Raises:
        ValueError: A path lies outside ``root``, or an appended file's mirror
            is not the size the change starts at.
    """
    base = Path(root)
    for name, data in changes["written"].items():
        _write(_inside(base, name), data)
    for name, (offset, data) in changes["appended"].items():
        path = _inside(base, name)
        size = path.stat().st_size if path.exists() else -1
        if size != offset:
            raise ValueError(
                f"{name}: the mirror holds {size} bytes, the change starts at {offset}"
            )
        with path.open("ab") as file:
            file.write(data)
    for name in changes["deleted"]:
        _inside(base, name).unlink(missing_ok=True)


def snapshot(root: str | os.PathLike[str]) -> dict[str, bytes]:
    """Every shipped file of the directory at ``root``, whole (empty when it does not exist)."""
    base = Path(root)
    return {name: path.read_bytes() for name, path in _files(base).items()}


def restore(root: str | os.PathLike[str], files: dict[str, bytes]) -> None:
    """Writes a :func:`snapshot` into the directory ``root`` (created if missing).

    Raises:
        ValueError: A path lies outside ``root``.
    """
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        _write(_inside(base, name), data)
