"""SB3: drive the run's :class:`~feedbackgym.control.FeedbackController` once per round."""

from __future__ import annotations

from typing import Any

import numpy as np

from feedbackgym.control import FeedbackController
from feedbackgym.errors import requires_extra

with requires_extra("baselines", "stable_baselines3"):
    from stable_baselines3.common.callbacks import BaseCallback

__all__ = ["DriveController", "mean_episode_return"]


def mean_episode_return(model: Any) -> float | None:
    """The mean return of SB3's last 100 finished episodes (``None`` before the first)."""
    buffer = model.ep_info_buffer
    return float(np.mean([info["r"] for info in buffer])) if buffer else None


class DriveController(BaseCallback):
    """At every rollout start, reports the last round's trend and starts the next round.

    The trend is SB3's ``train/loss``, the mean episode return of the last 100
    episodes and the success rate of the episodes that ended in the round (from
    ``info["is_success"]``; the torch trainer's too). The controller
    pushes the new state to the training envs (subprocess workers too), which
    this callback attaches at the start of training, and to any other env it
    drives (validation envs).

    Args:
        controller: The run's controller.
        first_round: Round index of the first rollout (a resumed run starts past 0).
        resume_report: For a resumed run: the :meth:`trend` the stopped run had
            not reported yet (it stopped after training on a round), or
            ``None`` when it had. The first rollout start reports it instead of
            a trend of its own (SB3 keeps no loss across a save, and would
            report its episodes again).

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> from stable_baselines3 import PPO
        >>> from stable_baselines3.common.vec_env import DummyVecEnv
        >>> config = feedbackgym.config.FeedbackConfig.for_arm("guide-then-review")
        >>> venv = DummyVecEnv(
        ...     [lambda: feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", feedback=config)] * 2
        ... )
        >>> controller = FeedbackController(config)
        >>> _ = PPO("MultiInputPolicy", venv, n_steps=32, batch_size=64, seed=0).learn(
        ...     128, callback=DriveController(controller)
        ... )
        >>> controller.round, venv.env_method("set_feedback_state", controller.state)[0]
        (1, None)
    """

    def __init__(
        self,
        controller: FeedbackController,
        *,
        first_round: int = 0,
        resume_report: dict[str, float] | None = None,
    ) -> None:
        super().__init__()
        self.controller = controller
        self.first_round = first_round
        self.resume_report = resume_report
        self._started = False
        self._successes: list[bool] = []
        """``is_success`` of the episodes that ended in the round in progress."""

    def _on_training_start(self) -> None:
        self.controller.attach(self.training_env)

    def _on_step(self) -> bool:
        for done, info in zip(self.locals["dones"], self.locals["infos"], strict=True):
            if done:
                self._successes.append(bool(info.get("is_success", False)))
        return True

    def trend(self) -> dict[str, float]:
        """The trend of the round just trained on: what the next rollout start reports.

        A trainer that stops between rounds saves it, and passes it back as
        ``resume_report`` when it resumes.
        """
        metrics: dict[str, float] = {}
        loss = self.model.logger.name_to_value.get("train/loss")
        if loss is not None:
            metrics["loss"] = float(loss)
        mean_return = mean_episode_return(self.model)
        if mean_return is not None:
            metrics["mean_return"] = mean_return
        if self._successes:
            metrics["success"] = float(np.mean(self._successes))
        return metrics

    def _on_rollout_start(self) -> None:
        metrics: dict[str, Any]
        if self._started:
            round_, metrics = self.controller.round + 1, self.trend()
            self._successes = []
        else:  # this process's first rollout: a resumed run reports what it had not
            round_, metrics = self.first_round, dict(self.resume_report or {})
            self._started = True
        unit = self.controller.schedule.unit
        progress = float(self.num_timesteps) if unit == "steps" else None
        self.controller.update(round_, progress=progress, **(metrics if round_ > 0 else {}))
