"""``FeedbackWrapper``: what the guide and review wrappers share."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np

from feedbackgym.config import checked_source
from feedbackgym.feedback.generators import OffStepCall
from feedbackgym.feedback.sources import make_source
from feedbackgym.wrappers.common import (
    checked_channels,
    checked_probability,
    task_family,
    text_channel_space,
)

__all__ = ["DEFAULT_MAX_SUBGOALS", "LATENCY_SAMPLES", "FeedbackWrapper", "subgoal_capacity"]

LATENCY_SAMPLES = 4096
"""Most feedback latencies kept between two :meth:`FeedbackWrapper.feedback_stats` calls."""
DEFAULT_MAX_SUBGOALS = 16
"""Size of the vector fields over the subgoal library, for an env that does not say its own."""

T = TypeVar("T")


def subgoal_capacity(env: gym.Env[Any, Any], max_subgoals: int | None) -> int:
    """``max_subgoals``, or when ``None`` the env's own (else :data:`DEFAULT_MAX_SUBGOALS`).

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> env = gym.make("feedbackgym/OpsIncidentEasy-v0")
        >>> subgoal_capacity(env, None), subgoal_capacity(env, 8)
        (16, 8)
    """
    if max_subgoals is not None:
        return max_subgoals
    return int(getattr(env.unwrapped, "max_subgoals", DEFAULT_MAX_SUBGOALS))


class FeedbackWrapper(gym.Wrapper[Any, Any, Any, Any], gym.utils.RecordConstructorArgs):
    """A wrapper that gives feedback on some channels, from a generator or a service.

    It holds the channels, the generator's call (:class:`OffStepCall`: the
    generator given, the built-in one, or the client of a service), the
    weight (the chance that feedback that is due is given), the seeded
    generator of those draws, and the counters and latencies that
    :meth:`feedback_stats` reports. Subclasses declare what they give in the
    class attributes below and call :meth:`_setup` from their constructor.
    """

    kind: str = "feedback"
    """What the wrapper gives (``"guide"``, ``"review"``), for messages."""
    counters: tuple[str, ...] = ()
    """Names of the integer counters :meth:`feedback_stats` reports and resets."""
    offered: tuple[str, ...] = ()
    """The channels the wrapper offers."""
    built_in: Callable[[], Any]
    """Makes the built-in generator (used when neither a generator nor a service is given)."""
    text_limit: int = 0
    """Most characters the text channel adds to an observation."""

    def _setup(
        self,
        env: gym.Env[Any, Any],
        *,
        channels: tuple[str, ...] | list[str],
        generator: Callable[[], Any] | None,
        source: str,
        deadline_ms: float,
        max_subgoals: int,
    ) -> None:
        """Wraps ``env`` and sets up the shared parts.

        Args:
            env: The env to wrap.
            channels: The channels feedback goes to.
            generator: Makes the generator the user gave (``None``: none given).
            source: ``"local"`` or a service's address.
            deadline_ms: Longest a step waits for a service or an off-step generator.
            max_subgoals: Size of the vector fields over the subgoal library
                (:func:`subgoal_capacity`).

        Raises:
            ValueError: A channel not in :attr:`offered`, an unknown source, a
                deadline that is not positive, or both a generator and a service.
        """
        gym.Wrapper.__init__(self, env)
        self.channels = checked_channels(channels, self.offered)
        self.max_subgoals = max_subgoals
        if deadline_ms <= 0:
            raise ValueError(f"deadline_ms must be positive, got {deadline_ms}")
        self.deadline_ms = deadline_ms
        if generator is not None and checked_source(source) != "local":
            raise ValueError(
                f"pass either a {self.kind} generator (in-process) or source={source!r} "
                "(a service runs its own: feedbackgym serve-feedback --generator)"
            )
        remote = make_source(source, deadline_ms=deadline_ms)
        self._remote = remote
        made = remote if remote is not None else (generator or self.built_in)()
        self._call = OffStepCall(made, "hint" if self.kind == "guide" else "review")
        self._task = task_family(env)
        if "text" in self.channels:
            self.observation_space = text_channel_space(env.observation_space, self.text_limit)
        self._rng: np.random.Generator | None = None
        self.latencies_ms: deque[float] = deque(maxlen=LATENCY_SAMPLES)
        for name in self.counters:
            setattr(self, name, 0)

    def set_weight(self, weight: float) -> None:
        """Sets the chance that feedback that is due is given (a hint, a review)."""
        self.weight = checked_probability(f"{self.kind} weight", weight)

    def feedback_stats(self) -> dict[str, Any]:
        """Counts and latencies since the last call, for trainers to log; resets them."""
        stats: dict[str, Any] = {name: getattr(self, name) for name in self.counters}
        stats["latencies_ms"] = list(self.latencies_ms)
        stats["misses"] = self._call.misses
        for name in self.counters:
            setattr(self, name, 0)
        self.latencies_ms.clear()
        return stats

    def _timed(self, make: Callable[[], T]) -> T:
        """Returns ``make()``, keeping how long it took in ``latencies_ms``."""
        start = time.perf_counter()
        result = make()
        self.latencies_ms.append((time.perf_counter() - start) * 1000.0)
        return result

    @property
    def generator(self) -> Any:
        """The guide or reviewer in use (the built-in one, the user's, or a service client)."""
        return self._call.generator

    def close(self) -> None:
        """Closes the env, the generator's worker thread and the service client, if any."""
        self._call.close()
        if self._remote is not None:
            self._remote.close()
        super().close()
