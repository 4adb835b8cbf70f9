"""Recovery on open: seals the logs of writers that died, and clears their leftovers.

A log nobody holds a lock on belongs to a dead writer. If its segment exists
(the writer died between sealing and deleting the log), the log is stale and
goes, unless that segment cannot be read: then both stay as they are (readers
read the log instead). Otherwise its complete records are sealed into the
segment it would have become, which also replaces a segment the writer left
half-written (``.h5.tmp``). A log that never got its name (``.*.log.new``, a
crash while creating it) holds no episode and goes once it is a minute old
and unlocked.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from feedbackgym.datasets._storage.codec import decode_episode
from feedbackgym.datasets._storage.segment import read_index, write_segment
from feedbackgym.datasets._storage.wal import read_log, try_lock
from feedbackgym.datasets._storage.writer import WriterOptions
from feedbackgym.datasets.errors import damaged_file

__all__ = ["recover"]

logger = logging.getLogger(__name__)

_UNNAMED_LOG_AGE = 60.0
"""Seconds before an unlocked ``.*.log.new`` counts as left over (its writer may be
between creating and locking it)."""


def recover(directory: Path, options: WriterOptions) -> int:
    """Seals orphan logs in ``directory``; returns how many episodes it sealed.

    Safe to run from several processes at once, and beside live writers: a
    log is only touched while its lock is held.

    Raises:
        OSError: A segment cannot be written (the log is kept).
    """
    recovered = 0
    for log in sorted(directory.glob("*.log")):
        try:
            fd = try_lock(log)
        except FileNotFoundError:
            continue
        if fd is None:
            continue
        try:
            segment = log.with_suffix(".h5")
            if segment.exists():
                try:
                    read_index(segment)
                except (OSError, ValueError) as error:  # damaged: the log is the only copy
                    damaged = damaged_file(segment, error)
                    logger.warning("not recovering %s: its segment %s", log, damaged)
                    continue
            else:
                try:
                    episodes = [decode_episode(body) for body in read_log(log)[0]]
                except ValueError as error:
                    logger.warning("not recovering %s: %s", log, error)
                    continue
                if episodes:
                    try:
                        write_segment(
                            segment,
                            episodes,
                            compression=options.compression,
                            compression_opts=options.compression_level,
                            fsync=options.fsync,
                            attrs={"shard": episodes[0].meta.shard, "source": "recovery"},
                        )
                    except ValueError as error:  # e.g. a name HDF5 cannot file: keep the log
                        logger.warning("not recovering %s: %s", log, error)
                        continue
                    recovered += len(episodes)
            _unlink(log)
        finally:
            os.close(fd)
    for unnamed in directory.glob(".*.log.new"):
        _unlink_unlocked(unnamed, min_age=_UNNAMED_LOG_AGE)
    return recovered


def _unlink_unlocked(path: Path, *, min_age: float) -> None:
    try:
        if time.time() - path.stat().st_mtime < min_age:
            return
        fd = try_lock(path)
    except FileNotFoundError:
        return
    if fd is None:
        return
    try:
        _unlink(path)
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
