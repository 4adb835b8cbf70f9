"""A served env as a Gymnasium env: what ``agent --env-url`` and ``train-llm --env-url`` play.

:class:`FeedbackEnvClient` is the typed OpenEnv client of ``serve-env``
(OpenEnv's own ``EnvClient``: one WebSocket, one session). :class:`RemoteEnv`
puts a Gymnasium face on it, so the agent loop, the LLM trainer and TRL's
factory play a remote env as they play a local stack:

* observations are the env's text; actions are text, or an index into the
  last observation's ``actions`` (``unwrapped.action_meanings``), and
  :meth:`RemoteEnv.parse_action` checks a text against them;
* ``info`` is the server's ``info`` with ``info["feedback"]["guide"]`` and
  ``["review"]`` built from the observation's ``hint`` and ``review`` fields
  (a review with its score, from the session's state);
* :meth:`RemoteEnv.set_feedback_state` (a trainer's controller) sends its
  state with the next reset: the server's session then follows the trainer.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec

from feedbackgym.errors import FeedbackGymError, InvalidAction
from feedbackgym.protocol import FEEDBACK, FeedbackState
from feedbackgym.serving.wire import FeedbackAction, FeedbackObservation, FeedbackSessionState

try:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
except ImportError as error:  # pragma: no cover - wire.py raises first
    from feedbackgym.errors import DependencyNotInstalled

    raise DependencyNotInstalled.for_extra("openenv", "server") from error

__all__ = ["FeedbackEnvClient", "RemoteEnv", "RemoteEnvError", "server_settings"]

_TEXT = spaces.Text(max_length=1 << 20, min_length=0, charset=frozenset(map(chr, range(32, 127))))


class RemoteEnvError(FeedbackGymError, RuntimeError):
    """The server refused a message or could not be reached (its message and code named)."""


class FeedbackEnvClient(EnvClient[FeedbackAction, FeedbackObservation, FeedbackSessionState]):
    """OpenEnv's ``EnvClient`` for ``serve-env``: typed actions, observations and state.

    Example:
        >>> client = FeedbackEnvClient(base_url="http://127.0.0.1:8000")
        >>> client._step_payload(FeedbackAction(action="wait"))
        {'action': 'wait'}
    """

    def _step_payload(self, action: FeedbackAction) -> dict[str, Any]:
        return {"action": action.action}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[FeedbackObservation]:
        observation = FeedbackObservation(
            **payload.get("observation", {}),
            reward=payload.get("reward"),
            done=bool(payload.get("done", False)),
        )
        return StepResult(observation, observation.reward, observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> FeedbackSessionState:
        return FeedbackSessionState(**payload)


def server_settings(url: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """What a ``serve-env`` server serves (its ``/settings``): env id, kwargs, arm, limits.

    Raises:
        RemoteEnvError: No ``serve-env`` server answers at ``url``.
    """
    http = url.replace("ws://", "http://", 1).replace("wss://", "https://", 1).rstrip("/")
    try:
        with urllib.request.urlopen(f"{http}/settings", timeout=timeout_s) as response:
            return dict(json.loads(response.read()))
    except (OSError, ValueError) as error:
        raise RemoteEnvError(f"no feedbackgym serve-env server at {url}: {error}") from None


class RemoteEnv(gym.Env[str, str]):
    """One session of a ``serve-env`` server as a Gymnasium env (text in, text out).

    Args:
        url: The server (``http://HOST:PORT`` or ``ws://HOST:PORT``).
        message_timeout_s: How long a reply may take.

    Attributes:
        settings: What the server serves (:func:`server_settings`).
        action_meanings: The actions of the last observation, in words.

    Example:
        >>> RemoteEnv("http://127.0.0.1:9")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        feedbackgym.serving.remote_env.RemoteEnvError: no feedbackgym serve-env server at ...
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, url: str, *, message_timeout_s: float = 60.0) -> None:
        self.url = url
        self.settings = server_settings(url)
        self.spec = EnvSpec(
            id=self.settings["env_id"], entry_point=None, kwargs=self.settings["spec_kwargs"]
        )
        self.observation_space = _TEXT
        self.action_space = _TEXT
        self.action_meanings: tuple[str, ...] = ()
        self._pending: FeedbackState | None = None
        self._client: Any = FeedbackEnvClient(
            base_url=url, message_timeout_s=message_timeout_s
        ).sync()
        self._call(lambda client: client.connect())

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Starts an episode on the server (with a trainer's pending feedback state)."""
        super().reset(seed=seed)
        data: dict[str, Any] = {"seed": seed}
        if self._pending is not None:
            data["feedback_state"] = _state_fields(self._pending)
            self._pending = None
        result = self._call(lambda client: client.reset(**data))
        return self._unpack(result.observation)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Takes an action (its text, or its index in :attr:`action_meanings`).

        Raises:
            InvalidAction: An index outside :attr:`action_meanings`.
            RemoteEnvError: The server refused it (a text that names no action:
                ``VALIDATION_ERROR`` with the valid choices).
        """
        text = self._text(action)
        result = self._call(lambda client: client.step(FeedbackAction(action=text)))
        observation = result.observation
        obs, info = self._unpack(observation)
        truncated = bool(info.get("truncated", False))
        terminated = observation.done and not truncated
        return obs, float(observation.reward or 0.0), terminated, truncated, info

    def parse_action(self, text: Any) -> int:
        """The index in :attr:`action_meanings` of an action written as listed (case aside).

        Raises:
            InvalidAction: It names none of them (the message lists them).
        """
        if isinstance(text, int):
            return self._index(text)
        wanted = " ".join(str(text).split()).lower()
        for index, meaning in enumerate(self.action_meanings):
            if meaning.lower() == wanted:
                return index
        raise InvalidAction(
            f"{text!r} is not an action of this episode; valid: {', '.join(self.action_meanings)}"
        )

    @property
    def validation_seeds(self) -> tuple[int, ...] | None:
        """The served env's held-out validation seeds (``None``: it has none)."""
        seeds = self.settings.get("validation_seeds")
        return None if seeds is None else tuple(seeds)

    def state(self) -> FeedbackSessionState:
        """The session's state on the server (episode, feedback state, reviews)."""
        return self._call(lambda client: client.state())

    def set_feedback_state(self, state: FeedbackState) -> None:
        """Sends ``state`` with the next reset: from then on the session follows the trainer."""
        self._pending = state

    def feedback_stats(self) -> dict[str, Any]:
        """No local counts: the feedback runs on the server (``state()`` has its reviews)."""
        return {"guide": None, "review": None, "reexplore": None}

    def close(self) -> None:
        """Closes the session (the server closes its env at once)."""
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def _call(self, request: Callable[[Any], Any]) -> Any:
        """``request(client)``, with the client's errors as :class:`RemoteEnvError`."""
        if self._client is None:
            raise RemoteEnvError("this RemoteEnv is closed")
        try:
            return request(self._client)
        except (RuntimeError, ConnectionError, OSError) as error:
            raise RemoteEnvError(f"{self.url}: {error}") from None

    def _index(self, index: int) -> int:
        if not 0 <= index < len(self.action_meanings):
            raise InvalidAction(
                f"action {index} is outside the {len(self.action_meanings)} actions of this step"
            )
        return index

    def _text(self, action: Any) -> str:
        if isinstance(action, str):
            return action
        return self.action_meanings[self._index(int(action))]

    def _unpack(self, observation: FeedbackObservation) -> tuple[str, dict[str, Any]]:
        """The observation's text and the info a local stack would give."""
        if observation.actions:
            self.action_meanings = tuple(observation.actions)
        review: dict[str, Any] = {}
        if observation.review:
            reviews = self.state().reviews
            review = dict(reviews[-1]) if reviews else {"text": observation.review}
        guide = {"text": observation.hint} if observation.hint else {}
        info = {**observation.info, FEEDBACK: {"guide": guide, "review": review}}
        return observation.text, info


def _state_fields(state: FeedbackState) -> dict[str, Any]:
    """The fields of ``state`` that a reset's ``feedback_state`` carries."""
    fields = state.to_dict()
    keys = ("phase", "guide_weight", "review_weight", "hints_masked", "round", "progress")
    return {key: fields[key] for key in keys}
