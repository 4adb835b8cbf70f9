"""The trainer's view of an env stack: one flat float32 observation and a small info.

Gymnasium's vector envs stack Dict observations key by key and merge every
info dict key by key, nested ones included; with the feedback stack's infos
that costs more than the env step itself. :class:`TrainerView` (the outermost
wrapper, outside any recorder) hands a trainer only what it reads:

* the observation as one ``float32`` vector (``Discrete`` keys one-hot, the
  text, when asked for, as byte codes after them; see :class:`FlatLayout`;
  with ``masks``, the env's ``action_masks()`` as 0/1 columns at the end);
* ``info["env_reward"]`` and ``info["is_success"]`` (always present, so they
  batch without masks);
* review credit through :meth:`TrainerView.take_credits`, called once a round
  through the vector env's ``call`` (subprocess workers too), keyed by episode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from feedbackgym.entity_view import EntityLayout, entity_view_of
from feedbackgym.protocol import ENV_REWARD, FEEDBACK, IS_SUCCESS

__all__ = ["TEXT_VOCAB", "Credit", "FlatLayout", "TrainerView", "trainer_env"]

TEXT_VOCAB = 128
"""Byte codes of the text segment are 7-bit (0 is padding)."""


@dataclass(frozen=True)
class Credit:
    """A review's credit for one episode of one env.

    Attributes:
        episode: The episode's number in its env (0 for the first since the reset with a seed).
        start: The episode step the first value belongs to.
        values: One value per step from ``start``.
    """

    episode: int
    start: int
    values: tuple[float, ...]


class FlatLayout:
    """Where each key of a (Dict) observation goes in one flat vector.

    Args:
        space: The observation space: a ``Dict`` of ``Box``/``MultiBinary``/
            ``Discrete`` (``Text`` keys are left out, or kept as the last
            ``text_length`` byte codes), or one ``Box``.
        text_length: Characters of the ``text`` key to keep (0: none).

    Example:
        >>> from gymnasium import spaces
        >>> space = spaces.Dict({"a": spaces.Discrete(3), "b": spaces.Box(0, 1, (2,))})
        >>> FlatLayout(space).flatten({"a": 2, "b": [0.5, 0.25]}).tolist()
        [0.0, 0.0, 1.0, 0.5, 0.25]
    """

    def __init__(self, space: spaces.Space[Any], text_length: int = 0) -> None:
        self._parts: list[tuple[str | None, slice, int]] = []
        """(key, columns, shape) of each numeric part; shape 0: one-hot, 1: flat, 2: reshape."""
        subspaces = space.spaces if isinstance(space, spaces.Dict) else {None: space}
        offset = 0
        for key, sub in subspaces.items():
            if isinstance(sub, spaces.Text):
                continue
            if isinstance(sub, spaces.Discrete):
                size, shape = int(sub.n), 0
            elif isinstance(sub, (spaces.Box, spaces.MultiBinary)):
                size, shape = int(np.prod(sub.shape or (1,))), 1 if len(sub.shape) == 1 else 2
            else:
                raise TypeError(
                    f"cannot flatten observation key {key!r} of type {type(sub).__name__}"
                )
            self._parts.append((key, slice(offset, offset + size), shape))
            offset += size
        self.numeric_size = offset
        if text_length and not (
            isinstance(space, spaces.Dict) and isinstance(space.spaces.get("text"), spaces.Text)
        ):
            raise ValueError("text_length needs a 'text' key (make the env with obs_mode='both')")
        self.text_length = text_length
        self.size = offset + text_length

    def columns_of(self, keys: tuple[str, ...]) -> tuple[int, ...]:
        """The flat columns of the numeric ``keys`` the observation has (others are skipped).

        Example:
            >>> from gymnasium import spaces
            >>> space = spaces.Dict({"a": spaces.Discrete(3), "b": spaces.Box(0, 1, (2,))})
            >>> FlatLayout(space).columns_of(("b", "missing"))
            (3, 4)
        """
        wanted = set(keys)
        return tuple(
            column
            for key, columns, _ in self._parts
            if key in wanted
            for column in range(columns.start, columns.stop)
        )

    def flatten(self, obs: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Writes ``obs`` into ``out`` (a new array if ``None``) and returns it."""
        row = np.zeros(self.size, np.float32) if out is None else out
        for key, columns, shape in self._parts:
            value = obs if key is None else obs[key]
            if shape == 0:  # one-hot
                if out is not None:
                    row[columns] = 0.0
                row[columns.start + int(value)] = 1.0
            elif shape == 1:  # already flat (or a list): no reshape
                row[columns] = value
            else:
                row[columns] = np.ravel(value)
        if self.text_length:
            codes = np.frombuffer(
                str(obs["text"]).encode("ascii", "replace")[-self.text_length :], np.uint8
            )
            text = row[self.numeric_size :]
            text[:] = 0.0
            text[: len(codes)] = np.maximum(codes % TEXT_VOCAB, 1)
        return row


class TrainerView(gym.Wrapper[np.ndarray, Any, Any, Any]):
    """The outermost wrapper of a trainer's envs: a flat observation, a small info.

    Args:
        env: The env stack (``feedbackgym.make(...)``, recorder inside).
        text_length: Characters of the text observation to keep as byte codes.
        masks: Append the env's ``action_masks()`` (one 0/1 column an action)
            to every observation, for a masked policy.

    Raises:
        ValueError: ``masks`` on an env without ``action_masks``.

    Example:
        >>> import feedbackgym
        >>> env = TrainerView(feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", "review"))
        >>> obs, info = env.reset(seed=0)
        >>> obs.dtype, sorted(info)
        (dtype('float32'), ['env_reward', 'is_success'])
    """

    def __init__(self, env: gym.Env[Any, Any], text_length: int = 0, masks: bool = False) -> None:
        super().__init__(env)
        self.layout = FlatLayout(env.observation_space, text_length)
        self._action_masks: Any = None
        width = self.layout.size
        if masks:
            try:
                self._action_masks = env.get_wrapper_attr("action_masks")
            except AttributeError:
                raise ValueError(
                    f"a masked policy needs action_masks(), which {env.spec and env.spec.id or env}"
                    " does not have"
                ) from None
            width += int(env.action_space.n)  # type: ignore[attr-defined]
        self._width = width
        self.observation_space = spaces.Box(-np.inf, np.inf, (width,), np.float32)
        self._episode = -1
        self._credits: list[Credit] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Resets the env; the info holds only the trainer's keys."""
        obs, info = self.env.reset(seed=seed, options=options)
        if seed is not None:  # a seeded reset starts the episode count (and its credits) anew
            self._episode, self._credits = 0, []
        else:
            self._episode += 1
        return self._flat(obs), {ENV_REWARD: 0.0, IS_SUCCESS: False}

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps the env; keeps the step's review credit for :meth:`take_credits`."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        feedback = info.get(FEEDBACK)
        credit = feedback.get("credit") if feedback else None
        if credit:
            values = tuple(float(v) for v in credit["values"])
            self._credits.append(Credit(self._episode, int(credit["start"]), values))
        slim = {
            ENV_REWARD: float(info.get(ENV_REWARD, reward)),
            IS_SUCCESS: bool(info.get(IS_SUCCESS, False)),
        }
        return self._flat(obs), reward, terminated, truncated, slim

    def _flat(self, obs: Any) -> np.ndarray:
        """The flat observation, the action mask after it when asked for."""
        if self._action_masks is None:
            return self.layout.flatten(obs)
        row = np.empty(self._width, np.float32)
        self.layout.flatten(obs, out=row[: self.layout.size])
        row[self.layout.size :] = self._action_masks()
        return row

    def entity_layout(self) -> EntityLayout | None:
        """Where the env's entity view lies in the flat observation (``None``: no view)."""
        view = entity_view_of(self.env)
        if view is None:
            return None
        return EntityLayout(self.env.observation_space, view)  # type: ignore[arg-type]

    def critic_columns(self, keys: tuple[str, ...]) -> tuple[int, ...]:
        """The flat columns of ``keys`` (:meth:`FlatLayout.columns_of`): a critic's own."""
        return self.layout.columns_of(keys)

    def take_credits(self) -> list[Credit]:
        """The review credits since the last call (called once a round)."""
        credits, self._credits = self._credits, []
        return credits


def trainer_env(
    env_id: str,
    feedback: Any,
    text_length: int = 0,
    record: Any = None,
    masks: bool = False,
    **env_kwargs: Any,
) -> TrainerView:
    """The stack ``feedbackgym.make(env_id, feedback, record=record, **env_kwargs)`` in a view.

    A module-level builder: ``functools.partial(trainer_env, ...)`` pickles
    without the trainer (worker processes do not import torch to build envs).
    """
    from feedbackgym.wrappers.stack import make

    return TrainerView(make(env_id, feedback, record=record, **env_kwargs), text_length, masks)
