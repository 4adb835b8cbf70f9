"""Collects an episode step by step and turns it into an :class:`~.episode.Episode`.

Steps are kept by reference while the episode runs (one list append per step);
:meth:`EpisodeBuilder.encode` turns them into record bytes once, at the end
(each column's rows joined straight into the bytes the log and the sealed
segment are made from), and :meth:`EpisodeBuilder.build` into columns. The
info fields the feedback wrappers write are read when present and left
neutral when absent, so a bare env records too: ``env_reward`` (else the
reward), ``shaping_reward`` (else 0), ``feedback`` (``guide``, ``review``,
``phase``, ``guide_weight``, ``review_weight``), ``subgoals``, ``is_success``
and ``outcome``. Columns an episode has no data for are left out (see
:data:`~.episode.NEUTRAL`); sealing fills them in.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from feedbackgym.datasets._codec import (
    EncodedEpisode,
    column_pieces,
    decode_encoded,
    text_pieces,
)
from feedbackgym.datasets.episode import (
    PHASE_DTYPE,
    Episode,
    EpisodeMeta,
    FeedbackType,
    leaf_values,
    row_bytes,
)

__all__ = ["MAX_SUBGOALS", "EpisodeBuilder"]

MAX_SUBGOALS = 64
"""Most subgoals ``subgoals/done`` (a 64-bit mask per observation) can hold."""

_NONE: dict[str, Any] = {}
_OBJECT = np.dtype(object)
_EVENT_KEYS = ((int(FeedbackType.GUIDE), "guide"), (int(FeedbackType.REVIEW), "review"))
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
    ) -> None:
        self._first = (obs, info)
        self._steps: list[tuple[Any, Any, Any, bool, bool, dict[str, Any]]] = []
        self.add_step = self._steps.append
        """:meth:`add` taking one ``(action, obs, reward, terminated, truncated, info)``
        tuple: a recorder's per-step call, without a Python frame."""
        self.task_id = task_id
        self.round = round
        self.seed = seed
        self.start_time = start_time

    def __len__(self) -> int:
        return len(self._steps)

    def add(
        self,
        action: Any,
        obs: Any,
        reward: Any,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
    ) -> None:
        """Records one step (by reference: the env must not reuse the objects in place)."""
        self.add_step((action, obs, reward, terminated, truncated, info))

    def build(
        self,
        *,
        end_time: float,
        switch_time: float | None = None,
        config_version: int | None = None,
        config_changes: tuple[dict[str, Any], ...] = (),
        env_spec: str = "",
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
    ) -> EncodedEpisode:
        """Converts the steps to record bytes, for a store's :meth:`~.TrajectoryStore.add_encoded`.

        Args:
            end_time: Wall-clock time of the last step.
            switch_time: When the phase first left ``"guide"``, or ``None``.
            config_version: The feedback config version, or ``None``.
            config_changes: The config edits so far.
            env_spec: The env spec as JSON.

        Raises:
            ValueError: The episode has no steps, more than :data:`MAX_SUBGOALS`
                subgoals, or an observation or action that is neither numbers
                nor text.
        """
        if not self._steps:
            raise ValueError("an episode needs at least one step")
        actions, observations, rewards, terminations, truncations, infos = zip(
            *self._steps, strict=True
        )
        first_obs, first_info = self._first
        all_infos = (first_info, *infos)
        columns = _RecordColumns()
        columns.add_values("observations", (first_obs, *observations))
        columns.add_values("actions", actions)
        reward_column = np.array(rewards, np.float64)
        columns.add("rewards", reward_column)
        columns.add("terminations", np.array(terminations, bool))
        columns.add("truncations", np.array(truncations, bool))
        step_keys = set().union(*infos)  # what the wrappers reported, at any step
        if "env_reward" in step_keys or "shaping_reward" in step_keys:
            columns.add(
                "env_rewards",
                np.array(
                    [i.get("env_reward", r) for i, r in zip(infos, rewards, strict=True)],
                    np.float64,
                ),
            )
            columns.add(
                "shaping_rewards",
                np.array([i.get("shaping_reward", 0.0) for i in infos], np.float64),
            )
        events = 0
        if "feedback" in step_keys or "feedback" in first_info:
            feedback = _feedback_columns(all_infos)
            events = len(feedback.get("events/row", ()))
            for name, column in feedback.items():
                columns.add(name, column)
        subgoal_ids: tuple[str, ...] = ()
        if "subgoals" in step_keys or "subgoals" in first_info:
            subgoal_ids, masks = _subgoal_masks(all_infos)
            columns.add("subgoals/done", masks)
        last = infos[-1]
        success = last.get("is_success")
        meta = EpisodeMeta(
            task_id=self.task_id,
            round=self.round,
            start_time=self.start_time,
            end_time=end_time,
            length=len(self._steps),
            seed=self.seed,
            success=None if success is None else bool(success),
            outcome=str(last.get("outcome", "")),
            episode_return=float(reward_column.sum()),
            phase=str(first_info.get("feedback", _NONE).get("phase", "")),
            switch_time=switch_time,
            config_version=config_version,
            config_changes=config_changes,
            env_spec=env_spec,
            subgoal_ids=subgoal_ids,
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
        """Adds the columns of like (possibly nested) values, as :func:`.flatten_values` names them.

        Like arrays go in as their bytes, joined; text as a string column;
        anything else through ``np.asarray``.
        """
        for name, leaf in leaf_values(prefix, values):
            first = leaf[0]
            data = row_bytes(leaf)
            if data is not None:
                self.schema.append((name, first.dtype, first.shape))
                self.pieces.append(data)
            elif isinstance(first, str):
                self.schema.append((name, _OBJECT, ()))
                self.pieces += text_pieces(leaf)
            else:
                self.add(name, np.asarray(leaf))


def _feedback_columns(infos: tuple[dict[str, Any], ...]) -> dict[str, np.ndarray]:
    rows = len(infos)
    kinds = [0] * rows
    phases = [b""] * rows
    guide_weights = [np.nan] * rows
    review_weights = [np.nan] * rows
    event_rows: list[int] = []
    event_types: list[int] = []
    payloads: list[str] = []
    for row, info in enumerate(infos):
        feedback = info.get("feedback")
        if feedback is None:
            continue
        for kind, key in _EVENT_KEYS:
            value = feedback.get(key)
            if value:  # absent feedback is None or {}
                kinds[row] |= kind
                event_rows.append(row)
                event_types.append(kind)
                payloads.append(_to_json(value))
        phases[row] = feedback.get("phase", "").encode()
        guide_weights[row] = feedback.get("guide_weight", np.nan)
        review_weights[row] = feedback.get("review_weight", np.nan)
    columns = {
        "feedback/type": np.array(kinds, np.uint8),
        "schedule/phase": np.array(phases, PHASE_DTYPE),
        "schedule/guide_weight": np.array(guide_weights, np.float32),
        "schedule/review_weight": np.array(review_weights, np.float32),
    }
    if payloads:
        columns["events/row"] = np.array(event_rows, np.int32)
        columns["events/type"] = np.array(event_types, np.uint8)
        columns["events/payload"] = np.empty(len(payloads), object)
        columns["events/payload"][:] = payloads
    return columns


def _subgoal_masks(infos: tuple[dict[str, Any], ...]) -> tuple[tuple[str, ...], np.ndarray]:
    progress = [info.get("subgoals", _NONE) for info in infos]
    ids = tuple(progress[-1])
    masks = _masks_of_same_ids(progress, ids)
    if masks is not None:
        return ids, masks
    ids = tuple(dict.fromkeys(sid for p in progress for sid in p))
    progress = [{sid: p.get(sid, False) for sid in ids} for p in progress]
    _check_mask_room(ids)
    done = np.fromiter(
        itertools.chain.from_iterable(p.values() for p in progress), bool, len(progress) * len(ids)
    ).reshape(len(progress), len(ids))
    bits = np.arange(len(ids), dtype=np.uint64)
    return ids, (done.astype(np.uint64) << bits).sum(axis=1, dtype=np.uint64)


def _masks_of_same_ids(progress: list[dict[str, bool]], ids: tuple[str, ...]) -> np.ndarray | None:
    """The masks when every step lists ``ids`` in that order (the usual case), else ``None``.

    Progress changes a few times an episode, so a row equal to the one before
    reuses its mask.
    """
    _check_mask_room(ids)
    bit = {sid: 1 << i for i, sid in enumerate(ids)}
    masks: list[int] = []
    previous: dict[str, bool] | None = None
    mask = 0
    for row in progress:
        if row != previous:
            if tuple(row) != ids:
                return None
            mask = sum(bit[sid] for sid, done in row.items() if done)
            previous = row
        masks.append(mask)
    return np.array(masks, np.uint64)


def _check_mask_room(ids: tuple[str, ...]) -> None:
    if len(ids) > MAX_SUBGOALS:
        raise ValueError(
            f"subgoal progress is stored as a {MAX_SUBGOALS}-bit mask; this episode has "
            f"{len(ids)} subgoals"
        )
