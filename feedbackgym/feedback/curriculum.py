"""The task curriculum: how wide the training tasks are, moved by the training success.

A :class:`CurriculumRule` is owned by the run's
:class:`~feedbackgym.control.FeedbackController` (so it resumes with it) and
fed each round's training success; the width it decides travels in every
:class:`~feedbackgym.protocol.FeedbackState` as ``curriculum``, and the
stack's :class:`~feedbackgym.wrappers.curriculum.WidenTasks` hands it to each
training env at its next reset. The gate keeps the training success inside
a band (reverse and gated curricula: Florensa et al.'s ``[0.1, 0.9]``), where a
group of episodes both succeeds and fails: the chance that a group of ``G``
carries signal is ``1 - p^G - (1 - p)^G`` at success ``p`` (OpenEnv's
curriculum sampler), logged each round as ``signal``.

Example:
    >>> from feedbackgym.config import CurriculumConfig
    >>> rule = CurriculumRule(CurriculumConfig(min_rounds=2, smoothing=1.0))
    >>> [rule.observe(success) for success in (0.9, 0.9, 0.9, 0.95, 0.0, 0.0)]
    [0.0, 0.25, 0.25, 0.5, 0.5, 0.25]
    >>> round(rule.signal, 3)  # a group of 8 at 0% success carries none
    0.0
"""

from __future__ import annotations

import math
from typing import Any

from feedbackgym.config import CurriculumConfig

__all__ = ["CurriculumRule", "signal_share"]


def signal_share(success: float, group: int) -> float:
    """The chance that a group of ``group`` episodes at ``success`` has both outcomes.

    Example:
        >>> signal_share(0.5, 8), signal_share(1.0, 8)
        (0.9921875, 0.0)
    """
    return 1.0 - success**group - (1.0 - success) ** group


class CurriculumRule:
    """Widens the training tasks as training success rises, narrows them when it collapses.

    Args:
        config: The gate's thresholds, step and smoothing
            (:class:`~feedbackgym.config.CurriculumConfig`).

    Attributes:
        width: The width in force, in ``[0, 1]`` (1: the env's own preset).
        average: The smoothed training success at that width (``None``: no round yet).
        rounds_at_width: Rounds reported since the width last moved.
        signal: The share of groups that carry signal at the last round's success.
        moves: Each move so far, as ``(rounds observed, new width)``.
    """

    def __init__(self, config: CurriculumConfig) -> None:
        self.config = config
        self.width = config.start
        self.average: float | None = None
        self.rounds_at_width = 0
        self.signal = 0.0
        self.observed = 0
        self.moves: list[tuple[int, float]] = []

    def observe(self, success: float) -> float:
        """Adds one round's training success; returns the width from the next round on."""
        self.observed += 1
        if not math.isfinite(success):
            return self.width
        config = self.config
        self.signal = signal_share(success, config.group)
        weight = config.smoothing
        self.average = (
            success if self.average is None else ((1.0 - weight) * self.average + weight * success)
        )
        self.rounds_at_width += 1
        if self.rounds_at_width < config.min_rounds:
            return self.width
        if self.average > config.widen_above and self.width < 1.0:
            self._move(min(1.0, self.width + config.step))
        elif self.average < config.narrow_below and self.width > 0.0:
            self._move(max(0.0, self.width - config.step))
        return self.width

    def _move(self, width: float) -> None:
        self.width = round(width, 9)  # steps of 0.1 read 0.3, not 0.30000000000000004
        self.average, self.rounds_at_width = None, 0
        self.moves.append((self.observed, self.width))

    def state_dict(self) -> dict[str, Any]:
        """The rule's state, JSON-safe (a resumed run goes on from it)."""
        return {
            "width": self.width,
            "average": self.average,
            "rounds_at_width": self.rounds_at_width,
            "signal": self.signal,
            "observed": self.observed,
            "moves": [list(move) for move in self.moves],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores :meth:`state_dict` output."""
        self.width = float(state["width"])
        self.average = None if state["average"] is None else float(state["average"])
        self.rounds_at_width = int(state["rounds_at_width"])
        self.signal = float(state["signal"])
        self.observed = int(state["observed"])
        self.moves = [(int(r), float(w)) for r, w in state["moves"]]
