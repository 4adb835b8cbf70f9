"""SB3: review credit redistributed into the learner's buffer."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from feedbackgym.errors import requires_extra
from feedbackgym.protocol import FEEDBACK

with requires_extra("baselines", "stable_baselines3"):
    from stable_baselines3.common.buffers import DictReplayBuffer, ReplayBuffer
    from stable_baselines3.common.callbacks import BaseCallback

__all__ = ["ReviewCredit"]


class ReviewCredit(BaseCallback):
    """Adds each review's per-step credit to the rewards of that episode's steps in the buffer.

    For PPO in the rollout buffer, with returns and advantages recomputed
    before training; for DQN-style learners in the replay buffer (reward
    relabelling). Credit for a step no longer in the buffer (PPO has trained
    on its rollout, or the replay slot has been overwritten since) is dropped
    and counted in ``credit_dropped``. The credit comes from
    ``info["feedback"]["credit"]`` (``AddReview``'s ``"credit"`` channel).

    Attributes:
        credit_applied: Credits added to a buffered reward.
        credit_dropped: Credits whose step had already left the buffer.
    """

    def __init__(self) -> None:
        super().__init__()
        self._positions: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        """Per env, this episode's steps: (rollout, buffer position, step call)."""
        self._pending: list[tuple[int, int, float, int]] = []
        self._rollout = 0
        self.credit_applied = 0
        self.credit_dropped = 0

    def _on_rollout_start(self) -> None:
        self._rollout += 1

    def _on_step(self) -> bool:
        buffer = self._buffer()
        infos, dones = self.locals["infos"], self.locals["dones"]
        for env_index, (info, done) in enumerate(zip(infos, dones, strict=True)):
            self._positions[env_index].append((self._rollout, buffer.pos, self.n_calls))
            credit = (info.get(FEEDBACK) or {}).get("credit")
            if credit:
                self._track(buffer, env_index, credit)
            if done:
                self._positions[env_index] = []
        return True

    def _on_rollout_end(self) -> None:
        if self._pending:
            self._apply()

    def _buffer(self) -> Any:
        model: Any = self.model
        return getattr(model, "rollout_buffer", None) or model.replay_buffer

    def _track(self, buffer: Any, env_index: int, credit: dict[str, Any]) -> None:
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

    @staticmethod
    def _replay(buffer: Any) -> bool:
        return isinstance(buffer, (ReplayBuffer, DictReplayBuffer))

    def _apply(self) -> None:
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
