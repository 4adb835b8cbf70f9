"""What the suite's envs share: observation modes, their common arguments, the episode guard."""

from __future__ import annotations

import copy
from typing import Any, Generic, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from feedbackgym.core import Subgoal, SubgoalTracker
from feedbackgym.errors import FeedbackGymError

__all__ = [
    "DEFAULT_VALIDATION_SEEDS",
    "OBS_MODES",
    "TRAIN_SEED_LIMIT",
    "VALIDATION_SEED_START",
    "SimulatorEnv",
    "SuiteEnv",
    "TrackedEnv",
    "validation_seed_blocks",
]

OBS_MODES: tuple[str, ...] = ("vector", "text", "both")
"""Observation modes: a Dict of arrays, the text, or both (the Dict with a ``text`` key)."""

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
        """Sets ``observation_space`` for ``obs_mode``: the Dict, the Text, or both."""
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
