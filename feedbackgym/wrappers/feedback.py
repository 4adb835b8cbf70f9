"""``FeedbackWrapper``: what the guide and review wrappers share."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np

from feedbackgym.feedback.sources import make_source
from feedbackgym.wrappers.common import checked_channels, checked_probability, text_channel_space

__all__ = ["LATENCY_SAMPLES", "FeedbackWrapper"]

LATENCY_SAMPLES = 4096
"""Most feedback latencies kept between two :meth:`FeedbackWrapper.feedback_stats` calls."""

T = TypeVar("T")


class FeedbackWrapper(gym.Wrapper[Any, Any, Any, Any], gym.utils.RecordConstructorArgs):
    """A wrapper that gives feedback on some channels, from a local or remote source.

    It holds the channels, the source (``None`` when local), the weight (the
    chance that feedback that is due is given), the seeded generator of those
    draws, and the counters and latencies that :meth:`feedback_stats` reports.
    Subclasses name their counters in ``counters`` and call :meth:`_setup`
    from their constructor.
    """

    kind: str = "feedback"
    """What the wrapper gives (``"guide"``, ``"review"``), for messages."""
    counters: tuple[str, ...] = ()
    """Names of the integer counters :meth:`feedback_stats` reports and resets."""

    def _setup(
        self,
        env: gym.Env[Any, Any],
        *,
        channels: tuple[str, ...] | list[str],
        allowed: tuple[str, ...],
        source: str,
        deadline_ms: float,
        max_subgoals: int,
        text_limit: int,
    ) -> None:
        """Wraps ``env`` and sets up the shared parts.

        Raises:
            ValueError: A channel not in ``allowed``, or an unknown source.
        """
        gym.Wrapper.__init__(self, env)
        self.channels = checked_channels(channels, allowed)
        self.max_subgoals = max_subgoals
        self._source = make_source(source, deadline_ms=deadline_ms)
        if "text" in self.channels:
            self.observation_space = text_channel_space(env.observation_space, text_limit)
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
        stats["misses"] = getattr(self._source, "misses", 0)
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

    def close(self) -> None:
        """Closes the env and the remote source, if any."""
        if self._source is not None:
            self._source.close()
        super().close()
