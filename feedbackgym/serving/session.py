"""One WebSocket session's env: the arm's feedback stack behind OpenEnv's ``Environment``.

OpenEnv's server makes one :class:`FeedbackSession` per WebSocket session (and
short-lived ones for ``/metadata``), calls ``reset``/``step`` in the session's
own thread, and ``close`` when the client leaves, the session idles past the
timeout, or the server stops. The gym env (a browser, a container) is made at
the first ``reset``, so a session that never plays, or a ``/metadata`` call,
starts nothing.

The session's feedback is driven by its own
:class:`~feedbackgym.control.FeedbackController` (the arm's schedule, one
round every ``round_episodes`` finished episodes, each round's trend
reported), until a trainer sends a feedback state with ``reset``
(``{"type": "reset", "data": {"seed": 3, "feedback_state": {...}}}``): from
then on the trainer's states apply and the session's controller stops.

The observation's ``info`` is the env's, less the feedback (sent as ``hint``
and ``review``) and the keys that name a task's hidden structure
(:data:`~feedbackgym.protocol.ANSWER_KEYS`: OpsIncident-v0's and v1's
``incident``), which never leave the server. The reward fields
(:data:`~feedbackgym.protocol.REWARD_FIELDS`) are sent: a client that shows
them to a model hands it part of the answer.

Example:
    >>> from feedbackgym.serving.settings import ServeSettings
    >>> session = FeedbackSession(ServeSettings("feedbackgym/OpsIncidentEasy-v1"))
    >>> first = session.reset(seed=0)
    >>> first.done, first.actions[-1]
    (False, 'declare resolved')
    >>> session.step(FeedbackAction(action="wait")).info["action"]
    'wait'
    >>> session.close()
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from feedbackgym.control import FeedbackController
from feedbackgym.errors import FeedbackGymError, InvalidAction
from feedbackgym.language.episode_chat import action_choices
from feedbackgym.protocol import (
    ANSWER_KEYS,
    FEEDBACK,
    IS_SUCCESS,
    SET_FEEDBACK_STATE,
    FeedbackState,
    call_envs,
)
from feedbackgym.serving.connections import Connection, current_connection
from feedbackgym.serving.settings import ServeSettings
from feedbackgym.serving.wire import (
    FeedbackAction,
    FeedbackObservation,
    FeedbackSessionState,
    FeedbackStateFields,
)

try:
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import EnvironmentMetadata
except ImportError as error:  # pragma: no cover - wire.py raises first
    from feedbackgym.errors import DependencyNotInstalled

    raise DependencyNotInstalled.for_extra("openenv", "server") from error

__all__ = [
    "RECLAIM_EVERY",
    "TRUNCATED",
    "FeedbackSession",
    "SessionBook",
    "SessionError",
    "invalid_action",
]

TRUNCATED = "truncated"
"""``info[TRUNCATED]`` on an episode's last observation: it was cut off (a time limit)."""
_NOT_SENT = frozenset({FEEDBACK, *ANSWER_KEYS})
"""``info`` keys a session never sends in ``info``."""


class SessionError(FeedbackGymError, RuntimeError):
    """A message the session cannot take now (no episode, the episode is over, closed)."""


RECLAIM_EVERY = 256
"""Closed sessions after which the objects kept from full collections go back to them."""


class SessionBook:
    """Counts a server's open envs (``/sessions``) and keeps them out of full collections.

    A full collection walks every live object: with 256 OpsIncident-v1 sessions
    (about 280,000 objects) one took 283 ms, and every session's step waited for it.
    An env lives as long as its session, so once made it is frozen out of them
    (``gc.freeze``); steps' short-lived objects are collected as before. What a
    closed session leaves in reference cycles (about 23 objects) waits until
    :data:`RECLAIM_EVERY` sessions have closed, or until none is open, then
    everything frozen goes back to the collector (``gc.unfreeze``).

    Example:
        >>> import gc
        >>> book = SessionBook()
        >>> book.opened(), gc.get_freeze_count() > 0
        (1, True)
        >>> book.closed(), gc.get_freeze_count()  # none open: all back to the collector
        (0, 0)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open = 0
        self.started = 0
        self._closed_since_reclaim = 0

    def opened(self) -> int:
        """Notes an env made (and freezes it out of full collections); returns the envs open."""
        gc.freeze()
        with self._lock:
            self.open += 1
            self.started += 1
            return self.open

    def closed(self) -> int:
        """Notes an env closed; returns the envs open now."""
        with self._lock:
            self.open -= 1
            self._closed_since_reclaim += 1
            reclaim = self._closed_since_reclaim >= RECLAIM_EVERY or self.open == 0
            if reclaim:
                self._closed_since_reclaim = 0
            open_now = self.open
        if reclaim:
            gc.unfreeze()
        return open_now


def invalid_action(text: str, reason: str, choices: tuple[str, ...]) -> ValidationError:
    """The validation error of an action text that names no action: it lists the choices.

    OpenEnv answers a ``ValidationError`` raised by a step with ``VALIDATION_ERROR``
    (its ``errors`` as they are here) and keeps the session.

    Example:
        >>> error = invalid_action("reboot", "not an action", ("wait", "escalate"))
        >>> error.errors()[0]["msg"]
        "'reboot' is not an action of this episode (not an action); valid: wait, escalate"
    """
    message = f"{text!r} is not an action of this episode ({reason}); valid: " + ", ".join(choices)
    detail = InitErrorDetails(
        type=PydanticCustomError("invalid_action", message.replace("{", "{{").replace("}", "}}")),
        loc=("action",),
        input=text,
    )
    return ValidationError.from_exception_data("FeedbackAction", [detail])


def json_safe(value: Any) -> Any:
    """``value`` with numpy scalars and arrays as Python numbers and lists, the rest as text.

    Example:
        >>> import numpy as np
        >>> json_safe({"a": np.float32(0.5), "b": (1, np.arange(2)), "c": None})
        {'a': 0.5, 'b': [1, [0, 1]], 'c': None}
    """
    return json.loads(json.dumps(value, default=_plain))


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


class FeedbackSession(Environment[FeedbackAction, FeedbackObservation, FeedbackSessionState]):
    """One session: the env with the arm's feedback stack, over OpenEnv's ``Environment``.

    Args:
        settings: What the server serves.
        book: Where the server counts open envs (``None``: not counted).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, settings: ServeSettings, book: SessionBook | None = None) -> None:
        super().__init__()
        self.settings = settings
        self._book = book
        self._thread: ThreadPoolExecutor | None = None
        self._slow = True
        self._env: gym.Env[Any, Any] | None = None
        self._controller: FeedbackController | None = None
        self._trainer_state: FeedbackState | None = None
        self._closed = False
        self._done = True
        self._seed: int | None = None
        self._episode_id: str | None = None
        self._steps = 0
        self._return = 0.0
        self._episodes = 0
        self._round_trend: list[tuple[float, bool]] = []
        self._reviews: list[dict[str, Any]] = []
        self._last_review = ""
        self._choices: tuple[Any, list[str]] = ((), [])
        self._connection: Connection | None = None

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        feedback_state: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> FeedbackObservation:
        """Starts an episode; ``feedback_state`` hands the session's feedback to the trainer.

        Raises:
            SessionError: Unknown reset arguments, or the session is closed.
            ValidationError: A malformed ``feedback_state``.
        """
        if kwargs:
            raise SessionError(
                f"unknown reset arguments {sorted(kwargs)}: reset takes seed, episode_id "
                "and feedback_state"
            )
        env = self._live_env()
        if feedback_state is not None:
            fields = FeedbackStateFields.model_validate(dict(feedback_state))
            self._trainer_state = FeedbackState(**fields.model_dump())
            call_envs(env, SET_FEEDBACK_STATE, self._trainer_state)
        obs, info = env.reset(seed=seed)
        self._seed, self._episode_id = seed, episode_id
        self._steps, self._return, self._done = 0, 0.0, False
        review, self._last_review = self._last_review, ""
        return self._observation(env, obs, info, reward=None, done=False, review=review)

    def step(
        self, action: FeedbackAction, timeout_s: float | None = None, **kwargs: Any
    ) -> FeedbackObservation:
        """Takes one action of the episode in progress.

        Raises:
            ValidationError: The text names no action of the episode (the
                message lists the valid ones).
            SessionError: No episode in progress, or the session is closed.
        """
        env = self._live_env()
        if self._done:
            raise SessionError("no episode in progress: send reset first")
        try:
            unwrapped: Any = env.unwrapped
            index = unwrapped.parse_action(action.action)
            obs, reward, terminated, truncated, info = env.step(index)
        except InvalidAction as error:
            raise invalid_action(action.action, str(error), action_choices(env)) from None
        self._steps += 1
        self._return += float(reward)
        done = bool(terminated or truncated)
        if done:
            self._episode_ended(bool(info.get(IS_SUCCESS, False)))
            info = {**info, TRUNCATED: bool(truncated and not terminated)}
        return self._observation(env, obs, info, reward=float(reward), done=done, review="")

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        feedback_state: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> FeedbackObservation:
        """:meth:`reset`, where the env's steps run (see :meth:`_run`).

        It runs in the WebSocket connection's task: the session takes that
        connection, to close it when the session is closed.
        """
        self._connection = self._connection or current_connection()
        return await self._run(self.reset, seed, episode_id, feedback_state, **kwargs)

    async def step_async(
        self, action: FeedbackAction, timeout_s: float | None = None, **kwargs: Any
    ) -> FeedbackObservation:
        """:meth:`step`, where the env's steps run (see :meth:`_run`)."""
        return await self._run(self.step, action, timeout_s, **kwargs)

    async def _run(
        self, method: Callable[..., FeedbackObservation], *args: Any, **kwargs: Any
    ) -> Any:
        """Runs ``method`` on the server's event loop, or in the session's own thread.

        An env whose steps are quick (the simulators: well under a millisecond)
        steps on the event loop: a hop to a thread and back costs more than the
        step, and hundreds of sessions' threads contend for the interpreter. An
        env that declares slow steps (``metadata["slow_steps"]``: a browser, a
        sandbox) is made, stepped and closed in one thread of its own (Playwright's
        sync API needs that), so it never blocks the loop. Until the env is made,
        the session takes the thread.
        """
        if not self._slow:
            return method(*args, **kwargs)
        if self._thread is None:
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="feedback-session")
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(
            self._thread, functools.partial(method, *args, **kwargs)
        )
        if self._env is not None and not self._slow_steps(self._env):
            self._slow = False
            self._thread.shutdown(wait=False)
            self._thread = None
        return result

    @staticmethod
    def _slow_steps(env: gym.Env[Any, Any]) -> bool:
        return bool(env.unwrapped.metadata.get("slow_steps", False))

    @property
    def state(self) -> FeedbackSessionState:
        """The episode, the feedback state in force and the reviews so far."""
        feedback = self._feedback_state()
        return FeedbackSessionState(
            episode_id=self._episode_id,
            step_count=self._steps,
            seed=self._seed,
            episodes=self._episodes,
            phase=feedback.phase if feedback else "",
            guide_weight=feedback.guide_weight if feedback else 0.0,
            review_weight=feedback.review_weight if feedback else 0.0,
            round=feedback.round if feedback else 0,
            driven_by="trainer" if self._trainer_state is not None else "server",
            reviews=list(self._reviews),
        )

    def get_metadata(self) -> EnvironmentMetadata:
        """The env's id, arm and hint level, and its docstring as the README."""
        settings = self.settings
        spec = gym.spec(settings.env_id)
        readme = None
        if isinstance(spec.entry_point, str):
            readme = gym.envs.registration.load_env_creator(spec.entry_point).__doc__
        return EnvironmentMetadata(
            name=settings.env_id,
            description=(
                f"{settings.env_id} (text actions) with the {settings.arm} arm's feedback at "
                f"the {settings.level} hint level: hint and review are observation fields"
            ),
            readme_content=readme,
            version=spec.id.rsplit("-", 1)[-1],
            author="feedbackgym",
        )

    def close(self) -> None:
        """Closes the env and whatever it started (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._connection is not None:  # closed by the client: the frame goes nowhere
            self._connection.close_soon("session closed: idle past --idle-timeout, or stopping")
        env, self._env = self._env, None
        thread, self._thread = self._thread, None
        try:
            if env is not None:
                if thread is not None:  # where it was made: a browser's thread
                    thread.submit(env.close).result()
                else:
                    env.close()
        finally:
            if thread is not None:
                thread.shutdown(wait=False)
            if env is not None and self._book is not None:
                self._book.closed()

    def _live_env(self) -> gym.Env[Any, Any]:
        """The session's env, made on first use.

        Raises:
            SessionError: The session was closed (idle timeout, server stopping).
        """
        if self._closed:
            raise SessionError(
                "this session is closed (idle past the server's --idle-timeout, or the server "
                "is stopping): open a new WebSocket session"
            )
        if self._env is None:
            config = self.settings.feedback_config()
            self._env = self.settings.make_env(config)
            self._controller = FeedbackController(config)
            self._controller.attach(self._env)
            if self._book is not None:
                self._book.opened()
        return self._env

    def _feedback_state(self) -> FeedbackState | None:
        if self._trainer_state is not None:
            return self._trainer_state
        return self._controller.state if self._controller is not None else None

    def _episode_ended(self, success: bool) -> None:
        """Counts a finished episode; every ``round_episodes`` its own controller's round."""
        self._done = True
        self._episodes += 1
        self._round_trend.append((self._return, success))
        controller = self._controller
        if self._trainer_state is not None or controller is None:
            return
        if len(self._round_trend) >= self.settings.round_episodes:
            returns = [r for r, _ in self._round_trend]
            controller.update(
                controller.round + 1,
                mean_return=sum(returns) / len(returns),
                success=sum(s for _, s in self._round_trend) / len(returns),
            )
            self._round_trend = []

    def _actions(self, env: gym.Env[Any, Any]) -> list[str]:
        """The valid actions in words; worded again only when the meanings or masks change."""
        unwrapped: Any = env.unwrapped
        masks = getattr(unwrapped, "action_masks", None)
        key = (unwrapped.action_meanings, masks().tobytes() if masks is not None else b"")
        if key != self._choices[0]:
            self._choices = (key, list(action_choices(env)))
        return self._choices[1]

    def _observation(
        self,
        env: gym.Env[Any, Any],
        obs: Any,
        info: Mapping[str, Any],
        *,
        reward: float | None,
        done: bool,
        review: str,
    ) -> FeedbackObservation:
        feedback = info.get(FEEDBACK, {})
        hint = feedback.get("guide") or {}
        arrived = feedback.get("review") or {}
        if arrived:
            self._reviews.append(json_safe(dict(arrived)))
            review = str(arrived.get("text", ""))
            self._last_review = review
        text = obs if isinstance(obs, str) else str(obs["text"])
        return FeedbackObservation(
            text=text,
            actions=[] if done else self._actions(env),
            hint=str(hint.get("text", "")),
            review=review,
            info=json_safe({key: value for key, value in info.items() if key not in _NOT_SENT}),
            reward=reward,
            done=done,
        )
