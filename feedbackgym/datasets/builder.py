"""Collects an episode step by step and turns it into an :class:`~.episode.Episode`.

Each step's observation is packed into a row of bytes as it arrives (a
:class:`~._packing.Packer` joins its arrays' bytes, so the env's arrays are
copied and let go at once); actions, rewards and flags are kept by value,
and of the info only what is recorded. :meth:`EpisodeBuilder.encode` turns
the steps into record bytes once, at the end (each column's bytes cut from
the rows), and :meth:`EpisodeBuilder.build` into columns. The info fields
the feedback wrappers write are read when present and left neutral when
absent, so a bare env records too: ``env_reward`` (else the reward),
``shaping_reward`` (else 0), ``feedback`` (``guide``, ``review``, ``phase``,
``guide_weight``, ``review_weight``), ``subgoals``, ``is_success`` and
``outcome``. Columns an episode has no data for are left out (see
:data:`~.columns.NEUTRAL`); sealing fills them in.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from feedbackgym.datasets._storage.codec import (
    EncodedEpisode,
    column_pieces,
    decode_encoded,
    text_pieces,
)
from feedbackgym.datasets._storage.packing import Column, Packer
from feedbackgym.datasets.columns import PHASE_DTYPE, leaf_values, row_bytes
from feedbackgym.datasets.episode import Episode, EpisodeMeta, FeedbackType
from feedbackgym.protocol import ENV_REWARD, FEEDBACK, IS_SUCCESS, SHAPING_REWARD, SUBGOALS

__all__ = ["MAX_SUBGOALS", "EpisodeBuilder"]

MAX_SUBGOALS = 64
"""Most subgoals ``subgoals/done`` (a 64-bit mask per observation) can hold."""

_NONE: dict[str, Any] = {}
_UNSEEN = object()
_OBJECT = np.dtype(object)
_NAN = float("nan")
_STEP = 4
"""Values a step keeps in ``EpisodeBuilder._steps``: action, reward, terminated, truncated."""
_EXTRA = 3
"""Values a step keeps in ``EpisodeBuilder._extra_rewards``: step, env reward, shaping reward."""
_ENTRY = 6
"""Values an entry of ``EpisodeBuilder._feedback`` holds."""
_GUIDE, _REVIEW = int(FeedbackType.GUIDE), int(FeedbackType.REVIEW)
"""Plain ints: numpy looks attributes up on an enum member at every use."""
_to_json = json.JSONEncoder(separators=(",", ":")).encode
"""One encoder for every payload (``json.dumps`` with options builds one per call)."""


class EpisodeBuilder:
    """Gathers one episode's steps.

    Args:
        obs: The reset observation.
        info: The reset info.
        task_id: The task the episode belongs to.
        round: The round, as text.
        seed: The reset seed, or ``None``.
        start_time: Wall-clock time of the reset.
        packer: The previous episode's :attr:`packer`, reused when ``obs``
            has its structure (a recorder passes it on: learning the
            structure costs more than a step).

    Example:
        >>> b = EpisodeBuilder(0, {}, task_id="t", round="0", seed=1, start_time=0.0)
        >>> b.add(1, 1, 0.5, True, False, {"is_success": True})
        >>> episode = b.build(end_time=1.0)
        >>> episode.meta.success, episode.columns["rewards"].tolist()
        (True, [0.5])
    """

    def __init__(
        self,
        obs: Any,
        info: dict[str, Any],
        *,
        task_id: str,
        round: str,
        seed: int | None,
        start_time: float,
        packer: Packer | None = None,
    ) -> None:
        if packer is None or not packer.fits(obs):
            packer = Packer("observations", obs)
        self.packer = packer
        self._pack = packer.pack
        self._rows = bytearray()
        """Each observation's packed bytes, :attr:`~._packing.Packer.row_size` a row."""
        self._kept: list[Any] = []
        """Each observation's kept leaves (numbers, text), one row after another."""
        self._misfits: dict[int, Any] = {}
        """Observations kept whole (that did not pack), by row; the rows hold blanks for them."""
        self._steps: list[Any] = []
        """Action, reward, terminated, truncated: :data:`_STEP` values a step, one after another."""
        self._extra_rewards: list[Any] = []
        """Step, env reward, shaping reward of each step whose info gave either: :data:`_EXTRA`
        values a step."""
        self._progress: list[tuple[int, dict[str, bool] | None]] = []
        """``(row, copy of info["subgoals"])`` at the reset and wherever it changed
        (``None`` where the info had none)."""
        self._last_progress: Any = _UNSEEN
        self._feedback: list[Any] = []
        """Where the feedback changed, :data:`_ENTRY` values an entry: row, guide, review,
        phase, guide weight, review weight at an observation with a hint or a review, or
        whose schedule (phase and weights) differs from the observation before. A
        schedule holds until the next entry or the next row of ``_feedback_gone``."""
        self._feedback_gone: list[int] = []
        """Rows where the info's ``"feedback"`` became absent or ``None``."""
        self._schedule: tuple[Any, ...] | None = None
        """The schedule of the last entry of ``_feedback`` (``None``: no feedback)."""
        self._last_guide: Any = None
        """The last hint kept: an equal one after it is kept as this one (sent once)."""
        self._first_info = info
        self._last_info = info
        self._keep(0, obs)
        self._watch(0, info)
        self.task_id = task_id
        self.round = round
        self.seed = seed
        self.start_time = start_time

    def __len__(self) -> int:
        return len(self._steps) // _STEP

    def __getstate__(self) -> dict[str, Any]:
        """What :meth:`encode` reads, for a writer process, without the packer (sent apart).

        Of the infos only the recorded keys go; the receiver sets :attr:`packer`.
        The step values go as one column each, NumPy ones as their bytes: pickle
        handles a few large objects much faster than many small ones (a builder
        is pickled on the recording thread).
        """
        state = self.__dict__.copy()
        del state["_pack"], state["packer"], state["_last_guide"]
        first = self._first_info.get(FEEDBACK) or _NONE  # absent, or None
        state["_first_info"] = {FEEDBACK: {"phase": first.get("phase", "")}}
        last = self._last_info
        state["_last_info"] = {key: last[key] for key in (IS_SUCCESS, "outcome") if key in last}
        steps = self._steps
        state["_steps"] = [_step_column_state(steps[k::_STEP]) for k in range(_STEP)]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        columns = [_step_column(column) for column in state["_steps"]]
        self._steps = [None] * (_STEP * len(columns[0]))
        for k, column in enumerate(columns):
            self._steps[k::_STEP] = column
        self._last_guide = None
        self.packer = None  # type: ignore[assignment]

    def add(
        self,
        action: Any,
        obs: Any,
        reward: Any,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> None:
        """Records one step: the observation's arrays copied, the rest of what is recorded kept.

        Actions, rewards and info payloads are kept by reference, in flat lists
        (a step adds no object that the garbage collector tracks).
        """
        steps = self._steps
        steps += action, reward, terminated, truncated
        row = len(steps) // _STEP  # this step's observation
        self._keep(row, obs)
        if ENV_REWARD in info or SHAPING_REWARD in info:
            extra = info.get(ENV_REWARD, reward), info.get(SHAPING_REWARD, 0.0)
            self._extra_rewards += row - 1, *extra
        self._last_info = info
        self._watch(row, info)

    def _keep(self, row: int, obs: Any) -> None:
        """Adds observation ``row`` (the next): its packed bytes, or a blank for a misfit."""
        data, kept = self._pack(obs)
        if data is None:  # kept whole; a blank row stands in for it
            self._misfits[row] = obs
            blank, kept = self.packer.blank()
            self._rows += blank
        else:
            self._rows += data
        self._kept += kept

    def _watch(self, row: int, info: dict[str, Any]) -> None:
        """Notes the subgoal progress (when it changed) and the feedback of observation ``row``."""
        progress = info.get(SUBGOALS)
        if progress != self._last_progress:  # against a copy: an env may update its dict in place
            self._last_progress = None if progress is None else dict(progress)
            self._progress.append((row, self._last_progress))
        value = info.get(FEEDBACK)
        if value is None:
            if self._schedule is not None:
                self._feedback_gone.append(row)
                self._schedule = None
            return
        get = value.get
        guide, review = get("guide"), get("review")
        if guide:  # a guide may give the same hint again (not AddGuide's: each has its step)
            if guide == self._last_guide:
                guide = self._last_guide
            else:
                self._last_guide = guide
        schedule = (get("phase", ""), get("guide_weight", _NAN), get("review_weight", _NAN))
        if guide or review or schedule != self._schedule:  # absent feedback is None or {}
            self._feedback += row, guide, review, *schedule
            self._schedule = schedule

    def build(
        self,
        *,
        end_time: float,
        switch_time: float | None = None,
        config_version: int | None = None,
        config_changes: tuple[dict[str, Any], ...] = (),
        env_spec: str = "",
        task_key: str = "",
    ) -> Episode:
        """Converts the steps to columns (read-only arrays); arguments as for :meth:`encode`.

        Raises:
            ValueError: As for :meth:`encode`.
        """
        return decode_encoded(
            self.encode(
                end_time=end_time,
                switch_time=switch_time,
                config_version=config_version,
                config_changes=config_changes,
                env_spec=env_spec,
                task_key=task_key,
            )
        )

    def encode(
        self,
        *,
        end_time: float,
        switch_time: float | None = None,
        config_version: int | None = None,
        config_changes: tuple[dict[str, Any], ...] = (),
        env_spec: str = "",
        task_key: str = "",
    ) -> EncodedEpisode:
        """Converts the steps to record bytes, for a store's :meth:`~.TrajectoryStore.add_encoded`.

        Args:
            end_time: Wall-clock time of the last step.
            switch_time: When the phase first left ``"guide"``, or ``None``.
            config_version: The feedback config version, or ``None``.
            config_changes: The config edits so far.
            env_spec: The env spec as JSON.
            task_key: The task's structure, read on the evaluator's side.

        Raises:
            ValueError: The episode has no steps, more than :data:`MAX_SUBGOALS`
                subgoals, or an observation or action that is neither numbers
                nor text.
        """
        if not self._steps:
            raise ValueError("an episode needs at least one step")
        length = len(self)
        steps = self._steps
        actions, rewards, terminations, truncations = (steps[k::_STEP] for k in range(_STEP))
        columns = _RecordColumns()
        rows = (length + 1, self._rows, self._kept, self._misfits)
        columns.add_packed(self.packer.columns(rows))
        columns.add_values("actions", actions)
        reward_column = np.array(rewards, np.float64)
        columns.add("rewards", reward_column)
        columns.add("terminations", np.array(terminations, bool))
        columns.add("truncations", np.array(truncations, bool))
        if self._extra_rewards:
            env_rewards = reward_column.copy()
            shaping_rewards = np.zeros(length, np.float64)
            extra = self._extra_rewards
            steps_given = extra[0::_EXTRA]
            env_rewards[steps_given] = extra[1::_EXTRA]
            shaping_rewards[steps_given] = extra[2::_EXTRA]
            columns.add("env_rewards", env_rewards)
            columns.add("shaping_rewards", shaping_rewards)
        events = 0
        if self._feedback:
            feedback = _feedback_columns(self._feedback, self._feedback_gone, length + 1)
            events = len(feedback.get("events/row", ()))
            for name, column in feedback.items():
                columns.add(name, column)
        subgoal_ids: tuple[str, ...] = ()
        if any(progress is not None for _, progress in self._progress):
            subgoal_ids, masks = _subgoal_masks(self._progress, length + 1)
            columns.add("subgoals/done", masks)
        last = self._last_info
        success = last.get(IS_SUCCESS)
        meta = EpisodeMeta(
            task_id=self.task_id,
            round=self.round,
            start_time=self.start_time,
            end_time=end_time,
            length=length,
            seed=self.seed,
            success=None if success is None else bool(success),
            outcome=str(last.get("outcome", "")),
            episode_return=float(reward_column.sum()),
            phase=str((self._first_info.get(FEEDBACK) or _NONE).get("phase", "")),
            switch_time=switch_time,
            config_version=config_version,
            config_changes=config_changes,
            env_spec=env_spec,
            subgoal_ids=subgoal_ids,
            task_key=task_key,
        )
        return EncodedEpisode(meta, tuple(columns.schema), events, b"".join(columns.pieces))


class _RecordColumns:
    """Columns gathered as record bytes: their schema and the pieces of their bytes, in order."""

    def __init__(self) -> None:
        self.schema: list[tuple[str, np.dtype[Any], tuple[int, ...]]] = []
        self.pieces: list[bytes] = []

    def add(self, name: str, column: np.ndarray) -> None:
        """Adds a whole column.

        Raises:
            ValueError: It holds objects other than one string per row.
        """
        self.pieces += column_pieces(name, column)
        self.schema.append((name, column.dtype, column.shape[1:]))

    def add_values(self, prefix: str, values: Sequence[Any]) -> None:
        """Adds the columns of like (possibly nested) values (see :func:`.flatten_values`)."""
        for name, leaf in leaf_values(prefix, values):
            self.add_leaf(name, leaf)

    def add_packed(self, columns: list[Column]) -> None:
        """Adds the columns a :class:`~._packing.Packer` cut from its rows."""
        for name, dtype, data in columns:
            if dtype is None:
                self.add_leaf(name, data)
            else:
                shape, pieces = data
                self.schema.append((name, dtype, shape))
                self.pieces.append(pieces)

    def add_leaf(self, name: str, values: Sequence[Any]) -> None:
        """Adds one leaf's column.

        Like arrays go in as their bytes, joined; text as a string column;
        anything else through ``np.asarray``.
        """
        first = values[0]
        data = row_bytes(values)
        if data is not None:
            self.schema.append((name, first.dtype, first.shape))
            self.pieces.append(data)
        elif isinstance(first, str):
            self.schema.append((name, _OBJECT, ()))
            self.pieces += text_pieces(values)
        else:
            self.add(name, np.asarray(values))


def _feedback_columns(feedback: list[Any], gone: list[int], rows: int) -> dict[str, np.ndarray]:
    """The feedback and schedule columns of ``rows`` observations.

    ``feedback`` and ``gone`` are an episode's ``_feedback`` and ``_feedback_gone``.
    A payload kept for several rows (a repeated hint) is encoded once.
    """
    entries = [feedback[i : i + _ENTRY] for i in range(0, len(feedback), _ENTRY)]
    starts = sorted([entry[0] for entry in entries] + gone) + [rows]
    ends = [starts[bisect.bisect_right(starts, entry[0])] for entry in entries]
    kinds = np.zeros(rows, np.uint8)
    phases = np.zeros(rows, PHASE_DTYPE)
    guide_weights = np.full(rows, np.nan, np.float32)
    review_weights = np.full(rows, np.nan, np.float32)
    event_rows: list[int] = []
    event_types: list[int] = []
    payloads: list[str] = []
    encoded: dict[int, str] = {}  # by id: the payloads are alive throughout
    for entry, end in zip(entries, ends, strict=True):
        row, guide, review, phase, guide_weight, review_weight = entry
        for kind, payload in ((_GUIDE, guide), (_REVIEW, review)):
            if payload:  # absent feedback is None or {}
                kinds[row] |= kind
                event_rows.append(row)
                event_types.append(kind)
                text = encoded.get(id(payload))
                if text is None:
                    text = encoded[id(payload)] = _to_json(payload)
                payloads.append(text)
        phases[row:end] = phase.encode()
        guide_weights[row:end] = guide_weight
        review_weights[row:end] = review_weight
    columns = {
        "feedback/type": kinds,
        "schedule/phase": phases,
        "schedule/guide_weight": guide_weights,
        "schedule/review_weight": review_weights,
    }
    if payloads:
        columns["events/row"] = np.array(event_rows, np.int32)
        columns["events/type"] = np.array(event_types, np.uint8)
        columns["events/payload"] = np.empty(len(payloads), object)
        columns["events/payload"][:] = payloads
    return columns


def _subgoal_masks(
    changes: list[tuple[int, dict[str, bool] | None]], rows: int
) -> tuple[tuple[str, ...], np.ndarray]:
    """The subgoal ids and each observation's mask, from the progress where it changed."""
    progress = [_NONE if p is None else p for _, p in changes]
    starts = [row for row, _ in changes]
    ids = tuple(progress[-1])
    if not all(tuple(p) == ids for p in progress):
        ids = tuple(dict.fromkeys(sid for p in progress for sid in p))
    if len(ids) > MAX_SUBGOALS:
        raise ValueError(
            f"subgoal progress is stored as a {MAX_SUBGOALS}-bit mask; this episode has "
            f"{len(ids)} subgoals"
        )
    bit = {sid: 1 << i for i, sid in enumerate(ids)}
    masks = np.array(
        [sum(bit[sid] for sid, done in p.items() if done) for p in progress], np.uint64
    )
    return ids, np.repeat(masks, np.diff([*starts, rows]))


def _step_column_state(values: Sequence[Any]) -> tuple[Any, ...]:
    """A step column for pickling: NumPy numbers as ``(dtype, bytes)``, anything else ``(values,)``.

    A tuple of bytes pickles several times faster than an array or many NumPy scalars.
    """
    column = _scalars_as_array(values)
    if isinstance(column, np.ndarray):
        return column.dtype.str, column.tobytes()
    return (column,)


def _step_column(state: tuple[Any, ...]) -> np.ndarray | Sequence[Any]:
    """Undoes :func:`_step_column_state`."""
    if len(state) == 1:
        return state[0]
    dtype, data = state
    return np.frombuffer(data, np.dtype(dtype))


def _scalars_as_array(values: Sequence[Any]) -> np.ndarray | Sequence[Any]:
    """``values`` as one array when they are NumPy numbers or bools of one type, else as they are.

    An array pickles as its bytes; NumPy scalars pickle one by one at several
    microseconds each (an episode's actions were most of a builder's pickle).
    Iterating the array gives the same scalars back. Text, bytes, dates and
    structured scalars stay as they are (an array would drop trailing NULs or
    unify units).

    Example:
        >>> _scalars_as_array((np.int64(3), np.int64(4)))
        array([3, 4])
        >>> _scalars_as_array((1, np.int64(4)))
        (1, np.int64(4))
        >>> _scalars_as_array((np.str_("a"), np.str_("b")))
        (np.str_('a'), np.str_('b'))
    """
    kind = type(values[0]) if values else None
    if kind is None or not issubclass(kind, (np.number, np.bool_)):
        return values
    if any(type(value) is not kind for value in values):
        return values
    return np.array(values)
