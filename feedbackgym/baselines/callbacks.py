"""SB3 callbacks: drive the feedback schedule, log it, alert on collapses, apply review credit."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from feedbackgym.baselines.system import SystemMonitor
from feedbackgym.errors import DependencyNotInstalled

try:
    from stable_baselines3.common.buffers import DictReplayBuffer, ReplayBuffer
    from stable_baselines3.common.callbacks import BaseCallback
except ImportError as error:
    raise DependencyNotInstalled.for_extra("stable_baselines3", "baselines") from error

__all__ = ["PHASE_CODES", "FeedbackCallback", "RewardDropAlert"]

logger = logging.getLogger(__name__)

PHASE_CODES = {"none": 0, "guide": 1, "fade": 2, "review": 3, "both": 4}
"""How ``feedback/phase`` encodes the phase as a number in TensorBoard."""


class RewardDropAlert:
    """The spec's alert: mean reward fell by more than ``drop`` three rounds in a row.

    Args:
        drop: Relative fall per round that counts (0.2: 20%).
        rounds: Consecutive falls that raise the alert.
        hook: Called with ``(round, message)`` when it fires, besides the log warning.

    Example:
        >>> alert = RewardDropAlert()
        >>> [alert.update(r, v) for r, v in enumerate([1.0, 0.7, 0.5, 0.3])][-1]
        True
    """

    def __init__(
        self, drop: float = 0.2, rounds: int = 3, hook: Callable[[int, str], None] | None = None
    ) -> None:
        if not 0 < drop < 1 or rounds < 1:
            raise ValueError("need 0 < drop < 1 and rounds >= 1")
        self.drop = drop
        self.rounds = rounds
        self.hook = hook
        self._last: float | None = None
        self._falls = 0
        self.fired: list[int] = []

    def state_dict(self) -> dict[str, Any]:
        """The last mean reward, the falls counted so far and the rounds it fired at."""
        return {"last": self._last, "falls": self._falls, "fired": list(self.fired)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what :meth:`state_dict` returned (a resumed run goes on counting)."""
        self._last = state["last"]
        self._falls = int(state["falls"])
        self.fired = [int(r) for r in state["fired"]]

    def update(self, round_: int, mean_reward: float) -> bool:
        """Adds one round's mean reward; returns whether the alert fired."""
        last, self._last = self._last, mean_reward
        if last is None or not np.isfinite(mean_reward):
            return False
        fell = last != 0 and (last - mean_reward) / abs(last) > self.drop  # -1 -> -1.5 falls
        self._falls = self._falls + 1 if fell else 0
        if self._falls < self.rounds:
            return False
        self._falls = 0
        message = (
            f"mean reward fell more than {self.drop:.0%} for {self.rounds} rounds in a row "
            f"(now {mean_reward:.3f}, round {round_}): guidance may have been withdrawn too "
            "early; lengthen the fade 1.5-2x and start reviews less often"
        )
        logger.warning(message)
        self.fired.append(round_)
        if self.hook is not None:
            self.hook(round_, message)
        return True


class FeedbackCallback(BaseCallback):
    """Drives :class:`~feedbackgym.wrappers.FadeGuideToReview` from SB3 and logs feedback.

    At every rollout start it reports the last round's trend (SB3's
    ``train/loss``, the mean episode return and the success rate of the last
    100 episodes, from ``info["is_success"]``) to the schedule and pushes the
    progress in the schedule's unit (the round index, or the env steps so far
    for a schedule in ``"steps"``) with ``env_method("set_progress", ...)``, which reaches envs
    in subprocess workers too; envs under
    :class:`~feedbackgym.wrappers.RecordTrajectories` also get
    ``set_round(round)``, so recorded episodes are filed by round. At every
    rollout end it logs ``feedback/phase``,
    ``feedback/guide_weight``, ``feedback/review_weight``, ``feedback/switch_step``,
    ``feedback/hints_per_episode``, ``feedback/reviews_per_round``,
    ``feedback/hint_latency_p50_ms`` / ``_p99_ms``, ``feedback/review_latency_p99_ms``,
    ``feedback/mean_return`` and ``feedback/alert``, and checks the reward-drop alert;
    under ``system/`` it logs the round's CPU share, load, memory, sample rate and,
    on a GPU, its memory and utilisation (see :class:`~.system.SystemMonitor`).

    With ``review_credit=True`` the per-step credit of each review is added to
    the rewards of that episode's steps still in the buffer: for PPO in the
    rollout buffer, with returns and advantages recomputed before training;
    for DQN-style learners in the replay buffer (reward relabelling). Credit
    for a step no longer in the buffer (PPO has trained on its rollout, or the
    replay slot has been overwritten since) is dropped and counted in
    ``credit_dropped``.

    Args:
        first_round: Round index of the first rollout (for resumed runs).
        review_credit: Redistribute review credit into the learner's buffer.
        alert: The reward-drop alert (default: the spec's 20% for 3 rounds).
        on_round: Called with ``(round, metrics)`` after each round's logging.
        mirrors: Envs outside the learner (validation envs) that get the same
            ``report`` and ``set_progress`` calls, so their adaptive schedules
            make the same decisions as the training envs'.
        resume_report: For a resumed run: the :meth:`trend` that the stopped
            run had not reported yet (it stopped after training on a round), or
            ``None`` when it had (it stopped, or crashed, at a rollout start,
            after reporting: its saved schedule state holds that report). The
            first rollout start reports it instead of a trend of its own (SB3
            keeps no loss across a save, and would report its episodes again).
        verbose: 0 silent, 1 info.
    """

    def __init__(
        self,
        *,
        first_round: int = 0,
        review_credit: bool = False,
        alert: RewardDropAlert | None = None,
        on_round: Callable[[int, dict[str, float]], None] | None = None,
        mirrors: Sequence[Any] = (),
        resume_report: dict[str, float] | None = None,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        self.mirrors = list(mirrors)
        self.resume_report = resume_report
        self.round = first_round
        self.review_credit = review_credit
        self.alert = alert if alert is not None else RewardDropAlert()
        self.on_round = on_round
        self.state: dict[str, Any] = {}
        self._positions: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        """Per env, this episode's steps: (rollout, buffer position, step call)."""
        self._pending: list[tuple[int, int, float, int]] = []
        self._rollout = 0
        self._recording: bool | None = None
        self._in_steps = False
        self._pushed: float | None = None
        """The progress last pushed to the envs (``None`` before this run's first rollout)."""
        self.credit_applied = 0
        self.credit_dropped = 0
        """Credits whose step had already left the buffer (overwritten or trained on)."""
        self._system = SystemMonitor()

    # --- hooks ----------------------------------------------------------------------------

    def _on_training_start(self) -> None:
        self._system = SystemMonitor(steps=self.num_timesteps)  # a resumed run starts past 0
        unit = self.training_env.env_method("feedback_state", indices=[0])[0].get("unit")
        self._in_steps = unit == "steps"

    def _progress(self) -> float:
        """This round's progress in the schedule's unit: the round index, or env steps."""
        return float(self.num_timesteps) if self._in_steps else float(self.round)

    def trend(self) -> dict[str, float]:
        """The trend of the round just trained on: what the next rollout start reports.

        SB3's ``train/loss``, the mean episode return and the training success
        rate, each when known. A trainer that stops between rounds saves it, and
        passes it back as ``resume_report`` when it resumes.
        """
        metrics: dict[str, float] = {}
        loss = self.model.logger.name_to_value.get("train/loss")
        if loss is not None:
            metrics["loss"] = float(loss)
        mean_return = self._mean_return()
        if mean_return is not None:
            metrics["mean_return"] = mean_return
        if self.model.ep_success_buffer:  # SB3 keeps info["is_success"] of ended episodes
            metrics["success"] = float(np.mean(self.model.ep_success_buffer))
        return metrics

    def _on_rollout_start(self) -> None:
        metrics: dict[str, Any]
        if self._pushed is not None:
            metrics = self.trend()
            last = self._pushed  # where the training envs are: the last round's progress
        else:  # this process's first rollout: a resumed run's envs are new, at progress 0
            metrics = dict(self.resume_report or {})
            last = float(self.num_timesteps) if self._in_steps else float(self.round - 1)
        if metrics and self.round > 0:
            if self._pushed is None:
                self.training_env.env_method("set_progress", last)
            self.training_env.env_method("report", **metrics)
            for env in self.mirrors:  # validation may have moved them: report where training is
                env.get_wrapper_attr("set_progress")(last)
                env.get_wrapper_attr("report")(**metrics)
        self._pushed = self._progress()
        self.state = self.training_env.env_method("set_progress", self._pushed)[0]
        if self._recording is None:
            self._recording = bool(self.training_env.has_attr("set_round"))
        if self._recording:  # recorded episodes are filed under the round they start in
            self.training_env.env_method("set_round", self.round)
        for env in self.mirrors:
            env.get_wrapper_attr("set_progress")(self._pushed)
        self._rollout += 1

    def _on_step(self) -> bool:
        if self.review_credit:
            self._track_credit()
        return True

    def _on_rollout_end(self) -> None:
        if self.review_credit and self._pending:
            self._apply_credit()
        metrics = self._round_metrics()
        for key, value in metrics.items():
            self.logger.record(f"feedback/{key}", value)
        for key, value in self._system.sample(self.num_timesteps).items():
            self.logger.record(f"system/{key}", value)
        fired = "mean_return" in metrics and self.alert.update(self.round, metrics["mean_return"])
        self.logger.record("feedback/alert", float(fired))
        if self.on_round is not None:
            self.on_round(self.round, metrics)
        self.round += 1

    # --- metrics --------------------------------------------------------------------------

    def _mean_return(self) -> float | None:
        buffer = self.model.ep_info_buffer
        if not buffer:
            return None
        return float(np.mean([info["r"] for info in buffer]))

    def _round_metrics(self) -> dict[str, float]:
        stats = self.training_env.env_method("feedback_stats")
        guide = [s["guide"] for s in stats if s.get("guide")]
        review = [s["review"] for s in stats if s.get("review")]
        episodes = sum(r["episodes_ended"] for r in review)
        hint_latency = [x for g in guide for x in g["latencies_ms"]]
        review_latency = [x for r in review for x in r["latencies_ms"]]
        switch_at = self.state.get("switch_at")
        metrics = {
            "phase": float(PHASE_CODES.get(self.state.get("phase", "none"), -1)),
            "guide_weight": float(self.state.get("guide_weight", 0.0)),
            "review_weight": float(self.state.get("review_weight", 0.0)),
            "hints_per_episode": sum(g["hints_given"] for g in guide) / max(1, episodes),
            "reviews_per_round": float(sum(r["reviews_given"] for r in review)),
            "episodes_per_round": float(episodes),
            "misses": float(sum(g["misses"] for g in guide) + sum(r["misses"] for r in review)),
        }
        if switch_at is not None:
            metrics["switch_step"] = float(switch_at) * float(self.state["total"])
        if hint_latency:
            metrics["hint_latency_p50_ms"] = float(np.percentile(hint_latency, 50))
            metrics["hint_latency_p99_ms"] = float(np.percentile(hint_latency, 99))
        if review_latency:
            metrics["review_latency_p99_ms"] = float(np.percentile(review_latency, 99))
        mean_return = self._mean_return()
        if mean_return is not None:
            metrics["mean_return"] = mean_return
        return metrics

    # --- review credit --------------------------------------------------------------------

    def _buffer(self) -> Any:
        model: Any = self.model
        return getattr(model, "rollout_buffer", None) or model.replay_buffer

    def _track_credit(self) -> None:
        buffer = self._buffer()
        infos, dones = self.locals["infos"], self.locals["dones"]
        for env_index, (info, done) in enumerate(zip(infos, dones, strict=True)):
            self._positions[env_index].append((self._rollout, buffer.pos, self.n_calls))
            credit = (info.get("feedback") or {}).get("credit")
            if credit:
                positions = self._positions[env_index]
                offset = len(positions) - (credit["start"] + len(credit["values"]))
                for k, value in enumerate(credit["values"]):
                    if not value:
                        continue
                    if offset + credit["start"] + k < 0:  # a step from before this callback
                        self.credit_dropped += 1
                        continue
                    rollout, position, call = positions[offset + credit["start"] + k]
                    if self._replay(buffer) or rollout == self._rollout:
                        self._pending.append((position, env_index, float(value), call))
                    else:  # PPO has trained on that rollout already
                        self.credit_dropped += 1
            if done:
                self._positions[env_index] = []

    @staticmethod
    def _replay(buffer: Any) -> bool:
        return isinstance(buffer, (ReplayBuffer, DictReplayBuffer))

    def _apply_credit(self) -> None:
        buffer = self._buffer()
        replay = self._replay(buffer)
        for position, env_index, value, call in self._pending:
            # A replay slot is overwritten buffer_size vector steps after it was written.
            if replay and self.n_calls - call >= buffer.buffer_size:
                self.credit_dropped += 1
                continue
            buffer.rewards[position, env_index] += value
            self.credit_applied += 1
        self._pending = []
        if hasattr(self.model, "rollout_buffer") and self.model.rollout_buffer is buffer:
            import torch

            last_values = self.locals["values"]
            if not isinstance(last_values, torch.Tensor):
                last_values = torch.as_tensor(last_values)
            buffer.compute_returns_and_advantage(
                last_values=last_values, dones=self.locals["dones"]
            )
