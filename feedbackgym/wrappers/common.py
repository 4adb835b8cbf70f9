"""Helpers shared by the feedback wrappers: the info key, the wrapper chain, text obs."""

from __future__ import annotations

import string
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from feedbackgym.core import Subgoal
from feedbackgym.protocol import FEEDBACK

__all__ = [
    "FEEDBACK_FIELDS",
    "FeedbackFields",
    "feedback_info",
    "find_wrapper",
    "json_safe",
    "subgoal_library",
    "task_family",
    "text_space_with_room",
    "with_appended_text",
]

FEEDBACK_FIELDS: tuple[str, ...] = ("guide", "review")
"""Fields every ``info["feedback"]`` dict starts with, as ``{}`` (no feedback on this
step), so its shape never varies: Gymnasium's vector envs batch nested dicts key by
key and cannot mix a dict with ``None``."""

EXTRA_TEXT_CHARS = string.ascii_letters + string.digits + string.punctuation + " \n"
_EXTRA_TEXT_SET = frozenset(EXTRA_TEXT_CHARS)

W = TypeVar("W", bound=gym.Wrapper)


class FeedbackFields(dict[str, Any]):
    """``info["feedback"]``: a dict that ``copy.deepcopy`` shares instead of copying.

    It is built fresh on every step and not changed once the step returns;
    SB3's ``DummyVecEnv`` deep-copies every info dict on every step, which for
    a hint and a review payload cost more than the env step itself. Read it,
    do not change it.
    """

    __slots__ = ()

    def __deepcopy__(self, memo: dict[int, Any]) -> FeedbackFields:
        return self


def feedback_info(info: dict[str, Any]) -> dict[str, Any]:
    """Returns ``info["feedback"]``, creating it with :data:`FEEDBACK_FIELDS` if absent.

    Raises:
        ValueError: ``info["feedback"]`` exists but is not a feedback dict
            (the env uses the key for something else).
    """
    existing = info.get(FEEDBACK)
    if existing is None:
        existing = info[FEEDBACK] = FeedbackFields((name, {}) for name in FEEDBACK_FIELDS)
    elif not isinstance(existing, dict) or "guide" not in existing:
        raise ValueError(
            f"info[{FEEDBACK!r}] is already used by the env for something else; "
            "the feedback wrappers write their feedback there (see feedbackgym.protocol)"
        )
    return existing


def find_wrapper(env: gym.Env[Any, Any], kind: type[W]) -> W | None:
    """Returns the outermost wrapper of type ``kind`` in ``env``'s chain, or ``None``."""
    current: Any = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, kind):
            return current
        current = current.env
    return None


def subgoal_library(env: gym.Env[Any, Any]) -> list[Subgoal]:
    """The episode's subgoal library, from the env or a ``WithSubgoals`` wrapper.

    Raises:
        AttributeError: The env meets no subgoal contract.
    """
    try:
        return list(env.get_wrapper_attr("subgoals"))
    except AttributeError:
        raise AttributeError(
            f"{env} has no subgoal library: use a feedbackgym env or wrap it with "
            "WithSubgoals(env, subgoals=[...])"
        ) from None


def task_family(env: gym.Env[Any, Any]) -> str:
    """The env's task family: its id without the version, else its class name.

    Generators get it with each request (``request.task``), and the feedback
    service keeps one generator per family.

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> task_family(gym.make("feedbackgym/OpsIncidentEasy-v0"))
        'feedbackgym/OpsIncidentEasy'
    """
    spec = env.unwrapped.spec
    if spec is None:
        return type(env.unwrapped).__name__
    return f"{spec.namespace}/{spec.name}" if spec.namespace else spec.name


def text_space_with_room(space: spaces.Text, extra: int) -> spaces.Text:
    """A ``Text`` space like ``space`` with ``extra`` more characters and a printable charset."""
    charset = "".join(sorted(set(space.character_set) | set(EXTRA_TEXT_CHARS)))
    return spaces.Text(
        max_length=space.max_length + extra, min_length=space.min_length, charset=charset
    )


def with_appended_text(obs: Any, text: str, limit: int) -> Any:
    """Appends ``text`` (cut to ``limit`` characters) to a text observation or ``obs["text"]``."""
    if not _EXTRA_TEXT_SET.issuperset(text):
        text = "".join(c for c in text if c in _EXTRA_TEXT_SET)
    addition = "\n" + text[: limit - 1]
    if isinstance(obs, str):
        return obs + addition
    return {**obs, "text": obs["text"] + addition}


def text_observation(obs: Any) -> str | None:
    """The text of an observation (a string, or a Dict's ``"text"``), else ``None``."""
    if isinstance(obs, str):
        return obs
    if isinstance(obs, dict) and isinstance(obs.get("text"), str):
        return obs["text"]
    return None


def text_subspace(space: spaces.Space[Any]) -> spaces.Text | None:
    """The env's text observation space (``Text`` or a Dict's ``"text"``), or ``None``."""
    if isinstance(space, spaces.Text):
        return space
    if isinstance(space, spaces.Dict) and isinstance(space.spaces.get("text"), spaces.Text):
        return space.spaces["text"]  # type: ignore[return-value]
    return None


def with_text_room(space: spaces.Space[Any], extra: int) -> spaces.Space[Any]:
    """``space`` with room for ``extra`` more characters of text."""
    if isinstance(space, spaces.Text):
        return text_space_with_room(space, extra)
    assert isinstance(space, spaces.Dict)
    return spaces.Dict({**space.spaces, "text": text_space_with_room(space["text"], extra)})  # type: ignore[arg-type]


def with_vector_fields(
    space: spaces.Space[Any], fields: dict[str, spaces.Space[Any]]
) -> spaces.Dict:
    """``space`` as a Dict with ``fields`` added (a non-Dict space goes under ``"observation"``)."""
    base = dict(space.spaces) if isinstance(space, spaces.Dict) else {"observation": space}
    clash = set(base) & set(fields)
    if clash:
        raise ValueError(f"observation keys {sorted(clash)} are already taken")
    return spaces.Dict({**base, **fields})


def read_only(fields: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Marks feedback arrays read-only, so that every observation can share them.

    A wrapper holds its feedback (a hint, a review summary) for many steps;
    handing out the same read-only arrays instead of fresh copies each step
    keeps the stack cheap, and a consumer that writes into one gets an error
    instead of silently changing later observations.
    """
    for array in fields.values():
        array.flags.writeable = False
    return fields


def add_vector_fields(obs: Any, values: dict[str, np.ndarray]) -> dict[str, Any]:
    """Adds ``values`` to a Dict observation (or wraps a non-Dict one under ``"observation"``)."""
    base = dict(obs) if isinstance(obs, dict) else {"observation": obs}
    base.update(values)
    return base


def json_safe(value: Any) -> Any:
    """Turns numpy scalars and arrays into plain Python values."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def seeded_rng(
    seed: int | None, salt: int, current: np.random.Generator | None
) -> np.random.Generator:
    """A generator for a wrapper's draws: reseeded from ``seed`` when given."""
    if seed is not None:
        return np.random.default_rng([seed, salt])
    return current if current is not None else np.random.default_rng()


def checked_channels(
    channels: tuple[str, ...] | list[str], allowed: tuple[str, ...]
) -> tuple[str, ...]:
    """``channels`` as a tuple; raises ``ValueError`` unless a non-empty subset of ``allowed``."""
    if not channels or set(channels) - set(allowed):
        raise ValueError(f"channels must be a non-empty subset of {allowed}, got {channels}")
    return tuple(channels)


def text_channel_space(space: spaces.Space[Any], extra: int) -> spaces.Space[Any]:
    """The observation space with room for ``extra`` characters of feedback text.

    Raises:
        ValueError: The env has no text observation.
    """
    if text_subspace(space) is None:
        raise ValueError("the 'text' channel needs a text observation (obs_mode='text' or 'both')")
    return with_text_room(space, extra)


def checked_probability(name: str, value: float) -> float:
    """``value`` as a float; raises ``ValueError`` unless it is in ``[0, 1]``."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return float(value)
