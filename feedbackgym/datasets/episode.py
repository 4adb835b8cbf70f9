"""One recorded episode as named columns, plus its metadata.

An :class:`Episode` holds its data as flat, ``/``-separated column names that
are also the dataset paths under a round group on disk (see :mod:`.columns`
for the names and row counts).

The columns in :data:`~.columns.NEUTRAL` follow from the others when the env
gives no such data (no shaping, no feedback wrappers, no subgoals): an episode
in memory or in a log may leave them out, and :meth:`Episode.complete` (which
every sealed segment goes through) fills them in, so files always hold them.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntFlag
from typing import Any

import numpy as np

from feedbackgym.datasets.columns import NEUTRAL, Schema, nest_columns, row_count, with_neutral

__all__ = [
    "Episode",
    "EpisodeMeta",
    "FeedbackEvent",
    "FeedbackType",
    "concat_columns",
]


class FeedbackType(IntFlag):
    """What feedback came with an observation (a bit set; ``GUIDE | REVIEW`` is 3)."""

    NONE = 0
    GUIDE = 1
    REVIEW = 2


@dataclass(frozen=True)
class FeedbackEvent:
    """A hint or review that came with an observation.

    Attributes:
        row: The observation row (0 is the reset observation, ``t + 1`` the
            observation after step ``t``).
        type: :attr:`FeedbackType.GUIDE` or :attr:`FeedbackType.REVIEW`.
        payload: The hint or review as JSON-safe data (``Hint.to_dict()``,
            ``Review.to_dict()``).
    """

    row: int
    type: FeedbackType
    payload: dict[str, Any]


@dataclass
class EpisodeMeta:
    """Everything known about an episode besides its per-step data.

    Attributes:
        task_id: The task (by default the env id).
        round: The training round (or split, for expert datasets), as text.
        start_time: Wall-clock time of the reset (Unix seconds).
        end_time: Wall-clock time of the last step.
        length: Number of steps.
        seed: The reset seed, or ``None``.
        success: ``info["is_success"]`` at the end, or ``None`` when absent.
        outcome: ``info["outcome"]`` at the end, or ``""``.
        episode_return: Sum of the rewards.
        phase: The schedule phase at the reset (``""`` without a schedule).
        switch_time: When the recorded phase first left ``"guide"``, or ``None``.
        config_version: The feedback config version, or ``None`` without a
            config file.
        config_changes: The config edits seen so far (``version``, ``time``,
            ``applied``, ``reason``).
        env_spec: The env spec as JSON (``""`` when the env has none).
        subgoal_ids: The subgoal ids, in the bit order of ``subgoals/done``.
        task_key: The task's structure (OpsIncident: the incident key, fault
            included), read on the evaluator's side at the episode's end
            (:func:`feedbackgym.protocol.task_key`); ``""`` when the env has none.
            The agent never saw it: count train/test overlap with it.
        shard: The writer that stored it (stamped by the store).
        episode: The episode number within its shard (stamped by the store).
    """

    task_id: str
    round: str
    start_time: float
    end_time: float
    length: int
    seed: int | None = None
    success: bool | None = None
    outcome: str = ""
    episode_return: float = 0.0
    phase: str = ""
    switch_time: float | None = None
    config_version: int | None = None
    config_changes: tuple[dict[str, Any], ...] = ()
    env_spec: str = ""
    subgoal_ids: tuple[str, ...] = ()
    task_key: str = ""
    shard: str = ""
    episode: int = -1

    @property
    def timestamp(self) -> str:
        """The start time as ``YYYYmmddTHHMMSS.ffffffZ`` (UTC)."""
        whole = math.floor(self.start_time)
        micros = min(999_999, round((self.start_time - whole) * 1e6))
        return f"{_utc_second(whole)}.{micros:06d}Z"

    @property
    def name(self) -> str:
        """The episode's address under its round: ``{timestamp}-{episode}``."""
        return f"{self.timestamp}-{self.episode:06d}"

    @property
    def wall_time(self) -> float:
        """Seconds from the reset to the last step."""
        return self.end_time - self.start_time

    @property
    def key(self) -> tuple[str, int]:
        """``(shard, episode)``: unique within a store."""
        return (self.shard, self.episode)

    def to_dict(self) -> dict[str, Any]:
        """Returns the metadata as JSON-safe data (tuples for lists)."""
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EpisodeMeta:
        """Rebuilds the metadata from :meth:`to_dict` output."""
        return cls(
            **{
                **data,
                "config_changes": tuple(data.get("config_changes", ())),
                "subgoal_ids": tuple(data.get("subgoal_ids", ())),
            }
        )


@functools.lru_cache(maxsize=64)
def _utc_second(whole: int) -> str:
    """``YYYYmmddTHHMMSS`` (UTC) of a whole Unix second: episodes of one second share it."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(whole))


@dataclass
class Episode:
    """A recorded episode: metadata and named columns (see the module docstring).

    Attributes:
        meta: The metadata.
        columns: Column name -> array.
    """

    meta: EpisodeMeta
    columns: dict[str, np.ndarray] = field(repr=False)

    @functools.cached_property
    def schema(self) -> Schema:
        """The columns' names, dtypes and row shapes (computed once: columns do not change)."""
        return tuple((n, c.dtype, c.shape[1:]) for n, c in self.columns.items())

    def rows(self, name: str) -> int:
        """How many rows column ``name`` has in this episode."""
        return row_count(name, self.meta.length, len(self.columns.get("events/row", ())))

    def column(self, name: str) -> np.ndarray:
        """Column ``name``, or its neutral value (see :data:`NEUTRAL`) when left out.

        Raises:
            KeyError: The column is neither present nor neutral.
        """
        column = self.columns.get(name)
        if column is not None:
            return column
        if name == "env_rewards":
            return self.columns["rewards"]
        dtype, fill = NEUTRAL[name]
        column = np.empty(self.rows(name), dtype)
        column[:] = fill
        return column

    def complete(self) -> Episode:
        """This episode with every neutral column present."""
        if all(name in self.columns for name in NEUTRAL):
            return self
        return Episode(self.meta, {**self.columns, **{n: self.column(n) for n in NEUTRAL}})

    @property
    def observations(self) -> Any:
        """Observations, ``length + 1`` rows: an array, or a dict/tuple of them."""
        return nest_columns(self.columns, "observations")

    @property
    def actions(self) -> Any:
        """Actions, ``length`` rows."""
        return nest_columns(self.columns, "actions")

    @property
    def rewards(self) -> np.ndarray:
        """Rewards as the trainer saw them (env reward plus shaping)."""
        return self.columns["rewards"]

    @property
    def env_rewards(self) -> np.ndarray:
        """The env's own rewards."""
        return self.column("env_rewards")

    @property
    def shaping_rewards(self) -> np.ndarray:
        """The shaping terms (0 without shaping)."""
        return self.column("shaping_rewards")

    @property
    def terminations(self) -> np.ndarray:
        """Per-step ``terminated`` flags."""
        return self.columns["terminations"]

    @property
    def truncations(self) -> np.ndarray:
        """Per-step ``truncated`` flags."""
        return self.columns["truncations"]

    @property
    def feedback_types(self) -> np.ndarray:
        """The :class:`FeedbackType` bits with each observation."""
        return self.column("feedback/type")

    @property
    def phases(self) -> list[str]:
        """The schedule phase with each observation (``""`` without a schedule)."""
        return [p.decode() for p in self.column("schedule/phase")]

    @property
    def subgoals(self) -> list[dict[str, bool]]:
        """Subgoal progress with each observation, decoded from ``subgoals/done``."""
        ids = self.meta.subgoal_ids
        return [
            {sid: bool(int(m) >> bit & 1) for bit, sid in enumerate(ids)}
            for m in self.column("subgoals/done")
        ]

    @property
    def events(self) -> list[FeedbackEvent]:
        """The hints and reviews, in order."""
        return [
            FeedbackEvent(int(row), FeedbackType(int(kind)), json.loads(payload))
            for row, kind, payload in zip(
                self.column("events/row"),
                self.column("events/type"),
                self.column("events/payload"),
                strict=True,
            )
        ]


def concat_columns(episodes: Sequence[Episode]) -> dict[str, np.ndarray]:
    """Concatenates the columns of compatible episodes (at least one), neutral ones filled in."""
    layouts = {tuple(e.columns) for e in episodes}  # usually one or two distinct layouts
    everywhere = set.intersection(*(set(layout) for layout in layouts))
    columns = {}
    for name in dict.fromkeys(n for layout in layouts for n in layout):
        if name in everywhere:
            columns[name] = np.concatenate([e.columns[name] for e in episodes])
        else:
            columns[name] = np.concatenate([e.column(name) for e in episodes])
    return with_neutral(columns, sum(e.meta.length for e in episodes), len(episodes))
