"""``RecordTrajectories``: records every episode, with its feedback, to a trajectory store."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium import spaces

from feedbackgym.datasets import EpisodeRecorder, TrajectoryStore
from feedbackgym.protocol import FEEDBACK, FeedbackState, task_key
from feedbackgym.wrappers.common import find_wrapper
from feedbackgym.wrappers.schedule import FadeGuideToReview

__all__ = ["RecordTrajectories"]


class RecordTrajectories(
    gym.Wrapper[Any, Any, Any, Any],
    gym.utils.RecordConstructorArgs,
):
    """Records each finished episode to a :class:`~feedbackgym.datasets.TrajectoryStore`.

    Put it outermost, so that it sees the observations, rewards and
    ``info["feedback"]`` the trainer sees. Per observation it records the
    feedback type (none, guide, review) and payload, the schedule phase and
    weights and the subgoal progress; per step the action, the reward and,
    apart, the env and shaping rewards; per episode the seed, the env spec, the
    feedback config version and its change times, and when the recorded phase
    first left ``"guide"``. Fields a bare env lacks stay empty or neutral.

    Each episode goes to the store when it ends, and is durable (in the
    store's write-ahead log, or with ``TrajectoryStore(path, writer="process")``
    in the pipe to its writer process) when the step that ended it returns, so
    a crash loses at most the episode in flight. An episode still running at
    :meth:`close` is not recorded. Envs in subprocess workers each write their
    own shard.

    Args:
        env: The env to record.
        store: A store directory, or a :class:`TrajectoryStore` (a path opens
            one that :meth:`close` closes; a store you pass is only flushed).
        task_id: The task the episodes belong to; default: the env id.
        round: The training round (or split); change it with :meth:`set_round`.

    Example:
        >>> import gymnasium as gym, feedbackgym, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), tmp.name, round=1)
        >>> _ = env.reset(seed=3)
        >>> _ = env.step(env.unwrapped.expert_action())
        >>> env.set_round(2)  # applies from the next reset
        >>> env.close()  # the running episode is not recorded
        >>> len(env.store)
        0
        >>> tmp.cleanup()

    Change logs:
     * v0.1.0 - Initially added
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        store: str | os.PathLike[str] | TrajectoryStore,
        task_id: str | None = None,
        round: int | str | None = None,
    ) -> None:
        path = store.path if isinstance(store, TrajectoryStore) else store
        gym.utils.RecordConstructorArgs.__init__(
            self, store=os.fspath(path), task_id=task_id, round=round
        )
        gym.Wrapper.__init__(self, env)
        self._owns_store = not isinstance(store, TrajectoryStore)
        self.store = store if isinstance(store, TrajectoryStore) else TrajectoryStore(store)
        self._recorder = EpisodeRecorder(
            self.store,
            task_id or (env.spec.id if env.spec else type(env.unwrapped).__name__),
            round,
        )
        self._env_spec = _spec_json(env)
        self._fade = find_wrapper(env, FadeGuideToReview)
        self._parse = _action_parser(env)
        self._saw_guide = False
        self.switch_time: float | None = None
        """Wall time at which the recorded phase first left ``"guide"``."""

    @property
    def task_id(self) -> str:
        """The task the episodes belong to."""
        return self._recorder.task_id

    @property
    def round(self) -> str:
        """The round, as text, that episodes starting from the next reset belong to."""
        return self._recorder.round

    def set_round(self, round: int | str | None) -> None:
        """Sets the round that episodes starting from the next reset belong to.

        Called by trainers through ``env_method``/``call``; ``None`` means round 0.

        Raises:
            ValueError: The round contains ``/`` or is empty (it names an HDF5 group).
        """
        self._recorder.set_round(round)

    def set_feedback_state(self, state: FeedbackState) -> None:
        """Files the episodes from the next reset under ``state.round``; passes the state on.

        The one method a :class:`~feedbackgym.control.FeedbackController` calls
        (see :mod:`feedbackgym.protocol`): this wrapper is outermost, so it
        forwards the state to the :class:`~feedbackgym.wrappers.FadeGuideToReview` inside.
        """
        self.set_round(state.round)
        if self._fade is not None:
            self._fade.set_feedback_state(state)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Resets the env and starts recording the episode."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._recorder.start(obs, info, seed=seed)
        if self.switch_time is None:
            self._watch_phase(info)
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps the env and records the step; writes the episode to the store when it ends.

        Raises:
            StoreError: The store could not write the episode.
        """
        obs, reward, terminated, truncated, info = self.env.step(action)
        episode = self._recorder.episode
        if episode is not None:
            if self._parse is not None and isinstance(action, str):
                action = self._parse(action)
            episode.add(action, obs, reward, terminated, truncated, info)
            if self.switch_time is None and FEEDBACK in info:
                self._watch_phase(info)
            if terminated or truncated:
                self._finish()
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        """Flushes the store (closing it if this wrapper opened it) and closes the env."""
        self._recorder.discard()
        try:
            if self._owns_store:
                self.store.close()
            else:
                self.store.flush()
        finally:
            super().close()

    def _finish(self) -> None:
        state = self._fade.feedback_state if self._fade is not None else None
        self._recorder.finish(
            switch_time=self.switch_time,
            config_version=state.config_version if state is not None else None,
            config_changes=state.config_changes if state is not None else (),
            env_spec=self._env_spec,
            task_key=task_key(self.env) or "",
        )

    def _watch_phase(self, info: dict[str, Any]) -> None:
        feedback = info.get(FEEDBACK)
        if feedback is None:
            return
        phase = feedback.get("phase")
        if phase == "guide":
            self._saw_guide = True
        elif phase and self._saw_guide:
            self.switch_time = time.time()


def _spec_json(env: gym.Env[Any, Any]) -> str:
    spec = env.spec
    if spec is None:
        return ""
    try:
        return spec.to_json()
    except (TypeError, ValueError, gym.error.Error):
        return ""  # constructor arguments that are not plain data


def _action_parser(env: gym.Env[Any, Any]) -> Callable[[str], Any] | None:
    """Maps text actions to the action space, for envs that accept text for a non-text space."""
    if isinstance(env.action_space, spaces.Text):
        return None
    return getattr(env.unwrapped, "parse_action", None)
