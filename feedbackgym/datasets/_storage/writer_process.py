"""The recorder's side of a writer process: episodes leave the stepping process as they end.

A recording process (a trainer, an env worker) hands each finished episode's
:class:`~feedbackgym.datasets.builder.EpisodeBuilder` (its packed rows and kept values, pickled,
the packer sent once) down a pipe to a child process, which encodes it, logs
it and seals segments (see :mod:`.writer_main`). What stays in the stepping
process is the per-step packing and one pickle and ``write`` per episode;
the encoding, the JSON of the feedback payloads, the log record and the HDF5
seal run beside it.

Crash guarantees:

* An episode is in the kernel's pipe when the step that ended it returns,
  so ``kill -9`` of the recording process loses at most the episodes in
  flight: the writer logs whatever is in the pipe, seals and exits.
* An episode the writer acknowledged is in its shard's log. Until then the
  recorder keeps its bytes; if the writer dies (``kill -9`` included), a new
  one is started and every unacknowledged episode sent again, so nothing is
  lost (an episode logged just before the kill, its acknowledgement not yet
  read, is then stored twice, in two shards).
* A write error (disk full) is reported back and raised by the recorder's
  next call (:meth:`WriterProcess.submit`, :meth:`~WriterProcess.flush`,
  :meth:`~WriterProcess.close`), naming what was not stored.

One writer serves every store of one directory in one process
(:func:`acquire`); a forked child does not inherit it.
"""

from __future__ import annotations

import collections
import fcntl
import os
import pickle
import select
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from feedbackgym.datasets._storage.channel import (
    ACK,
    DONE,
    ERROR,
    READY,
    read_reply,
    request,
    write_all,
)
from feedbackgym.datasets._storage.writer import WriterOptions
from feedbackgym.datasets.errors import StoreError

__all__ = ["WriterProcess", "acquire", "release"]

_PIPE_BYTES = 1 << 20
"""The request pipe's capacity, if the kernel allows (episodes in flight before a send blocks)."""
_RESTARTS = 3
"""Writers started again in a row, none of them getting ready, before giving up."""
_F_SETPIPE_SZ = 1031


class WriterProcess:
    """A writer process for one store directory, and the episodes it has not acknowledged.

    Args:
        directory: The store directory.
        options: How the writer writes (segment size, compression, fsync).

    Example:
        >>> import tempfile
        >>> from feedbackgym.datasets.builder import EpisodeBuilder
        >>> tmp = tempfile.TemporaryDirectory()
        >>> writer = WriterProcess(Path(tmp.name), WriterOptions())
        >>> episode = EpisodeBuilder(0, {}, task_id="t", round="0", seed=1, start_time=0.0)
        >>> episode.add(1, 1, 0.5, True, False, {})
        >>> writer.submit(episode, {"end_time": 1.0})
        >>> writer.close()
        >>> sorted(p.suffix for p in Path(tmp.name).iterdir())
        ['.h5']
        >>> tmp.cleanup()
    """

    def __init__(self, directory: Path, options: WriterOptions) -> None:
        self.directory = directory
        self.options = options
        self._lock = threading.RLock()
        self._seq = 0
        self._unacked: collections.OrderedDict[int, bytes] = collections.OrderedDict()
        self._packers: dict[int, Any] = {}
        self._errors: list[tuple[str, str]] = []
        self._restarts = 0
        self._unflushed = False
        """Whether an episode was sent since the last flush (else a flush has nothing to do)."""
        self.ready = False
        """Whether the current writer process has opened the store (it says so once)."""
        self._process: subprocess.Popen[bytes] | None = None
        self._start()

    @property
    def pid(self) -> int:
        """The writer process's id (a new one after a restart)."""
        assert self._process is not None
        return self._process.pid

    def submit(self, builder: Any, finish: dict[str, Any]) -> None:
        """Sends a finished episode (``builder.encode(**finish)`` runs in the writer).

        Raises:
            StoreError: An earlier episode could not be stored (the message says
                why and what was kept), or the writer cannot be started.
            ValueError: This episode cannot be pickled, or an earlier one could not
                be encoded or has other columns than those before it.
        """
        with self._lock:
            packer = builder.packer
            key = id(packer)
            if key not in self._packers:
                self._packers[key] = packer
                self._send(request("packer", key, packer))
            try:
                frame = request("episode", self._seq + 1, key, builder, finish)
            except (pickle.PicklingError, TypeError, AttributeError) as error:
                raise ValueError(
                    f"this episode cannot be sent to the writer process ({error}): only "
                    "numbers, text and plain data (the feedback payloads) can be recorded"
                ) from error
            self._seq += 1
            self._unacked[self._seq] = frame
            self._unflushed = True
            self._send(frame)
            self._read_replies(wait_for=None)
            self._raise_errors()

    def flush(self) -> None:
        """Blocks until every episode sent is in a sealed segment.

        With no episode sent since the last flush there is nothing to seal, and
        no round trip to the writer (the envs of a trainer that share a store
        each flush it as they close).

        Raises:
            StoreError: As for :meth:`submit`, or sealing failed.
            ValueError: As for :meth:`submit`.
        """
        with self._lock:
            if not self._unflushed:
                self._read_replies(wait_for=None)
                self._raise_errors()
                return
            self._call("flush")
            self._unflushed = False

    def close(self) -> None:
        """Seals everything and stops the writer process.

        Raises:
            StoreError: As for :meth:`flush` (the process is stopped anyway).
            ValueError: As for :meth:`submit`.
        """
        with self._lock:
            try:
                self._call("close")
            finally:
                self._stop()

    def forget(self) -> None:
        """Drops the pipes without a word (in a forked child: the parent's writer is not ours)."""
        if self._process is not None:
            _close_pipes(self._process)
            self._process = None

    # --- internals ------------------------------------------------------------------------

    def _call(self, name: str) -> None:
        self._seq += 1
        seq = self._seq
        while True:  # if the writer dies meanwhile, it is started again: ask again
            if self._send(request(name, seq)) and self._read_replies(wait_for=seq):
                break
        self._raise_errors()

    def _start(self) -> None:
        process = subprocess.Popen(
            [sys.executable, "-m", "feedbackgym.datasets._storage.writer_main"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        assert process.stdin is not None
        try:
            fcntl.fcntl(process.stdin.fileno(), _F_SETPIPE_SZ, _PIPE_BYTES)
        except OSError:
            pass  # the default 64 KiB: sends block sooner
        self._process = process
        self.ready = False
        write_all(process.stdin.fileno(), request("open", os.fspath(self.directory), self.options))

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            _close_pipes(process)
            process.wait()

    def _send(self, frame: bytes) -> bool:
        """Sends a request; ``False`` if the writer had died (a new one has the episodes)."""
        assert self._process is not None and self._process.stdin is not None
        try:
            write_all(self._process.stdin.fileno(), frame)
        except BrokenPipeError:
            self._restart()  # sends the unacknowledged episodes again
            return False
        return True

    def _restart(self) -> None:
        """Starts a new writer and sends it what the dead one had not acknowledged."""
        self._restarts += 1
        if self._restarts > _RESTARTS:
            raise StoreError(
                f"the writer process for {self.directory} died {_RESTARTS} times in a row "
                "before it was ready; "
                f"{len(self._unacked)} episode(s) it had not acknowledged are not stored"
            )
        self._read_last_replies()
        self._stop()
        self._start()
        assert self._process is not None and self._process.stdin is not None
        fd = self._process.stdin.fileno()
        try:
            for key, packer in self._packers.items():
                write_all(fd, request("packer", key, packer))
            for frame in self._unacked.values():
                write_all(fd, frame)
        except BrokenPipeError:
            self._restart()

    def _read_last_replies(self) -> None:
        """Takes in what a dead writer said before it died (its acknowledgements count)."""
        process = self._process
        if process is None or process.stdout is None:
            return
        try:
            os.set_blocking(process.stdout.fileno(), False)
            while (message := read_reply(process.stdout)) is not None:
                self._take(*message)
        except (OSError, ValueError):
            pass  # nothing more to read (the pipe is empty, or a reply torn off)

    def _take(self, kind: int, seq: int, payload: Any) -> None:
        """Handles an acknowledgement or an error report."""
        if kind == ACK:
            self._unacked.pop(seq, None)
        elif kind == ERROR:
            self._unacked.pop(seq, None)
            self._errors.append(payload)

    def _read_replies(self, wait_for: int | None) -> bool:
        """Handles the replies that came; with ``wait_for``, until that request is done.

        Returns:
            ``False`` if the writer died while we waited (it was started again).
        """
        while True:
            assert self._process is not None and self._process.stdout is not None
            stdout = self._process.stdout
            if wait_for is None and not select.select([stdout], [], [], 0)[0]:
                return True
            message = read_reply(stdout)
            if message is None:  # the writer is gone
                self._restart()
                if wait_for is None:
                    return True
                return False
            kind, seq, payload = message
            if kind in (ACK, ERROR):
                self._take(kind, seq, payload)
            elif kind == DONE and seq == wait_for:
                if payload is not None:
                    self._errors.append(payload)
                return True
            elif kind == READY:
                self.ready = True
                self._restarts = 0

    def _raise_errors(self) -> None:
        if self._errors:
            name, message = self._errors.pop(0)
            raise ValueError(message) if name == "ValueError" else StoreError(message)


def _close_pipes(process: subprocess.Popen[bytes]) -> None:
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()


_WRITERS: dict[tuple[int, str, WriterOptions], tuple[WriterProcess, int]] = {}
_REGISTRY_LOCK = threading.Lock()


def acquire(directory: Path, options: WriterOptions) -> WriterProcess:
    """The writer process of ``directory`` in this process (started on first use)."""
    key = (os.getpid(), os.path.realpath(directory), options)
    with _REGISTRY_LOCK:
        writer, users = _WRITERS.get(key, (None, 0))
        if writer is None:
            writer = WriterProcess(directory, options)
        _WRITERS[key] = (writer, users + 1)
        return writer


def release(writer: WriterProcess) -> None:
    """One store is done with ``writer``: flushes it, and closes it after its last store.

    Raises:
        StoreError: As for :meth:`WriterProcess.close`.
        ValueError: As for :meth:`WriterProcess.close`.
    """
    with _REGISTRY_LOCK:
        key = next((k for k, (w, _) in _WRITERS.items() if w is writer), None)
        if key is None:
            return
        users = _WRITERS[key][1] - 1
        if users:
            _WRITERS[key] = (writer, users)
        else:
            del _WRITERS[key]
    if users:
        writer.flush()
    else:
        writer.close()


def _forget_in_child() -> None:
    for writer, _ in _WRITERS.values():
        writer.forget()
    _WRITERS.clear()


os.register_at_fork(after_in_child=_forget_in_child)
