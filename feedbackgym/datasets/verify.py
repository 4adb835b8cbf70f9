"""Verifying a store file by file, and moving the damaged ones aside.

:func:`verify_store` reads every file of a store in full: each sealed segment's
datasets (numeric columns carry Fletcher-32 checksums, so a flipped bit in
them fails the read; segments written before the checksums are read for their
structure) and its episode index, and each write-ahead log's records (each
framed with a CRC-32, and decoded; bytes past the last complete record are a torn
write or corruption). A file it cannot stat (a dangling link) is damaged too.
:func:`quarantine` moves damaged files to ``PATH/quarantine/``, where the store
no longer reads them, keeping their paths below it.
``feedbackgym datasets verify PATH [--quarantine]`` runs both.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = (root / "a-000000.h5").write_bytes(b"")
    >>> [str(d) for d in verify_store(root)]  # doctest: +ELLIPSIS
    ['.../a-000000.h5: empty (0 bytes)']
    >>> [p.name for p in quarantine(root, verify_store(root))]
    ['a-000000.h5']
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from feedbackgym.datasets._storage.catalog import segment_files
from feedbackgym.datasets._storage.codec import decode_episode
from feedbackgym.datasets._storage.hdf5 import h5py
from feedbackgym.datasets._storage.segment import DAMAGE_ERRORS, as_read_error, read_index
from feedbackgym.datasets._storage.wal import read_log
from feedbackgym.datasets.errors import DamagedFile, StoreError, damaged_file

__all__ = ["QUARANTINE_DIR", "quarantine", "verify_store"]

QUARANTINE_DIR = "quarantine"
"""Where :func:`quarantine` moves damaged files, inside the store."""


def verify_store(path: str | os.PathLike[str]) -> list[DamagedFile]:
    """Every file of the store at ``path`` that cannot be read in full, with why.

    Raises:
        StoreError: ``path`` does not exist.
    """
    root = Path(path)
    if not root.exists():
        raise StoreError(f"no store at {root}")
    damaged = [d for d in map(_check_segment, segment_files(root)) if d is not None]
    logs = [root] if root.suffix == ".log" else sorted(root.glob("*.log")) if root.is_dir() else []
    damaged += [d for d in map(_check_log, logs) if d is not None]
    return damaged


def quarantine(path: str | os.PathLike[str], damaged: Iterable[DamagedFile]) -> list[Path]:
    """Moves each damaged file to ``path/quarantine/`` (same place below it); returns the new paths.

    Raises:
        StoreError: ``path`` is not a store directory.
    """
    root = Path(path)
    if not root.is_dir():
        raise StoreError(f"{root} is not a store directory")
    moved = []
    for file in damaged:
        target = root / QUARANTINE_DIR / file.path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(file.path), target)
        moved.append(target)
    return moved


def _check_segment(path: Path) -> DamagedFile | None:
    try:
        if path.stat().st_size == 0:
            return DamagedFile(path, "empty (0 bytes)")
        read_index(path)
        with h5py.File(path, "r") as file:
            file.visititems(_read_in_full)
    except DAMAGE_ERRORS as error:
        if isinstance(error, KeyError):
            return DamagedFile(path, f"a part is missing: {error}")
        return damaged_file(path, as_read_error(error))
    return None


def _read_in_full(name: str, item: Any) -> None:
    if isinstance(item, h5py.Dataset):
        try:
            item[()]
        except OSError as error:  # a checksum that does not match, a chunk that cannot be read
            raise OSError(f"dataset {name} cannot be read ({error})") from error


def _check_log(path: Path) -> DamagedFile | None:
    try:
        size = path.stat().st_size
        if size == 0:
            return DamagedFile(path, "empty (0 bytes)")
        bodies, end = read_log(path)
        for number, body in enumerate(bodies):
            try:
                decode_episode(body)
            except ValueError as error:
                return DamagedFile(path, f"record {number} cannot be decoded: {error}")
    except (OSError, ValueError) as error:
        return damaged_file(path, error)
    if end < size:
        return DamagedFile(
            path, f"{size - end} bytes past its last complete record (a torn write or corruption)"
        )
    return None
