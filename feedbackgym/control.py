"""The feedback controller: one per training run, on the trainer's side.

A :class:`FeedbackController` owns everything that decides the feedback during
training: the schedule (with its adaptive rule), the guide-dependence rule
(:class:`RelianceRule`, when the config has one), the task curriculum
(:class:`~feedbackgym.feedback.curriculum.CurriculumRule`, when it has one), the
config watcher, the reward-drop alert and the round counter. Each round the trainer calls
:meth:`FeedbackController.update` with the last round's trend; the controller
computes one :class:`~feedbackgym.protocol.FeedbackState` and pushes it to every
env it drives through one env method, ``set_feedback_state`` (see
:mod:`feedbackgym.protocol`). Envs run no adaptive logic of their own, so N
workers cannot disagree, and resuming a run restores one object
(:meth:`~FeedbackController.state_dict`).

Example:
    >>> import gymnasium as gym, feedbackgym
    >>> from feedbackgym.config import FeedbackConfig
    >>> config = FeedbackConfig.for_arm("guide-then-review")
    >>> envs = gym.vector.SyncVectorEnv(
    ...     [lambda: feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", feedback=config)] * 2
    ... )
    >>> controller = FeedbackController(config, envs=envs)
    >>> controller.update(0).phase, controller.update(60, mean_return=0.5).phase
    ('guide', 'review')
    >>> [state.phase for state in envs.get_attr("feedback_state")]
    ['review', 'review']
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from feedbackgym.config import AlertConfig, ConfigWatcher, FeedbackConfig, RelianceConfig
from feedbackgym.feedback.curriculum import CurriculumRule
from feedbackgym.protocol import SET_FEEDBACK_STATE, FeedbackState, call_envs
from feedbackgym.schedules import Schedule, schedule_from_config
from feedbackgym.webhook import Webhook

__all__ = ["FeedbackController", "RelianceRule", "RewardDropAlert"]

logger = logging.getLogger(__name__)

_ALERT = AlertConfig()
"""The alert's defaults live in the config (:class:`~feedbackgym.config.AlertConfig`)."""


class RewardDropAlert:
    """The spec's alert: the mean reward fell ``rounds`` rounds in a row by more than ``drop``.

    A round's mean reward (over the episodes it finished) is noisy: a few
    dozen episodes of a sparse task. So the rule reads it smoothed, an
    exponential moving average giving each new round the weight
    ``smoothing``, and counts a fall only when it is larger than the noise:
    ``noise`` times the smoothed mean's own spread (from the rounds'
    deviations from it, as they were when the fall began). A collapse (the
    reward's sign flipped, shaping gone) moves the average further each
    round and fires within ``rounds`` rounds; a healthy run's wobble does not.
    ``smoothing=1`` and ``noise=0`` read the raw means, as the spec words it.

    Two readings of the rule: ``"cumulative"`` (the default) fires when the
    smoothed mean fell in each of the last ``rounds`` rounds and by more than
    ``drop`` in total over them (from the mean before the first fall);
    ``"each"`` when it fell by more than ``drop`` in each of them. Either way
    a fall counts only from a mean of magnitude at least ``floor`` (and never
    from 0): a sparse-reward run whose mean goes from a rare success back to 0
    has lost nothing guidance gave it. After firing it counts afresh.

    Args:
        hook: Called with ``(round, message)`` when it fires, besides the log warning
            (and the config's ``webhook``, if it names one).
        config: The rule's settings (:class:`~feedbackgym.config.AlertConfig`:
            ``drop``, ``rounds``, ``reading``, ``floor``, ``smoothing``, ``noise``,
            ``webhook``); the config's defaults by default.
        **settings: Settings over ``config``'s, by name.

    Attributes:
        config: The rule's settings, checked.

    Raises:
        ConfigError: A bad or unknown setting (named).

    Example:
        >>> means = [1.0, 0.9, 0.8, 0.7]  # 10% a round, 30% in all
        >>> raw = dict(smoothing=1.0, noise=0.0)
        >>> cumulative, each = RewardDropAlert(**raw), RewardDropAlert(reading="each", **raw)
        >>> [cumulative.update(r, v) for r, v in enumerate(means)][-1]
        True
        >>> [each.update(r, v) for r, v in enumerate(means)][-1]
        False
        >>> healthy = [0.5, 0.7, 0.6, 0.45, 0.4, 0.6, 0.7, 0.55, 0.5, 0.65]
        >>> alert = RewardDropAlert()
        >>> any(alert.update(r, v) for r, v in enumerate(healthy))
        False
        >>> [alert.update(r, -0.5) for r in range(10, 13)]  # the reward's sign flipped
        [False, False, True]
    """

    def __init__(
        self,
        hook: Callable[[int, str], None] | None = None,
        *,
        config: AlertConfig = _ALERT,
        **settings: Any,
    ) -> None:
        merged = {**config.model_dump(), **settings}
        self.config = FeedbackConfig.from_mapping({"alert": merged}, "RewardDropAlert").alert
        webhook = self.config.webhook
        self.hook = hook if webhook is None else _both(Webhook(webhook), hook)
        self._variance = 0.0
        """The moving average of the rounds' squared deviations from it."""
        self._means: list[float] = []
        """The moving average of the round means now (last) and the smoothed means of the
        falls before it that still count, oldest first (empty before the first round)."""
        self._spread = 0.0
        """The smoothed mean's spread when the streak began."""
        self.fired: list[int] = []

    def state_dict(self) -> dict[str, Any]:
        """The moving averages, the streak counted so far and the rounds it fired at."""
        return {
            "variance": self._variance,
            "means": list(self._means),
            "spread": self._spread,
            "fired": list(self.fired),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned (a resumed run goes on counting).

        A state saved before the smoothing restarts the average from its last
        mean; one saved before the readings (``last``) restores that mean too.
        """
        if "means" in state:
            self._means = [float(m) for m in state["means"]]
        else:
            self._means = [] if state.get("last") is None else [float(state["last"])]
        self._variance = float(state.get("variance", 0.0))
        self._spread = float(state.get("spread", 0.0))
        self.fired = [int(r) for r in state["fired"]]

    def _counts_from(self, mean: float) -> bool:
        return mean != 0 and abs(mean) >= self.config.floor

    def _falls(self, last: float, mean: float) -> bool:
        """Whether the step from ``last`` to ``mean`` goes on the streak."""
        if self.config.reading == "cumulative":
            return mean < last
        # Relative to |last|: -1 -> -1.5 falls.
        return self._counts_from(last) and (last - mean) / abs(last) > self.config.drop

    def _fires(self) -> bool:
        if len(self._means) <= self.config.rounds:
            return False
        first, now = self._means[0], self._means[-1]
        if first - now <= self.config.noise * self._spread:
            return False
        if self.config.reading == "each":
            return True
        return self._counts_from(first) and (first - now) / abs(first) > self.config.drop

    def _smooth(self, mean_reward: float) -> float:
        """Moves the variance by one round's mean; returns the new moving average."""
        if not self._means:
            return mean_reward
        deviation = mean_reward - self._means[-1]
        self._variance += self.config.smoothing * (deviation**2 - self._variance)
        return self._means[-1] + self.config.smoothing * deviation

    def update(self, round_: int, mean_reward: float) -> bool:
        """Adds one round's mean reward; returns whether the alert fired."""
        if not math.isfinite(mean_reward):
            return False  # a round without a finite mean neither counts nor breaks a streak
        # The spread of the average of iid rounds: the rounds' own, times sqrt(a / (2 - a)).
        spread = math.sqrt(self._variance * self.config.smoothing / (2 - self.config.smoothing))
        smoothed = self._smooth(mean_reward)
        if self._means and self._falls(self._means[-1], smoothed):
            self._means = [*self._means, smoothed][-(self.config.rounds + 1) :]
        else:
            self._means, self._spread = [smoothed], spread
        if not self._fires():
            return False
        self._means = [smoothed]
        total = "in total" if self.config.reading == "cumulative" else "each round"
        rounds = self.config.rounds
        message = (
            f"mean reward fell {rounds} round{'s' * (rounds > 1)} in a row, "
            f"by more than {self.config.drop:.0%} {total} and beyond its noise "
            f"(smoothed {smoothed:.3f}, this round {mean_reward:.3f}, round {round_}): "
            "guidance may have been withdrawn too early; lengthen the fade 1.5-2x and "
            "start reviews less often"
        )
        logger.warning(message)
        self.fired.append(round_)
        if self.hook is not None:
            self.hook(round_, message)
        return True


def _both(
    channel: Callable[[int, str], Any], hook: Callable[[int, str], None] | None
) -> Callable[[int, str], None]:
    """A hook that sends to ``channel``, then calls ``hook`` (if any)."""

    def both(round_: int, message: str) -> None:
        channel(round_, message)
        if hook is not None:
            hook(round_, message)

    return both


class RelianceRule:
    """The guide-dependence rule: each validation's hint reliance moves the guide's dropout.

    Reliance is validation success with hints shown minus with hints masked.
    Over ``raise_above`` the policy leans on the hints, so the dropout rises by
    ``step`` (more hints withheld); under ``lower_below`` it falls by ``step``;
    it stays inside ``[min_dropout, max_dropout]``.

    Args:
        config: The thresholds, step and bounds.
        dropout: Where the dropout starts (the config's ``guide.dropout``).

    Example:
        >>> rule = RelianceRule(RelianceConfig(), dropout=0.5)
        >>> [rule.observe(reliance) for reliance in (0.4, 0.1, 0.0, 0.0, 0.0, 0.0)]
        [0.6, 0.6, 0.5, 0.4, 0.3, 0.2]
    """

    def __init__(self, config: RelianceConfig, dropout: float) -> None:
        self.config = config
        self.dropout = self._clamped(dropout)

    def _clamped(self, dropout: float) -> float:
        # Rounded so that steps of 0.1 read 0.7, not 0.7000000000000001.
        return round(min(max(dropout, self.config.min_dropout), self.config.max_dropout), 9)

    def observe(self, reliance: float) -> float:
        """Adds one validation's reliance; returns the dropout from now on."""
        if math.isfinite(reliance):
            if reliance > self.config.raise_above:
                self.dropout = self._clamped(self.dropout + self.config.step)
            elif reliance < self.config.lower_below:
                self.dropout = self._clamped(self.dropout - self.config.step)
        return self.dropout

    def state_dict(self) -> dict[str, Any]:
        """The dropout the rule has set."""
        return {"dropout": self.dropout}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned (a resumed run keeps its dropout)."""
        self.dropout = self._clamped(float(state["dropout"]))


class FeedbackController:
    """Decides the feedback of every round and pushes it to every env.

    Args:
        config: A :class:`~feedbackgym.config.FeedbackConfig`, or the path of a
            YAML/TOML config file to follow: a valid edit applies to every env
            at the next round, an invalid one is rejected with a logged reason
            (see :class:`~feedbackgym.config.ConfigWatcher`). States carry it,
            and envs apply its guide, review and shaping settings. ``None``:
            the default schedule, and the envs keep their own settings.
        envs: Envs to drive now (see :meth:`attach`).
        transform: Applied to every config version read (command-line
            overrides, an arm's preset, the run's length).
        schedule: A schedule object to use instead of the one the config
            describes (a custom :class:`~feedbackgym.schedules.Schedule`).
        alert: The reward-drop alert (default: the config's ``alert`` section).

    Attributes:
        config: The config in force (states carry it with the reliance rule's
            dropout as ``guide.dropout``).
        schedule: The schedule (with its adaptive rule).
        reliance: The guide-dependence rule, or ``None`` (the config has none):
            fed each validation's hint reliance (:meth:`report_reliance`).
        curriculum: The task curriculum, or ``None`` (the config has none): fed
            each round's training ``success`` (:meth:`report`).
        alert: The reward-drop alert, fed each reported ``mean_return``.
        state: The last state computed.
        alert_fired: Whether the last report fired the alert.
    """

    def __init__(
        self,
        config: FeedbackConfig | str | Path | None = None,
        *,
        envs: Any = None,
        transform: Callable[[FeedbackConfig], FeedbackConfig] | None = None,
        schedule: Schedule | None = None,
        alert: RewardDropAlert | None = None,
    ) -> None:
        self.watcher: ConfigWatcher | None = None
        self._pushes_config = config is not None
        """Whether states carry the config (an env then applies it): not for the defaults."""
        if isinstance(config, (str, Path)):
            self.watcher = ConfigWatcher(config, transform)
            self.config = self.watcher.config
        elif config is None or isinstance(config, FeedbackConfig):
            base = config if config is not None else FeedbackConfig()
            self.config = transform(base) if transform is not None else base
        else:
            raise TypeError(
                f"config must be a FeedbackConfig, a path or None, got {type(config).__name__}"
            )
        self._custom_schedule = schedule is not None
        self.schedule = (
            schedule if schedule is not None else schedule_from_config(self.config.schedule)
        )
        self.reliance = _reliance_rule(self.config)
        self.curriculum = _curriculum_rule(self.config)
        self.alert = alert if alert is not None else RewardDropAlert(config=self.config.alert)
        self.alert_fired = False
        self.round = 0
        self.progress = 0.0
        self._envs: list[Any] = []
        self.state = self.state_at(0)
        if envs is not None:
            self.attach(envs)

    @property
    def config_version(self) -> int:
        """The version of the config file in force (0 when no file is followed)."""
        return self.watcher.version if self.watcher is not None else 0

    @property
    def guide_dropout(self) -> float:
        """The guide's dropout in force: the reliance rule's, or the config's."""
        return self.reliance.dropout if self.reliance is not None else self.config.guide.dropout

    @property
    def config_changes(self) -> list[dict[str, Any]]:
        """Every edit of the config file seen: version, time, applied, reason."""
        return list(self.watcher.changes) if self.watcher is not None else []

    def attach(self, envs: Any) -> None:
        """Drives ``envs`` too (a single env, an SB3 ``VecEnv`` or a Gymnasium vector env).

        They get the current state at once, then every state :meth:`update` computes.
        Attaching envs the controller drives already only pushes the state again.
        """
        if not any(driven is envs for driven in self._envs):
            self._envs.append(envs)
        call_envs(envs, SET_FEEDBACK_STATE, self.state)

    def state_at(self, round_: int, progress: float | None = None) -> FeedbackState:
        """The state of round ``round_`` (at ``progress`` in the schedule's unit), unpushed."""
        progress = float(round_) if progress is None else float(progress)
        scheduled = self.schedule.state(progress)
        return FeedbackState(
            phase=scheduled.phase,
            guide_weight=scheduled.guide_weight,
            review_weight=scheduled.review_weight,
            round=round_,
            progress=progress,
            switch_at=getattr(self.schedule, "switch_at", None),
            config_version=self.config_version,
            config=self._config_in_force() if self._pushes_config else None,
            config_changes=tuple(self.config_changes),
            curriculum=self.curriculum.width if self.curriculum is not None else None,
        )

    def report(self, **metrics: float) -> None:
        """Reports the trend of the round in progress (``loss``, ``mean_return``, ``success``).

        It feeds the schedule's adaptive rule, the reward-drop alert and the
        curriculum (its training ``success``).
        """
        self.schedule.report(self.progress, **metrics)
        if self.curriculum is not None and "success" in metrics:
            self.curriculum.observe(float(metrics["success"]))
        mean_return = metrics.get("mean_return")
        self.alert_fired = mean_return is not None and self.alert.update(
            self.round, float(mean_return)
        )

    def report_reliance(self, reliance: float) -> FeedbackState:
        """Reports a validation's hint reliance (success with hints shown minus masked).

        The reliance rule moves the guide's dropout, and a new dropout is
        pushed to every env at once: it applies from the round about to
        start. Ignored without a rule, and while the guide is silent (guide
        weight 0 in the state in force: no hints were shown to rely on).

        Returns:
            The state every driven env now has.

        Example:
            >>> from feedbackgym.config import merge_config
            >>> config = merge_config(FeedbackConfig(), {"reliance": {}})
            >>> controller = FeedbackController(config)
            >>> controller.report_reliance(0.3).config.guide.dropout
            0.6
        """
        rule = self.reliance
        if rule is None or self.state.guide_weight == 0:
            return self.state
        before = rule.dropout
        if rule.observe(reliance) != before:
            logger.info(
                "hint reliance %.3f at round %d: guide dropout %.2f -> %.2f",
                reliance,
                self.round,
                before,
                rule.dropout,
            )
            self.state = self.state_at(self.round, self.progress)
            self.push(self.state)
        return self.state

    def update(
        self, round_: int, *, progress: float | None = None, **metrics: float
    ) -> FeedbackState:
        """Starts round ``round_``: reports the last round's trend, pushes the new state.

        Args:
            round_: The round starting now.
            progress: Where training is in the schedule's unit (default: the
                round; pass the env steps for a schedule in ``"steps"``).
            **metrics: The trend of the round that just ended (see :meth:`report`).

        Returns:
            The state every driven env now has.
        """
        if metrics:
            self.report(**metrics)
        self._follow_config()
        self.round = round_
        self.progress = float(round_) if progress is None else float(progress)
        self.state = self.state_at(round_, self.progress)
        self.push(self.state)
        return self.state

    def push(self, state: FeedbackState) -> None:
        """Sends ``state`` to every driven env (what :meth:`update` does each round)."""
        for envs in self._envs:
            call_envs(envs, SET_FEEDBACK_STATE, state)

    def _follow_config(self) -> None:
        if self.watcher is None or not self.watcher.poll():
            return
        new = self.watcher.config
        if new.schedule != self.config.schedule and not self._custom_schedule:
            # Only an edit of the schedule section rebuilds it (and resets the adaptive rule).
            self.schedule = schedule_from_config(new.schedule)
        if (new.reliance, new.guide.dropout) != (self.config.reliance, self.config.guide.dropout):
            self.reliance = _reliance_rule(new)  # the rule starts again from the new dropout
        if new.curriculum != self.config.curriculum:
            self.curriculum = _curriculum_rule(new)  # the curriculum starts again from its start
        self.config = new
        logger.info(
            "feedback config version %d applied from round %d", self.config_version, self.round
        )

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs, as JSON-safe data."""
        return {
            "round": self.round,
            "progress": self.progress,
            "schedule": self.schedule.state_dict(),
            "alert": self.alert.state_dict(),
            "alert_fired": self.alert_fired,
            "reliance": self.reliance.state_dict() if self.reliance is not None else None,
            "curriculum": self.curriculum.state_dict() if self.curriculum is not None else None,
            "config_version": self.config_version,
            "config_changes": self.config_changes,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores :meth:`state_dict` output and pushes the restored state to every env.

        The config stays the one this controller was made with (a followed
        file as it is now): a resumed run may run longer than the one saved.
        A followed file goes on from the saved version and edit history.
        """
        self.schedule.load_state_dict(state["schedule"])
        self.alert.load_state_dict(state["alert"])
        self.alert_fired = bool(state.get("alert_fired", False))
        if self.reliance is not None and state.get("reliance"):
            self.reliance.load_state_dict(state["reliance"])
        if self.curriculum is not None and state.get("curriculum"):
            self.curriculum.load_state_dict(state["curriculum"])
        if self.watcher is not None and state.get("config_version"):
            self.watcher.version = int(state["config_version"])
            self.watcher.changes = [dict(change) for change in state.get("config_changes", [])]
        self.round = int(state["round"])
        self.progress = float(state["progress"])
        self.state = self.state_at(self.round, self.progress)
        self.push(self.state)

    def _config_in_force(self) -> FeedbackConfig:
        """The config with the reliance rule's dropout as ``guide.dropout``."""
        if self.reliance is None or self.reliance.dropout == self.config.guide.dropout:
            return self.config
        guide = self.config.guide.model_copy(update={"dropout": self.reliance.dropout})
        return self.config.model_copy(update={"guide": guide})

    def __repr__(self) -> str:
        return (
            f"FeedbackController(round={self.round}, phase={self.state.phase!r}, "
            f"schedule={self.schedule!r}, config_version={self.config_version})"
        )


def _reliance_rule(config: FeedbackConfig) -> RelianceRule | None:
    """The rule ``config.reliance`` describes, starting at ``guide.dropout`` (``None``: off)."""
    if config.reliance is None:
        return None
    return RelianceRule(config.reliance, config.guide.dropout)


def _curriculum_rule(config: FeedbackConfig) -> CurriculumRule | None:
    """The curriculum ``config.curriculum`` describes (``None``: off)."""
    return CurriculumRule(config.curriculum) if config.curriculum is not None else None
