"""One process's writer: a write-ahead log, and a bounded queue to a thread that seals segments.

:meth:`ShardWriter.submit` appends the episode to the shard's write-ahead log
(one ``write``; from then on it survives a crash of the process) and keeps it
in the log's batch. Once the log holds ``segment_steps`` steps or its first
episode is ``segment_seconds`` old, or on :meth:`~ShardWriter.flush`, the log
and its batch go through a bounded queue to the writer thread, which writes
the batch to a sealed HDF5 segment named like the log (``{shard}-{n}.h5`` for
``{shard}-{n}.log``) and then deletes the log; the next episode starts a new
log. A full queue blocks the producer (backpressure: memory stays bounded),
and the producer never waits on the thread otherwise, so recording costs no
thread switch per episode. When no episode comes, the thread itself seals a
log once its first episode is ``segment_seconds`` old.

A failed write (disk full, permissions) raises :class:`~feedbackgym.datasets.errors.StoreError`
saying what was kept: a log append is cut back to its last whole record and
the episode is not stored; a segment that cannot be written leaves its log in
place (readable, and sealed by the next writer's recovery) and puts the writer
in a failed state that every later call reports. Sealed segments are never
touched.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from feedbackgym._process import pid_alive
from feedbackgym.datasets._storage.codec import EncodedEpisode, record_body
from feedbackgym.datasets._storage.segment import (
    FORMAT,
    FORMAT_VERSION,
    check_not_nested,
    group_path,
    write_segment,
)
from feedbackgym.datasets._storage.wal import LogFile, frame
from feedbackgym.datasets.columns import Schema, compatible
from feedbackgym.datasets.errors import StoreError, describe_os_error

__all__ = ["ShardWriter", "WriterOptions", "shard_host", "shard_writer_alive"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriterOptions:
    """How a store writes (see :class:`~feedbackgym.datasets.TrajectoryStore`)."""

    compression: str | None = None
    compression_level: int | None = None
    queue_size: int = 2
    segment_steps: int = 50_000
    segment_seconds: float = 300.0
    fsync: bool = False


@dataclass(frozen=True)
class _Seal:
    log: LogFile
    episodes: list[EncodedEpisode]


@dataclass(frozen=True)
class _Flush:
    done: threading.Event = dataclasses.field(default_factory=threading.Event)


_Item = _Seal | _Flush | None


def shard_host() -> str:
    """This machine's name as shard names spell it (``{host}-{pid}-{token}``: no ``-``)."""
    return re.sub(r"[^A-Za-z0-9_.]+", "_", socket.gethostname())


def shard_writer_alive(shard: str) -> bool:
    """Whether the process that writes ``shard`` may still be running.

    A shard of another machine, or not named by :class:`ShardWriter`, counts as alive.
    """
    host, pid, _ = (shard.rsplit("-", 2) + ["", ""])[:3]
    if host != shard_host() or not pid.isdigit():
        return True
    return pid_alive(int(pid))


class ShardWriter:
    """Writes one shard of a store directory.

    Args:
        directory: The store directory (created if missing).
        options: Queue size, segment size, compression, fsync.

    Raises:
        StoreError: The directory or the first log cannot be created.
    """

    def __init__(self, directory: Path, options: WriterOptions) -> None:
        self.directory = directory
        self.options = options
        self.shard = f"{shard_host()}-{os.getpid()}-{secrets.token_hex(3)}"
        self._queue: queue.Queue[_Item] = queue.Queue(options.queue_size)
        self._lock = threading.Lock()
        self._schemas: dict[tuple[str, str], list[Schema]] = {}
        """Per task and round: the first episode's schema, then others found compatible."""
        self._group_paths: set[str] = set()
        self._error: StoreError | None = None
        self._next_episode = 0
        self._sequence = 0
        self._batch: list[EncodedEpisode] = []
        self._log_steps = 0
        self._log_since = 0.0
        self.logged = 0
        self.sealed = 0
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._log: LogFile | None = self._open_log()
        except OSError as error:
            raise StoreError(describe_os_error(error, "write to", directory)) from error
        self._thread = threading.Thread(
            target=self._run, name=f"feedbackgym-writer-{self.shard}", daemon=True
        )
        self._thread.start()

    # --- producer side --------------------------------------------------------------------

    def submit(self, episode: EncodedEpisode) -> None:
        """Stamps ``episode`` with this shard and its number and logs it; durable on return.

        Raises:
            StoreError: The log cannot be written (the episode is not stored;
                earlier ones are intact), or the writer has failed.
            ValueError: The episode's columns differ from earlier episodes of
                the same task and round, or its round group would nest with
                another's (task ``"a/b"`` round ``"c"`` inside task ``"a"`` round ``"b"``).
        """
        if episode.meta.length < 1:
            raise ValueError("an episode needs at least one step")
        schema = episode.schema
        group = (episode.meta.task_id, episode.meta.round)
        with self._lock:
            if self._error is not None:
                raise StoreError(f"{self._error} (this episode was not stored)") from self._error
            if group not in self._schemas:  # a name HDF5 can file, not inside another's
                group_name = group_path(*group)
                check_not_nested(group_name, self._group_paths)
                self._group_paths.add(group_name)
            accepted = self._schemas.setdefault(group, [schema])
            if schema not in accepted:
                if not compatible(accepted[0], schema):
                    raise ValueError(
                        f"this episode of task {group[0]!r} round {group[1]!r} has other "
                        f"columns than earlier ones ({sorted(set(accepted[0]) ^ set(schema))}): "
                        "record envs with different spaces under different task ids"
                    )
                accepted.append(schema)
            episode.meta.shard = self.shard
            episode.meta.episode = self._next_episode
            pieces = frame(record_body(episode))
            try:
                if self._log is None:
                    self._log = self._open_log()
                self._log.append(pieces)
            except OSError as error:
                path = self._log_path()
                needed = sum(len(piece) for piece in pieces)
                raise StoreError(
                    f"{describe_os_error(error, 'write the log', path)}. This episode "
                    f"({needed:,} bytes) was not stored in the store {self.directory}; "
                    f"the {self.sealed} episode(s) in sealed segments and "
                    f"{self.logged - self.sealed} in logs stay readable"
                ) from error
            self._next_episode += 1
            self.logged += 1
            if not self._log_steps:
                self._log_since = time.monotonic()
            self._log_steps += episode.meta.length
            self._batch.append(episode)
            if (
                self._log_steps >= self.options.segment_steps
                or time.monotonic() - self._log_since >= self.options.segment_seconds
            ):
                self._rotate()

    def flush(self) -> None:
        """Blocks until every logged episode is in a sealed segment.

        Raises:
            StoreError: The writer has failed.
        """
        marker = _Flush()
        with self._lock:
            if self._log_steps:
                self._rotate()
            self._queue.put(marker)
        marker.done.wait()
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Flushes, stops the thread and removes the (empty) current log.

        Raises:
            StoreError: The writer has failed (the thread is stopped anyway).
        """
        try:
            self.flush()
        finally:
            self._queue.put(None)
            self._thread.join()
            with self._lock:
                if self._log is not None:
                    self._log.close(unlink=not self._log_steps)
                    self._log = None

    def _rotate(self) -> None:
        """Sends the current log and its batch to be sealed; the next episode opens a new log."""
        self._queue.put(self._take_log())

    def _take_log(self) -> _Seal:
        """The current log and its batch, to seal; the next episode opens a new log."""
        assert self._log is not None
        item = _Seal(self._log, self._batch)
        self._log = None
        self._batch = []
        self._log_steps = 0
        self._sequence += 1
        return item

    def _open_log(self) -> LogFile:
        header = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "shard": self.shard,
            "pid": os.getpid(),
            "created": time.time(),
        }
        return LogFile(self._log_path(), header, fsync=self.options.fsync)

    def _log_path(self) -> Path:
        return self.directory / f"{self.shard}-{self._sequence:06d}.log"

    # --- writer thread --------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=self.options.segment_seconds / 2)
            except queue.Empty:
                self._seal_if_old()  # no episode came to do it
                continue
            if isinstance(item, _Seal):
                self._seal(item.log, item.episodes)
            elif isinstance(item, _Flush):
                item.done.set()
            else:
                return

    def _seal_if_old(self) -> None:
        with self._lock:
            if (
                not self._log_steps
                or time.monotonic() - self._log_since < self.options.segment_seconds
            ):
                return
            item = self._take_log()
        self._seal(item.log, item.episodes)

    def _seal(self, log: LogFile, episodes: list[EncodedEpisode]) -> None:
        if self._error is not None:
            log.close()
            return
        path = log.path.with_suffix(".h5")
        try:
            write_segment(
                path,
                episodes,
                compression=self.options.compression,
                compression_opts=self.options.compression_level,
                fsync=self.options.fsync,
                attrs={"shard": self.shard, "pid": os.getpid(), "source": "writer"},
            )
        except Exception as error:  # the thread must survive anything, or flush() would hang
            log.close()
            reason = (
                describe_os_error(error, "write the segment", path)
                if isinstance(error, OSError)
                else f"cannot write the segment {path}: {error!r}"
            )
            self._error = StoreError(
                f"{reason}. Nothing is lost: "
                f"its {len(episodes)} episode(s) stay in {log.path.name} (readable, and "
                f"sealed by the next writer), and the {self.sealed} episode(s) in sealed "
                "segments are untouched; this writer takes no more episodes"
            )
            return
        try:
            log.close(unlink=True)
        except OSError as error:  # sealed, so nothing is lost: the next recovery drops the log
            logger.warning("sealed %s but could not remove its log: %s", path, error)
        self.sealed += len(episodes)
