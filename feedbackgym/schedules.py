"""Schedules: map training progress to guide and review weights.

Every arm of a comparison is a schedule: :class:`GuideReviewSchedule` (guide
first, a linear cross-fade, then review), its reverse, and the constant arms
(sparse, guide only, review only); an arm's ``+shaping`` variant has the same
schedule (the shaping is in the env stack). Progress is counted in the schedule's
``unit`` (``"rounds"`` or ``"steps"``) out of ``total``; SB3's
``progress_remaining`` (1 → 0) is accepted by :meth:`Schedule.at_remaining`
and by calling the schedule, which returns the guide weight as SB3's
schedules do.

The adaptive rule (:class:`TrendRule`) reads the trend the trainer reports
and moves the switch (its defaults are :class:`~feedbackgym.config.AdaptiveConfig`'s:
the return trend, a success floor of 30%): if the mean loss fell less than ``sooner_below`` (1%)
over the last ``window`` (10) rounds, switch sooner; more than ``later_above``
(5%), stay longer; always inside ``[min_switch, max_switch]``. With
``min_success`` set, the guide also stays on while the training success rate
(reported as ``success``) is under that floor, and a flat trend does not bring
the switch sooner: a policy that has not learned yet gains nothing from a
switch (held up to ``max_switch``; the floor applies to guide-then-review, not
to the reversed order).
"""

from __future__ import annotations

import logging
import math
from collections import deque
from dataclasses import dataclass
from typing import Any

from feedbackgym.config import (
    ARM_PRESETS,
    ARM_SPEAKERS,
    LLM_ONLY_SUFFIXES,
    VECTOR_ONLY_SUFFIXES,
    AdaptiveConfig,
    ScheduleConfig,
    arm_suffixes,
    split_arm,
)

__all__ = [
    "ARMS",
    "LLM_ARMS",
    "ConstantSchedule",
    "GuideReviewSchedule",
    "Schedule",
    "ScheduleState",
    "TWO_PHASE_ARMS",
    "TrendRule",
    "make_schedule",
    "schedule_from_config",
]

logger = logging.getLogger(__name__)

UNITS = ("rounds", "steps")

_ADAPTIVE = AdaptiveConfig()
"""The rule's defaults live in the config (:class:`~feedbackgym.config.AdaptiveConfig`)."""


@dataclass(frozen=True)
class ScheduleState:
    """Where a schedule stands.

    Attributes:
        phase: ``"guide"``, ``"fade"``, ``"review"`` (or ``"none"`` for sparse).
        guide_weight: Probability that a due hint is given.
        review_weight: Probability that a finished episode is reviewed.
        progress: The progress it was evaluated at, in the schedule's unit.
    """

    phase: str
    guide_weight: float
    review_weight: float
    progress: float

    def to_dict(self) -> dict[str, Any]:
        """Returns the state as JSON-safe data."""
        return {
            "phase": self.phase,
            "guide_weight": self.guide_weight,
            "review_weight": self.review_weight,
            "progress": self.progress,
        }


class TrendRule:
    """Moves a schedule's switch from the training trend.

    Args:
        metric: ``"loss"`` (a falling loss means guidance still helps) or
            ``"return"`` (a rising return means guidance still helps).
        window: Rounds the trend is measured over.
        sooner_below: Relative improvement under which the switch comes sooner.
        later_above: Relative improvement over which the switch comes later.
        shift: How far one decision moves the switch, as a fraction of training.
        min_switch: Earliest switch, as a fraction of training.
        max_switch: Latest switch, as a fraction of training.
        min_success: Training success rate under which the guide phase is
            held (0: no floor). The schedule holds it one round at a time, up
            to ``max_switch``; reversed schedules (review first) ignore it.

    Example:
        >>> rule = TrendRule(window=4)
        >>> [rule.observe(loss) for loss in (1.0, 1.0, 1.0, 1.0)][-1]
        -1
    """

    def __init__(
        self,
        metric: str = _ADAPTIVE.metric,
        *,
        window: int = _ADAPTIVE.window,
        sooner_below: float = _ADAPTIVE.sooner_below,
        later_above: float = _ADAPTIVE.later_above,
        shift: float = _ADAPTIVE.shift,
        min_switch: float = _ADAPTIVE.min_switch,
        max_switch: float = _ADAPTIVE.max_switch,
        min_success: float = _ADAPTIVE.min_success,
    ) -> None:
        if metric not in ("loss", "return"):
            raise ValueError(f"metric must be 'loss' or 'return', got {metric!r}")
        if window < 2:
            raise ValueError(f"window must be at least 2, got {window}")
        if not 0 <= sooner_below <= later_above:
            raise ValueError("need 0 <= sooner_below <= later_above")
        if not 0 <= min_switch <= max_switch <= 1:
            raise ValueError("need 0 <= min_switch <= max_switch <= 1")
        if not 0 <= min_success <= 1:
            raise ValueError(f"min_success must be a fraction in [0, 1], got {min_success}")
        self.metric = metric
        self.window = window
        self.sooner_below = sooner_below
        self.later_above = later_above
        self.shift = shift
        self.min_switch = min_switch
        self.max_switch = max_switch
        self.min_success = min_success
        self._values: deque[float] = deque(maxlen=window)
        self.last_improvement = 0.0

    def improvement(self) -> float | None:
        """Relative improvement over the window (first half vs second half), or None."""
        if len(self._values) < self.window:
            return None
        values = list(self._values)
        half = self.window // 2
        before = sum(values[:half]) / half
        after = sum(values[-half:]) / half
        change = (before - after) if self.metric == "loss" else (after - before)
        return change / max(abs(before), 1e-12)

    def observe(self, value: float) -> int:
        """Adds one round's value; returns -1 (switch sooner), +1 (later) or 0."""
        if not math.isfinite(value):
            return 0
        self._values.append(float(value))
        improvement = self.improvement()
        if improvement is None:
            return 0
        self.last_improvement = improvement
        if improvement < self.sooner_below:
            decision = -1
        elif improvement > self.later_above:
            decision = 1
        else:
            return 0
        self._values.clear()
        return decision

    def state_dict(self) -> dict[str, Any]:
        """What the rule has seen (the trend window), as JSON-safe data."""
        return {"values": list(self._values), "last_improvement": self.last_improvement}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned (a resumed run goes on where it was)."""
        self._values = deque((float(v) for v in state["values"]), maxlen=self.window)
        self.last_improvement = float(state["last_improvement"])

    def __repr__(self) -> str:
        return (
            f"TrendRule({self.metric!r}, window={self.window}, sooner_below={self.sooner_below}, "
            f"later_above={self.later_above}, shift={self.shift}, "
            f"min_switch={self.min_switch}, max_switch={self.max_switch}, "
            f"min_success={self.min_success})"
        )


class Schedule:
    """Base class: maps progress to a :class:`ScheduleState`.

    Args:
        total: Length of training in ``unit``.
        unit: ``"rounds"`` or ``"steps"``.
    """

    name = "schedule"

    def __init__(self, *, total: float = 100, unit: str = "rounds") -> None:
        if unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
        if total <= 0:
            raise ValueError(f"total must be positive, got {total}")
        self.total = float(total)
        self.unit = unit

    def state(self, progress: float) -> ScheduleState:
        """Returns the state at ``progress`` (in ``unit``, from 0 to ``total``)."""
        raise NotImplementedError

    def at_fraction(self, fraction: float) -> ScheduleState:
        """Returns the state when ``fraction`` (0 → 1) of training is done."""
        return self.state(min(max(fraction, 0.0), 1.0) * self.total)

    def at_remaining(self, progress_remaining: float) -> ScheduleState:
        """Returns the state for SB3's ``progress_remaining`` (1 at start, 0 at the end)."""
        return self.at_fraction(1.0 - progress_remaining)

    def __call__(self, progress_remaining: float) -> float:
        """SB3 schedule convention: the guide weight for ``progress_remaining``."""
        return self.at_remaining(progress_remaining).guide_weight

    def report(self, progress: float, **metrics: float) -> None:
        """Takes the trainer's trend (``loss=...``, ``mean_return=...``); no-op by default."""

    def state_dict(self) -> dict[str, Any]:
        """What reports have changed, as JSON-safe data (nothing by default)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned; no-op by default."""


class ConstantSchedule(Schedule):
    """Fixed weights: the sparse, guide-only and review-only arms.

    Example:
        >>> ConstantSchedule(1.0, 0.0).at_fraction(0.9).phase
        'guide'
    """

    def __init__(
        self, guide_weight: float, review_weight: float, *, total: float = 100, unit: str = "rounds"
    ) -> None:
        super().__init__(total=total, unit=unit)
        for name, value in (("guide_weight", guide_weight), ("review_weight", review_weight)):
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        self.guide_weight = float(guide_weight)
        self.review_weight = float(review_weight)

    def state(self, progress: float) -> ScheduleState:
        """Returns the same weights at any progress."""
        if self.guide_weight and self.review_weight:
            phase = "both"
        elif self.guide_weight:
            phase = "guide"
        elif self.review_weight:
            phase = "review"
        else:
            phase = "none"
        return ScheduleState(phase, self.guide_weight, self.review_weight, float(progress))

    def __repr__(self) -> str:
        return (
            f"ConstantSchedule(guide_weight={self.guide_weight}, "
            f"review_weight={self.review_weight}, total={self.total:g}, unit={self.unit!r})"
        )


class GuideReviewSchedule(Schedule):
    """Guide first, a linear cross-fade, then review (or the reverse).

    Args:
        switch_at: Where the fade starts, as a fraction of training (0.4: guide
            for the first 40%).
        fade: Length of the linear cross-fade, in ``unit`` (5 rounds).
        total: Length of training, in ``unit``.
        unit: ``"rounds"`` or ``"steps"``.
        adaptive: A :class:`TrendRule` that moves the switch, or ``None``.
        reverse: Review first, then guide (the reversed arm).

    Example:
        >>> s = GuideReviewSchedule(switch_at=0.4, fade=5, total=100)
        >>> [(st.phase, st.guide_weight) for st in (s.state(10), s.state(42.5), s.state(60))]
        [('guide', 1.0), ('fade', 0.5), ('review', 0.0)]
    """

    def __init__(
        self,
        switch_at: float = 0.4,
        fade: float = 5,
        *,
        total: float = 100,
        unit: str = "rounds",
        adaptive: TrendRule | None = None,
        reverse: bool = False,
    ) -> None:
        super().__init__(total=total, unit=unit)
        if not 0 <= switch_at <= 1:
            raise ValueError(f"switch_at must be a fraction in [0, 1], got {switch_at}")
        if fade < 0:
            raise ValueError(f"fade must be non-negative, got {fade}")
        self.switch_at = float(switch_at)
        self.initial_switch_at = self.switch_at
        self.fade = float(fade)
        self.adaptive = adaptive
        self.reverse = reverse
        self.history: list[dict[str, Any]] = []
        self._reported = -1.0
        """Progress at the last report: reports a round apart give a round's length in ``unit``."""

    @property
    def switch_step(self) -> float:
        """Where the fade starts, in ``unit``."""
        return self.switch_at * self.total

    def state(self, progress: float) -> ScheduleState:
        """Returns phase and weights at ``progress`` (in ``unit``)."""
        start = self.switch_step
        if progress < start:
            phase, first = "first", 1.0
        elif self.fade > 0 and progress < start + self.fade:
            phase, first = "fade", 1.0 - (progress - start) / self.fade
        else:
            phase, first = "second", 0.0
        names = ("review", "guide") if self.reverse else ("guide", "review")
        if phase != "fade":
            phase = names[0] if phase == "first" else names[1]
        guide, review = (1.0 - first, first) if self.reverse else (first, 1.0 - first)
        return ScheduleState(phase, guide, review, float(progress))

    def report(self, progress: float, **metrics: float) -> None:
        """Feeds the adaptive rule; moves the switch while the first phase lasts.

        Args:
            progress: Current progress, in ``unit``.
            **metrics: ``loss``, ``mean_return`` and/or ``success`` (the
                training success rate) for this round.
        """
        rule = self.adaptive
        if rule is None or progress >= self.switch_step:
            return
        key = "loss" if rule.metric == "loss" else "mean_return"
        success = metrics.get("success")
        below_floor = success is not None and success < rule.min_success and not self.reverse
        if key in metrics:
            decision = rule.observe(float(metrics[key]))
            if decision > 0 or (decision < 0 and not below_floor):
                verdict = "switch sooner" if decision < 0 else "stay longer"
                self._move(
                    progress,
                    self.switch_at + decision * rule.shift,
                    f"{key} improved {rule.last_improvement:.1%} over {rule.window} rounds: "
                    f"{verdict}",
                )
        spacing = progress - self._reported if 0 <= self._reported < progress else 1.0
        self._reported = progress
        if below_floor and progress + spacing >= self.switch_step:
            self._move(  # the next round (progress + spacing) stays in the guide phase
                progress,
                (progress + 2 * spacing) / self.total,
                f"training success under the floor {rule.min_success:.0%}: hold the guide",
                hold=True,
            )

    def _move(self, progress: float, switch_at: float, reason: str, *, hold: bool = False) -> None:
        """Moves the switch to ``switch_at``, kept in the rule's range and not in the past.

        A ``hold`` only ever moves the switch later, and a hold lasting many
        rounds is one history entry.
        """
        assert self.adaptive is not None
        rule = self.adaptive
        old = self.switch_at
        floor = max(rule.min_switch, progress / self.total)
        new = min(max(switch_at, floor), rule.max_switch)
        if new == old or (hold and new < old):
            return
        self.switch_at = new
        if hold and self.history and self.history[-1]["reason"] == reason:
            self.history[-1]["to"] = new
            return
        self.history.append({"progress": progress, "from": old, "to": new, "reason": reason})
        logger.info("schedule switch moved from %.2f to %.2f (%s)", old, new, reason)

    def state_dict(self) -> dict[str, Any]:
        """The switch as moved so far, its history and the rule's trend window.

        Example:
            >>> rule = {"metric": "loss", "window": 2, "min_success": 0.0}
            >>> s = GuideReviewSchedule(total=10, adaptive=TrendRule(**rule))
            >>> s.report(0, loss=1.0); s.report(1, loss=1.0)  # flat: switch sooner
            >>> copy = GuideReviewSchedule(total=10, adaptive=TrendRule(**rule))
            >>> copy.load_state_dict(s.state_dict())
            >>> copy.switch_at == s.switch_at < 0.4, copy.history == s.history
            (True, True)
        """
        return {
            "switch_at": self.switch_at,
            "history": [dict(entry) for entry in self.history],
            "rule": self.adaptive.state_dict() if self.adaptive is not None else None,
            "reported": self._reported,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned."""
        self.switch_at = float(state["switch_at"])
        self.history = [dict(entry) for entry in state["history"]]
        self._reported = float(state.get("reported", -1.0))
        if self.adaptive is not None and state.get("rule") is not None:
            self.adaptive.load_state_dict(state["rule"])

    def __repr__(self) -> str:
        return (
            f"GuideReviewSchedule(switch_at={self.switch_at:g}, fade={self.fade:g}, "
            f"total={self.total:g}, unit={self.unit!r}, adaptive={self.adaptive!r}, "
            f"reverse={self.reverse})"
        )


LLM_ARMS: tuple[str, ...] = tuple(
    arm for arm in ARM_PRESETS if not set(arm_suffixes(arm)) & set(VECTOR_ONLY_SUFFIXES)
)
"""The arms the language-model trainer takes: every preset of
:data:`~feedbackgym.config.ARM_PRESETS` (who speaks, :data:`~feedbackgym.config.ARM_SPEAKERS`,
each with shaping off under the plain name and on with ``+shaping``, and the suffixes of
:data:`~feedbackgym.config.ARM_MODIFIERS`) but those with a suffix of
:data:`~feedbackgym.config.VECTOR_ONLY_SUFFIXES`. Each is a schedule; shaping is added in the
env stack."""

ARMS: tuple[str, ...] = tuple(
    arm for arm in ARM_PRESETS if not set(arm_suffixes(arm)) & set(LLM_ONLY_SUFFIXES)
)
"""The comparison arms the vector trainers (torch, SB3) take: every preset but those with a
suffix of :data:`~feedbackgym.config.LLM_ONLY_SUFFIXES`."""

TWO_PHASE_ARMS: tuple[str, ...] = tuple(
    arm for arm in ARM_PRESETS if len(ARM_SPEAKERS[split_arm(arm)[0]]) == 2
)
"""The arms whose schedule switches from one phase to the other, with and without shaping."""


def schedule_from_config(config: ScheduleConfig) -> Schedule:
    """Builds the schedule a config's ``schedule`` section describes.

    Example:
        >>> from feedbackgym.config import ScheduleConfig
        >>> schedule_from_config(ScheduleConfig(arm="guide", total=10)).at_fraction(0.9).phase
        'guide'
    """
    kwargs: dict[str, Any] = {"total": config.total, "unit": config.unit}
    if config.arm in TWO_PHASE_ARMS:
        adaptive = config.adaptive
        kwargs.update(
            switch_at=config.switch_at,
            fade=config.fade_length,
            adaptive=TrendRule(**adaptive.model_dump()) if adaptive is not None else None,
        )
    return make_schedule(config.arm, **kwargs)


def make_schedule(arm: str, **kwargs: Any) -> Schedule:
    """Builds the schedule of a comparison arm.

    Args:
        arm: One of :data:`ARMS` (``X+shaping`` has the schedule of ``X``).
        **kwargs: Passed on (``total``, ``unit``; ``switch_at``, ``fade`` and
            ``adaptive`` for the two-phase arms).

    Raises:
        ConfigError: Unknown arm (a ``ValueError``; the message names the valid ones).

    Example:
        >>> make_schedule("review-then-guide+shaping", total=10).state(0).phase
        'review'
    """
    speakers = ARM_SPEAKERS[split_arm(arm)[0]]
    if len(speakers) == 2:
        return GuideReviewSchedule(reverse=speakers[0] == "review", **kwargs)
    kwargs = {k: v for k, v in kwargs.items() if k in ("total", "unit")}
    return ConstantSchedule(float("guide" in speakers), float("review" in speakers), **kwargs)
