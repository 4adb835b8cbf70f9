"""A writer process: encodes, logs and seals the episodes one recording process sends it.

Started by :class:`~.writer_process.WriterProcess` as
``python -m feedbackgym.datasets._storage.writer_main``: requests come on stdin and
replies go on stdout (see :mod:`.channel`). The first request opens the
store; then each episode (an :class:`~feedbackgym.datasets.builder.EpisodeBuilder` as it stood at
the episode's end, its packer sent once apart) is encoded and handed to a
:class:`~.writer.ShardWriter`, which appends it to the shard's write-ahead log
and seals segments on its own thread, and the recorder is told (an
acknowledgement: from then on the episode survives this process's death).
At the end of stdin, which is also what the recorder's death looks like
(``kill -9`` included), every episode still in the pipe is logged, the shard
sealed, and the process exits. ``SIGINT`` is ignored, so a Ctrl-C in the
terminal stops the recorder, not the writer that drains after it. The process
runs at the idle scheduling priority (see :func:`set_idle`).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from feedbackgym.datasets._storage.channel import (
    ACK,
    DONE,
    ERROR,
    READY,
    RequestReader,
    reply,
    write_all,
)
from feedbackgym.datasets._storage.recovery import recover
from feedbackgym.datasets._storage.writer import ShardWriter, WriterOptions
from feedbackgym.datasets.errors import StoreError

__all__ = ["serve", "set_idle"]

logger = logging.getLogger(__name__)

BATCH_PAUSE_S = 0.02
"""Seconds the writer waits after serving what was in the pipe before reading again
(see :class:`~.channel.RequestReader`): a recorder at 300 episodes a second then wakes it
about 50 times a second instead of 300."""


class _Replies:
    """Writes replies; once the recorder is gone, drops them (the episodes still get logged)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.gone = False

    def send(self, kind: int, seq: int, payload: Any = None) -> None:
        if self.gone:
            return
        try:
            write_all(self.fd, reply(kind, seq, payload))
        except OSError:
            self.gone = True


def serve(requests: RequestReader, replies: _Replies) -> None:
    """Answers requests until a close request or the end of ``requests``."""
    first = requests.next()
    if first is None:
        return
    _, directory, options = first
    writer, failure = _open(Path(directory), options)
    replies.send(READY, 0, writer.shard if writer is not None else "")
    packers: dict[int, Any] = {}
    while True:
        message = requests.next()
        if message is None or message[0] == "close":
            set_idle(False)  # the recorder waits, or is gone: drain at normal priority
            error = _close(writer)
            if message is not None:
                replies.send(DONE, message[1], error)
            return
        kind, seq = message[0], message[1]
        if kind == "packer":
            packers[seq] = message[2]
        elif kind == "episode":
            _, _, key, builder, finish = message
            try:
                if writer is None:
                    raise StoreError(f"{failure} (this episode was not stored)")
                builder.packer = packers[key]
                writer.submit(builder.encode(**finish))
            except Exception as error:  # reported to the recorder, which raises it
                replies.send(ERROR, seq, (type(error).__name__, str(error)))
            else:
                replies.send(ACK, seq)
        elif kind == "flush":
            set_idle(False)  # the recorder waits on it
            failed = None
            try:
                if writer is not None:
                    writer.flush()
            except StoreError as error:
                failed = ("StoreError", str(error))
            finally:
                set_idle(True)  # before the answer, on which the recorder goes on
            replies.send(DONE, seq, failed)
            requests.answered()


def _open(directory: Path, options: WriterOptions) -> tuple[ShardWriter | None, str]:
    try:
        if directory.is_file():
            raise StoreError(f"{directory} is a file: a store to write to is a directory")
        if directory.is_dir():
            recover(directory, options)
        return ShardWriter(directory, options), ""
    except (OSError, StoreError) as error:
        return None, str(error)


def _close(writer: ShardWriter | None) -> tuple[str, str] | None:
    if writer is None:
        return None
    try:
        writer.close()
    except StoreError as error:
        return ("StoreError", str(error))
    return None


def set_idle(idle: bool) -> None:
    """Runs this process's threads at the idle priority (``SCHED_IDLE``) or the normal one.

    Best effort. Idle, the writer gets a core only while no other process wants it: a
    trainer's update runs on every core, and a writer that took one of them
    for a scheduler slice would hold the whole update up; the recorder's
    episodes wait in the pipe meanwhile (a full pipe makes the recorder wait,
    so nothing is dropped). Where the recorder waits on the writer (a flush, a
    close, its end) the writer runs at the normal priority if it may: going
    back from idle needs the privilege to raise one's priority (``RLIMIT_NICE``).
    Elsewhere than Linux the writer runs at nice 19 throughout.
    """
    if not hasattr(os, "SCHED_IDLE"):
        if idle:
            os.nice(19)
        return
    policy = os.SCHED_IDLE if idle else os.SCHED_OTHER
    try:
        threads = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]
    for thread in threads:  # a policy is a thread's own: the seal thread needs it too
        try:
            os.sched_setscheduler(thread, policy, os.sched_param(0))
        except OSError:
            pass  # not permitted, or the thread has ended


def main() -> None:
    """Serves the recorder on stdin/stdout; stray prints go to stderr."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_idle(True)
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    logging.basicConfig(level=logging.WARNING)
    serve(RequestReader(0, BATCH_PAUSE_S), _Replies(reply_fd))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
