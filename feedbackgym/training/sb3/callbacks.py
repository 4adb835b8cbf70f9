"""SB3 callbacks: log the feedback and the system each round, and the stack of all three.

The three concerns live in three modules: :mod:`~.drive_controller` (drive the run's
:class:`~feedbackgym.control.FeedbackController`), this one (log), and
:mod:`~.review_credit` (review credit). :func:`feedback_callbacks` puts them together
in the order they must run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from feedbackgym.control import FeedbackController
from feedbackgym.errors import requires_extra
from feedbackgym.protocol import call_envs
from feedbackgym.training.common.feedback_metrics import feedback_metrics
from feedbackgym.training.common.system_metrics import SystemMonitor
from feedbackgym.training.sb3.drive_controller import DriveController, mean_episode_return
from feedbackgym.training.sb3.review_credit import ReviewCredit

with requires_extra("baselines", "stable_baselines3"):
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList

__all__ = ["LogFeedback", "feedback_callbacks"]


class LogFeedback(BaseCallback):
    """At every rollout end, logs the round's feedback (``feedback/``) and machine (``system/``).

    The ``feedback/`` tags are
    :func:`~feedbackgym.training.common.feedback_metrics.feedback_metrics`'; under
    ``system/`` the round's CPU share, load, memory, sample rate and, on a
    GPU, its memory and utilisation (see
    :class:`~feedbackgym.training.common.system_metrics.SystemMonitor`).

    Args:
        controller: The run's controller (the state and config in force).
        on_round: Called with ``(round, metrics)`` after each round's logging.
    """

    def __init__(
        self,
        controller: FeedbackController,
        on_round: Callable[[int, dict[str, float]], None] | None = None,
    ) -> None:
        super().__init__()
        self.controller = controller
        self.on_round = on_round
        self._system = SystemMonitor()

    def _on_training_start(self) -> None:
        self._system = SystemMonitor(steps=self.num_timesteps)  # a resumed run starts past 0

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        metrics = self.round_metrics()
        for key, value in metrics.items():
            self.logger.record(f"feedback/{key}", value)
        for key, value in self._system.sample(self.num_timesteps).items():
            self.logger.record(f"system/{key}", value)
        if self.on_round is not None:
            self.on_round(self.controller.round, metrics)

    def round_metrics(self) -> dict[str, float]:
        """The round's feedback metrics (what is logged under ``feedback/``)."""
        stats = call_envs(self.training_env, "feedback_stats")
        return feedback_metrics(self.controller, stats, mean_episode_return(self.model))


def feedback_callbacks(
    controller: FeedbackController,
    *,
    review_credit: bool = False,
    first_round: int = 0,
    resume_report: dict[str, float] | None = None,
    on_round: Callable[[int, dict[str, float]], None] | None = None,
) -> CallbackList:
    """The SB3 callbacks of a run with feedback: drive the controller, credit, log.

    Args:
        controller: The run's controller.
        review_credit: Redistribute review credit into the learner's buffer
            (see :class:`~.review_credit.ReviewCredit`).
        first_round: Round index of the first rollout (resumed runs).
        resume_report: The trend a stopped run had not reported (see
            :class:`~.drive_controller.DriveController`).
        on_round: Called with ``(round, metrics)`` after each round's logging.

    Returns:
        A ``CallbackList``; its ``callbacks`` are the :class:`~.drive_controller.DriveController`,
        the :class:`~.review_credit.ReviewCredit` (when asked for) and the :class:`LogFeedback`.
    """
    callbacks: list[Any] = [
        DriveController(controller, first_round=first_round, resume_report=resume_report)
    ]
    if review_credit:
        callbacks.append(ReviewCredit())  # before the logging: it recomputes the advantages
    callbacks.append(LogFeedback(controller, on_round=on_round))
    return CallbackList(callbacks)
