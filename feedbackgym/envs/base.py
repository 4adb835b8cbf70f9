"""What the suite's envs share: observation modes, their common arguments, the episode guard."""

from __future__ import annotations

import copy
import string
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from feedbackgym.core import Subgoal, SubgoalTracker
from feedbackgym.errors import FeedbackGymError, InvalidAction

__all__ = [
    "CHARSET",
    "DEFAULT_VALIDATION_SEEDS",
    "OBS_MODES",
    "TRAIN_SEED_LIMIT",
    "VALIDATION_SEED_START",
    "SimulatorEnv",
    "SuiteEnv",
    "TrackedEnv",
    "index_or_text",
    "text_space",
    "validation_seed_blocks",
]

OBS_MODES: tuple[str, ...] = ("vector", "text", "both")
"""Observation modes: a Dict of arrays, the text, or both (the Dict with a ``text`` key)."""

CHARSET: str = string.ascii_letters + string.digits + string.punctuation + " \n"
"""Every character a suite env's text observation may hold (its console prints no other)."""

VALIDATION_SEED_START = 10_000_000
"""Every validation seed is at least this; training seeds stay below."""
TRAIN_SEED_LIMIT = VALIDATION_SEED_START

S = TypeVar("S")


def validation_seed_blocks(difficulties: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """100 held-out seeds per difficulty, in blocks of 1000 from :data:`VALIDATION_SEED_START`.

    Example:
        >>> blocks = validation_seed_blocks(("easy", "hard"))
        >>> blocks["hard"][0], len(blocks["easy"])
        (10001000, 100)
    """
    return {
        difficulty: tuple(
            range(VALIDATION_SEED_START + 1000 * i, VALIDATION_SEED_START + 1000 * i + 100)
        )
        for i, difficulty in enumerate(difficulties)
    }


DEFAULT_VALIDATION_SEEDS: tuple[int, ...] = validation_seed_blocks(("default",))["default"]
"""The held-out seeds of an env without difficulties: the first block."""


def text_space(max_length: int) -> spaces.Text:
    """The ``Text`` space of a suite env's console: 1 to ``max_length`` :data:`CHARSET` characters.

    Example:
        >>> space = text_space(80)
        >>> space.max_length, "Alerts: none" in space, "" in space
        (80, True, False)
    """
    return spaces.Text(max_length=max_length, min_length=1, charset=CHARSET)


def index_or_text(
    action: Any,
    n: int,
    choices: Callable[[], str] | None = None,
    *,
    also: tuple[type, ...] = (),
) -> Any:
    """What every suite's action parser checks first: an index stays in ``Discrete(n)``.

    A 0-d array stands for its item. An integer (Python or numpy, not a
    boolean) comes back as a Python ``int`` when it is in ``range(n)``; text,
    or a value of a type in ``also``, comes back as it is, for the suite to
    parse.

    Args:
        action: What the agent passed to ``step``.
        n: The size of the ``Discrete`` action space.
        choices: Says the valid choices for the error messages (``None``: they
            name none).
        also: Types the suite accepts besides integers and text.

    Returns:
        The index as an ``int``, or ``action`` itself when it is not an integer.

    Raises:
        InvalidAction: An integer outside ``range(n)``, a boolean, or a value
            that is neither an integer, text nor one of ``also``.

    Example:
        >>> import numpy as np
        >>> index_or_text(np.array(3), 5), index_or_text("wait", 5)
        (3, 'wait')
        >>> index_or_text(7, 5, lambda: "valid: an index 0..4")
        Traceback (most recent call last):
        ...
        feedbackgym.errors.InvalidAction: action 7 is outside Discrete(5); valid: an index 0..4
    """
    if isinstance(action, np.ndarray) and action.shape == ():
        action = action.item()
    if isinstance(action, (bool, np.bool_)) or not isinstance(
        action, (int, np.integer, str, *also)
    ):
        raise InvalidAction(
            f"action must be an integer or text, got {type(action).__name__} {action!r}"
            + _said(choices)
        )
    if isinstance(action, (int, np.integer)):
        if not 0 <= action < n:
            raise InvalidAction(f"action {int(action)} is outside Discrete({n})" + _said(choices))
        return int(action)
    return action


def _said(choices: Callable[[], str] | None) -> str:
    return "" if choices is None else f"; {choices()}"


class SuiteEnv(gym.Env[Any, int]):
    """Base of the suite's envs: text/vector observations, an ANSI render, held-out seeds.

    Subclasses call :meth:`_set_common_args` early in their constructor.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    @property
    def validation_seeds(self) -> tuple[int, ...]:
        """The held-out seeds that validation plays (and ``datasets make --split validation``).

        Every one is at least :data:`VALIDATION_SEED_START`, so no training seed
        (below :data:`TRAIN_SEED_LIMIT`) is one. Envs with difficulties hold a
        block per difficulty (:func:`validation_seed_blocks`); the others
        :data:`DEFAULT_VALIDATION_SEEDS`.
        """
        return DEFAULT_VALIDATION_SEEDS

    def _set_common_args(self, *, obs_mode: str, max_steps: int, render_mode: str | None) -> None:
        """Checks and sets ``obs_mode``, ``max_steps`` and ``render_mode``.

        Raises:
            ValueError: One of them is not valid.
        """
        if obs_mode not in OBS_MODES:
            raise ValueError(f"obs_mode must be one of {OBS_MODES}, got {obs_mode!r}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            modes = " or ".join(repr(mode) for mode in (None, *self.metadata["render_modes"]))
            raise ValueError(f"render_mode must be {modes}, got {render_mode!r}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be positive, got {max_steps}")
        self.obs_mode = obs_mode
        self.max_steps = max_steps
        self.render_mode = render_mode

    def _set_observation_space(self, vector: spaces.Dict, text: spaces.Text) -> None:
        """Sets ``observation_space`` for ``obs_mode``: the Dict, the Text, or both.

        Args:
            vector: The ``vector`` mode's space.
            text: The ``text`` mode's space (:func:`text_space`).
        """
        if self.obs_mode == "vector":
            self.observation_space: spaces.Space[Any] = vector
        elif self.obs_mode == "text":
            self.observation_space = text
        else:
            self.observation_space = spaces.Dict({**vector.spaces, "text": text})


class TrackedEnv(SuiteEnv, Generic[S]):
    """A suite env whose episode is a state object plus a subgoal tracker.

    Subclasses keep the running episode's state in ``_state`` and its tracker
    in ``_tracker`` (``None`` between episodes).
    """

    _state: S | None = None
    _tracker: SubgoalTracker | None = None

    def _require_episode(self) -> tuple[S, SubgoalTracker]:
        """The running episode's state and tracker.

        Raises:
            FeedbackGymError: No episode is running.
        """
        if self._state is None or self._tracker is None:
            raise FeedbackGymError("no episode is running; call reset() first")
        return self._state, self._tracker

    @property
    def subgoals(self) -> list[Subgoal]:
        """This episode's subgoal library, in prerequisite order."""
        return list(self._require_episode()[1].subgoals)

    @property
    def state(self) -> S:
        """The hidden state (for oracles, reviews and tests; never shown to the agent)."""
        return self._require_episode()[0]


class SimulatorEnv(TrackedEnv[S]):
    """A tracked env whose whole episode is one deep-copyable state: snapshots are copies.

    Subclasses start an episode from a state in :meth:`_start_episode` (which
    sets ``_state`` and ``_tracker``), keep ``_actions_taken`` (an array) and
    build ``_observation()`` and ``_info(progress)``.
    """

    _actions_taken: np.ndarray

    def _start_episode(self, state: S) -> Any:
        raise NotImplementedError

    def _observation(self) -> Any:
        raise NotImplementedError

    def _info(self, progress: dict[str, bool]) -> dict[str, Any]:
        raise NotImplementedError

    def _console(self) -> str:
        """The episode as console text (what ``"ansi"`` renders)."""
        raise NotImplementedError

    def render(self) -> str | None:
        """Returns the console text when ``render_mode="ansi"``."""
        if self.render_mode != "ansi" or self._state is None:
            return None
        return self._console()

    def close(self) -> None:
        """Releases nothing: the simulator holds no outside resources. Idempotent."""
        self._state = None
        self._tracker = None

    def get_state(self) -> dict[str, Any]:
        """Returns a snapshot of the episode that :meth:`set_state` can restore."""
        state, tracker = self._require_episode()
        return copy.deepcopy(
            {
                "state": state,
                "done": tracker.done,
                "actions_taken": self._actions_taken,
                "rng": self.np_random.bit_generator.state,
            }
        )

    def set_state(self, snapshot: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Restores a snapshot from :meth:`get_state`; returns its observation and info."""
        snapshot = copy.deepcopy(snapshot)
        self._start_episode(snapshot["state"])
        _, tracker = self._require_episode()
        tracker.restore(snapshot["done"])
        self._actions_taken[:] = snapshot["actions_taken"]
        self.np_random.bit_generator.state = snapshot["rng"]
        return self._observation(), self._info(dict(tracker.done))
