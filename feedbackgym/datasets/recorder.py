"""``EpisodeRecorder``: records episodes step by step into a trajectory store.

What a recorder needs from the store, for any loop that plays episodes (the
:class:`~feedbackgym.wrappers.RecordTrajectories` wrapper, a trainer's own
loop): the round episodes are filed under (checked as a group name), an
:class:`~.builder.EpisodeBuilder` per episode that reuses the previous
episode's observation layout, and each finished episode handed to the store.
"""

from __future__ import annotations

import time
from typing import Any

from feedbackgym.datasets._storage.packing import Packer
from feedbackgym.datasets._storage.segment import group_path
from feedbackgym.datasets.builder import EpisodeBuilder
from feedbackgym.datasets.store import TrajectoryStore

__all__ = ["EpisodeRecorder"]


class EpisodeRecorder:
    """Records one episode at a time into ``store``.

    Args:
        store: The store the episodes go to (the recorder neither flushes nor closes it).
        task_id: The task the episodes belong to.
        round: The round (or split); change it with :meth:`set_round`.

    Raises:
        ValueError: As for :meth:`set_round`.

    Example:
        >>> import tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> store = TrajectoryStore(tmp.name)
        >>> recorder = EpisodeRecorder(store, "corridor", round=1)
        >>> episode = recorder.start(0, {}, seed=3)
        >>> episode.add(1, 1, 0.5, True, False, {"is_success": True})
        >>> recorder.finish()
        >>> [(e.meta.round, e.meta.seed, e.meta.success) for e in store.iter_episodes()]
        [('1', 3, True)]
        >>> store.close()
        >>> tmp.cleanup()
    """

    def __init__(
        self, store: TrajectoryStore, task_id: str, round: int | str | None = None
    ) -> None:
        self.store = store
        self.task_id = task_id
        self.set_round(round)
        self._builder: EpisodeBuilder | None = None
        self._packer: Packer | None = None

    @property
    def episode(self) -> EpisodeBuilder | None:
        """The running episode, to add steps to (:meth:`.EpisodeBuilder.add`), or ``None``."""
        return self._builder

    def set_round(self, round: int | str | None) -> None:
        """Sets the round of the episodes started from now on; ``None`` means round 0.

        Raises:
            ValueError: The round contains ``/`` or is empty (it names an HDF5 group).
        """
        name = "0" if round is None else str(round)
        group_path(self.task_id, name)
        self.round = name

    def start(self, obs: Any, info: dict[str, Any], *, seed: int | None) -> EpisodeBuilder:
        """Starts an episode at its reset observation and info (a running one is dropped).

        Returns:
            The episode (also :attr:`episode` until it is finished or discarded).
        """
        builder = EpisodeBuilder(
            obs,
            info,
            task_id=self.task_id,
            round=self.round,
            seed=seed,
            start_time=time.time(),
            packer=self._packer,
        )
        self._builder, self._packer = builder, builder.packer
        return builder

    def finish(
        self,
        *,
        switch_time: float | None = None,
        config_version: int | None = None,
        config_changes: tuple[dict[str, Any], ...] = (),
        env_spec: str = "",
        task_key: str = "",
    ) -> None:
        """Ends the running episode and adds it to the store.

        Arguments as for :meth:`.EpisodeBuilder.encode`; the end time is now.

        Raises:
            RuntimeError: No episode is running.
            ValueError: As for :meth:`.EpisodeBuilder.encode`.
            StoreError: The store could not write the episode (with a writer
                process, see :class:`TrajectoryStore`: an earlier one).
        """
        builder = self._builder
        if builder is None:
            raise RuntimeError("no episode is running: call start() first")
        self._builder = None
        finish = {
            "end_time": time.time(),
            "switch_time": switch_time,
            "config_version": config_version,
            "config_changes": config_changes,
            "env_spec": env_spec,
            "task_key": task_key,
        }
        self.store._add_builder(builder, finish)

    def discard(self) -> None:
        """Drops the running episode, if any, unrecorded."""
        self._builder = None
