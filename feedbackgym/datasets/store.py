"""``TrajectoryStore``: episodes in HDF5, written by many processes, read as one store.

A store is a directory. Each process that writes gets its own shard (a
writer thread, its write-ahead log and the sealed segments it produces), so
vector envs in subprocesses never share a file; readers see every shard, live
logs included, as one store. See ``docs/datasets.md`` for the file layout and
how to read it with plain h5py.
"""

from __future__ import annotations

import atexit
import logging
import numbers
import os
import threading
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict, Unpack

import numpy as np

from feedbackgym.datasets._storage import sampling, writer_process
from feedbackgym.datasets._storage.catalog import Catalog, Entry, load_episodes
from feedbackgym.datasets._storage.codec import EncodedEpisode, encode_episode
from feedbackgym.datasets._storage.recovery import recover
from feedbackgym.datasets._storage.writer import ShardWriter, WriterOptions
from feedbackgym.datasets._storage.writer_process import WriterProcess
from feedbackgym.datasets.builder import EpisodeBuilder
from feedbackgym.datasets.episode import Episode, EpisodeMeta
from feedbackgym.datasets.errors import DamagedFile, StoreError, describe_os_error

__all__ = ["COMPRESSIONS", "WRITERS", "EpisodeFilter", "TrajectoryStore"]

logger = logging.getLogger(__name__)

COMPRESSIONS = (None, "lzf", "gzip")
"""Compression filters a store can seal segments with."""
WRITERS = ("thread", "process")
"""Where a store's recorders encode, log and seal episodes (see :class:`TrajectoryStore`)."""

_OPEN: set[TrajectoryStore] = set()
"""Stores with a writer in this process, held until closed: one dropped unclosed still
seals its episodes at exit."""


class EpisodeFilter(TypedDict, total=False):
    """Episode filters; each one given must match.

    Attributes:
        task: Task id(s).
        round: Round(s) (numbers match their text: ``3`` matches ``"3"``).
        since: Episodes that started at or after this (Unix time or datetime).
        until: Episodes that started before this.
        phase: Schedule phase(s) at the episode's reset.
        success: Successful (``True``) or failed (``False``) episodes;
            episodes without ``is_success`` match neither.
    """

    task: str | Iterable[str] | None
    round: str | int | Iterable[str | int] | None
    since: float | datetime | None
    until: float | datetime | None
    phase: str | Iterable[str] | None
    success: bool | None


class TrajectoryStore:
    """A directory of HDF5 trajectory files: write episodes, read and sample them.

    Writing (:meth:`add_episode`, or :class:`~feedbackgym.wrappers.RecordTrajectories`)
    appends each episode to this process's write-ahead log, which makes it
    durable; batches of ``segment_steps`` steps go through a bounded queue (a
    full one blocks) to a writer thread that seals them into HDF5 segments;
    :meth:`flush` seals everything now. A crash (even ``kill -9``) loses at most the
    episode in flight: the next writer to open the store seals what the dead
    one left in its log, and readers read such logs meanwhile. Every process
    writes its own shard; readers see all.

    A file that cannot be read (a truncated segment, a stray file named like
    one) is left out and left in place: the other episodes read as usual, a
    :class:`~feedbackgym.datasets.errors.DamagedFileWarning` names it once, and
    :meth:`damaged` lists it. Writing goes on into new segments.

    Args:
        path: The store directory (created on the first write). For reading
            it may also be a single segment file.
        compression: ``None``, ``"lzf"`` or ``"gzip"`` for sealed segments.
        compression_level: The gzip level (0-9).
        queue_size: Batches waiting to be sealed before :meth:`add_episode` blocks.
        segment_steps: Steps gathered in memory (and in the log) before they
            are sealed into a segment.
        segment_seconds: Seal once the oldest unsealed episode is this old.
        fsync: ``fsync`` logs and segments, to survive power loss too (slower).
        writer: Where episodes from recorders (:class:`~feedbackgym.wrappers.RecordTrajectories`,
            :class:`~feedbackgym.datasets.EpisodeRecorder`) are encoded, logged and
            sealed: ``"thread"``, in the recording process (the log append in the
            step that ends the episode, sealing on a thread), or ``"process"``, in
            a writer process beside it (one per directory and recording process),
            so that a training loop pays only for packing each step and one pipe
            write per episode. With ``"process"``, an episode survives a crash of
            the recording process once the step that ended it returns, a crash of
            the writer costs nothing (a new one is started and sent the episodes
            the dead one had not logged), and a write error is raised by the
            recorder's next call. :meth:`add_episode` always writes in the calling
            process.

    Example:
        >>> import gymnasium as gym, feedbackgym, tempfile
        >>> from feedbackgym.wrappers import RecordTrajectories
        >>> tmp = tempfile.TemporaryDirectory()
        >>> path = tmp.name + "/store"
        >>> env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), path, round=0)
        >>> _ = env.reset(seed=0)
        >>> while not env.step(env.unwrapped.expert_action())[2]:
        ...     pass
        >>> env.close()
        >>> store = TrajectoryStore(path)
        >>> [(e.round, e.success) for e in store.episodes()]
        [('0', True)]
        >>> store.sample(4)["observations"]["alerts"].shape
        (4, 8)
        >>> tmp.cleanup()

    Change logs:
     * v0.1.0 - Initially added
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        compression: str | None = None,
        compression_level: int | None = None,
        queue_size: int = 2,
        segment_steps: int = 50_000,
        segment_seconds: float = 300.0,
        fsync: bool = False,
        writer: str = "thread",
    ) -> None:
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
        if queue_size < 1 or segment_steps < 1 or segment_seconds <= 0:
            raise ValueError("queue_size, segment_steps and segment_seconds must be positive")
        if writer not in WRITERS:
            raise ValueError(f"writer must be one of {WRITERS}, got {writer!r}")
        self.path = Path(path)
        self.writer = writer
        self.options = WriterOptions(
            compression=compression,
            compression_level=compression_level,
            queue_size=queue_size,
            segment_steps=segment_steps,
            segment_seconds=segment_seconds,
            fsync=fsync,
        )
        self._writer: ShardWriter | None = None
        self._writer_pid = 0
        self._process: WriterProcess | None = None
        self._process_pid = 0
        self._lock = threading.Lock()
        self._catalog = Catalog(self.path)
        self._rng = np.random.default_rng()

    def __repr__(self) -> str:
        return f"TrajectoryStore({str(self.path)!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "options": self.options, "writer": self.writer}

    def __setstate__(self, state: dict[str, Any]) -> None:
        options: WriterOptions = state["options"]
        self.__init__(  # type: ignore[misc]
            state["path"],
            compression=options.compression,
            compression_level=options.compression_level,
            queue_size=options.queue_size,
            segment_steps=options.segment_steps,
            segment_seconds=options.segment_seconds,
            fsync=options.fsync,
            writer=state.get("writer", "thread"),
        )

    def __enter__(self) -> TrajectoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- writing --------------------------------------------------------------------------

    @property
    def shard(self) -> str | None:
        """This process's shard name, once it has written."""
        writer = self._writer
        return writer.shard if writer is not None and self._writer_pid == os.getpid() else None

    def add_episode(self, episode: Episode) -> None:
        """Writes an episode to the log (durable on return) and queues it for sealing.

        Stamps ``episode.meta`` with this process's shard and the episode's
        number. Blocks while the writer queue is full.

        Raises:
            StoreError: The store cannot be written (the message says what is kept).
            ValueError: The episode's columns differ from earlier ones of its
                task and round; its round group would nest with another's (task
                ``"a/b"`` round ``"c"`` inside task ``"a"`` round ``"b"``); or a
                column holds objects other than text.
        """
        self._get_writer().submit(encode_episode(episode))

    def add_encoded(self, episode: EncodedEpisode) -> None:
        """Like :meth:`add_episode`, for an episode already in record bytes.

        What :class:`~feedbackgym.wrappers.RecordTrajectories` hands over
        (:meth:`~feedbackgym.datasets.builder.EpisodeBuilder.encode`): the
        steps go from the env into the log's bytes without becoming columns.

        Raises:
            StoreError: As for :meth:`add_episode`.
            ValueError: As for :meth:`add_episode`.
        """
        self._get_writer().submit(episode)

    def _add_builder(self, builder: EpisodeBuilder, finish: dict[str, Any]) -> None:
        """Writes a recorder's finished episode (``builder.encode(**finish)``), by :attr:`writer`.

        Raises:
            StoreError: As for :meth:`add_episode` (with a writer process: for this
                episode or, reported late, an earlier one).
            ValueError: As for :meth:`add_episode` (likewise).
        """
        if self.writer == "process":
            self._get_process().submit(builder, finish)
        else:
            self.add_encoded(builder.encode(**finish))

    def flush(self) -> None:
        """Blocks until every written episode is in a sealed HDF5 segment.

        Raises:
            StoreError: Writing failed.
        """
        process = self._own_process()
        if process is not None:
            process.flush()
        writer = self._own_writer()
        if writer is not None:
            writer.flush()

    def close(self) -> None:
        """Flushes and stops this process's writer (a later write starts a new one).

        Raises:
            StoreError: Writing failed (the writer is stopped anyway).
        """
        with self._lock:
            writer = self._own_writer()
            process = self._own_process()
            self._writer = self._process = None
            _OPEN.discard(self)
        try:
            if process is not None:
                writer_process.release(process)
        finally:
            if writer is not None:
                writer.close()

    def recover(self) -> int:
        """Seals the logs that crashed writers left; returns how many episodes it sealed.

        Writers do this when they start; call it to make a crashed run's last
        episodes readable with plain h5py.

        Raises:
            StoreError: The store cannot be written.
        """
        if not self.path.is_dir():
            return 0
        try:
            return recover(self.path, self.options)
        except OSError as error:
            raise StoreError(describe_os_error(error, "recover", self.path)) from error

    def _own_writer(self) -> ShardWriter | None:
        return self._writer if self._writer_pid == os.getpid() else None

    def _own_process(self) -> WriterProcess | None:
        return self._process if self._process_pid == os.getpid() else None

    def _get_process(self) -> WriterProcess:
        with self._lock:
            process = self._own_process()
            if process is None:
                process = self._process = writer_process.acquire(self.path, self.options)
                self._process_pid = os.getpid()
                _OPEN.add(self)
            return process

    def _get_writer(self) -> ShardWriter:
        with self._lock:
            writer = self._own_writer()
            if writer is None:
                if self.path.is_file():
                    raise StoreError(f"{self.path} is a file: a store to write to is a directory")
                self.recover()
                writer = self._writer = ShardWriter(self.path, self.options)
                self._writer_pid = os.getpid()
                _OPEN.add(self)
            return writer

    # --- reading --------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._catalog.entries())

    def damaged(self) -> list[DamagedFile]:
        """The files of the store that cannot be read, by path (the directory is re-scanned).

        Their episodes are left out of everything the store reads; the files
        stay where they are, untouched, for you to restore or remove.

        Example:
            >>> import tempfile
            >>> tmp = tempfile.TemporaryDirectory()
            >>> _ = (Path(tmp.name) / "stray.h5").write_text("not HDF5")
            >>> store = TrajectoryStore(tmp.name)
            >>> import warnings
            >>> with warnings.catch_warnings(action="ignore"):
            ...     [(d.path.name, d.reason) for d in store.damaged()]
            [('stray.h5', 'not an HDF5 file')]
            >>> len(store)
            0
            >>> tmp.cleanup()
        """
        self._catalog.entries()
        return self._catalog.damaged

    def episodes(self, **filters: Unpack[EpisodeFilter]) -> list[EpisodeMeta]:
        """Metadata of the matching episodes, oldest first (no step data is read).

        Args:
            **filters: See :class:`EpisodeFilter`; all given ones must match.
        """
        return [entry.meta for entry in self._matching(filters)]

    def iter_episodes(self, **filters: Unpack[EpisodeFilter]) -> Iterator[Episode]:
        """Yields the matching episodes with all their data.

        Segments are read one round group at a time, so memory stays bounded.
        A segment whose data turns out unreadable (a checksum fails) is skipped
        like a damaged file: a :class:`~feedbackgym.datasets.errors.DamagedFileWarning`
        names it, :meth:`damaged` lists it and its episodes are left out from then on.

        Args:
            **filters: See :class:`EpisodeFilter`.
        """
        return load_episodes(self._catalog, self._matching(filters), skip_damaged=True)

    def sample(
        self,
        batch_size: int,
        recent_fraction: float = 0.7,
        min_old_fraction: float = 0.1,
        *,
        as_torch: bool = False,
        device: str | None = None,
        seed: int | None = None,
        **filters: Unpack[EpisodeFilter],
    ) -> dict[str, Any]:
        """Samples transitions, favouring each task's latest round but keeping old ones.

        ``recent_fraction`` of the batch comes from the latest round of each
        task (the highest round number, or the round that ended last when
        rounds are not numbers), the rest from older rounds, but never less
        than ``min_old_fraction`` from old rounds when there are any. Within
        each part transitions are uniform over steps. The sampled rounds' step
        columns stay in memory for the next call, as in a replay buffer.

        Args:
            batch_size: Transitions per batch.
            recent_fraction: Share of the batch from the latest round.
            min_old_fraction: Floor of the share from older rounds.
            as_torch: Return torch tensors (text stays a list of ``str``).
            device: Torch device for the tensors.
            seed: Seeds this draw; ``None`` continues the store's generator.
            **filters: See :class:`EpisodeFilter`.

        Returns:
            ``observations`` and ``next_observations`` (an array, or a dict of
            arrays for Dict spaces), ``actions``, ``rewards``, ``env_rewards``,
            ``shaping_rewards``, ``terminations``, ``truncations`` (one row per
            transition), and ``recent`` (which rows came from the latest round).

        Raises:
            ValueError: No episode matches, or a bad size or fraction.
            DamagedFileError: A segment's data turns out unreadable (a checksum
                fails); it is left out from then on, so the next call draws without it.
        """
        matched = self._matching(filters)
        rng = self._rng if seed is None else np.random.default_rng(seed)
        batch = sampling.sample_batch(
            self._catalog, matched, batch_size, recent_fraction, min_old_fraction, rng
        )
        return sampling.to_torch(batch, device) if as_torch else batch

    def fill_replay_buffer(
        self,
        buffer: Any,
        *,
        reward: str = "rewards",
        **filters: Unpack[EpisodeFilter],
    ) -> int:
        """Adds the matching episodes' transitions to an SB3 (Dict)ReplayBuffer.

        Args:
            buffer: A ``stable_baselines3`` ``ReplayBuffer`` or ``DictReplayBuffer``
                (only the observation keys in its space are used).
            reward: ``"rewards"`` (as trained on), ``"env_rewards"`` or
                ``"shaping_rewards"``.
            **filters: See :class:`EpisodeFilter`.

        Returns:
            How many transitions were added (a multiple of ``buffer.n_envs``).
        """
        if reward not in ("rewards", "env_rewards", "shaping_rewards"):
            raise ValueError(f"reward must name a reward column, got {reward!r}")
        return sampling.fill_replay_buffer(buffer, self.iter_episodes(**filters), reward)

    def _matching(self, filters: EpisodeFilter) -> list[Entry]:
        unknown = set(filters) - set(EpisodeFilter.__annotations__)
        if unknown:
            raise TypeError(f"unknown episode filter(s) {sorted(unknown)}")
        tasks = _names(filters.get("task"))
        rounds = _names(filters.get("round"))
        phases = _names(filters.get("phase"))
        success = filters.get("success")
        start = _timestamp(filters.get("since"), float("-inf"))
        stop = _timestamp(filters.get("until"), float("inf"))
        return [
            entry
            for entry in self._catalog.entries()
            if (tasks is None or entry.meta.task_id in tasks)
            and (rounds is None or entry.meta.round in rounds)
            and (phases is None or entry.meta.phase in phases)
            and (success is None or entry.meta.success is success)
            and start <= entry.meta.start_time < stop
        ]


def _names(value: Any) -> set[str] | None:
    if value is None:
        return None
    if isinstance(value, str | numbers.Integral):  # numpy integers too
        return {str(value)}
    return {str(v) for v in value}


def _timestamp(value: float | datetime | None, default: float) -> float:
    if value is None:
        return default
    return value.timestamp() if isinstance(value, datetime) else float(value)


@atexit.register
def _close_open_stores() -> None:
    for store in list(_OPEN):
        try:
            store.close()
        except StoreError as error:
            logger.warning("trajectory store not closed cleanly: %s", error)
