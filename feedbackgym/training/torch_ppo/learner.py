"""The PPO learner of the torch trainer: one round's rollout buffer, its collection and update.

A :class:`Learner` collects a round from the envs of
:func:`~.ppo_config.make_vector_env` into a
:class:`Rollout` and updates the agent on it, here or in an
:class:`~.update_worker.UpdateWorker`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from feedbackgym.config import FeedbackConfig
from feedbackgym.errors import requires_extra
from feedbackgym.training.common.entity_network import EntityAgent, PolicyMismatchError
from feedbackgym.training.common.trainer_view import Credit
from feedbackgym.training.torch_ppo.network import (
    Agent,
    AnyAgent,
    make_optimizer,
    ppo_update,
    rollout_sampler,
)
from feedbackgym.training.torch_ppo.ppo_config import PPOConfig
from feedbackgym.training.torch_ppo.update_worker import UpdateWorker
from feedbackgym.training.workers.env_groups import StepBatch

with requires_extra("baselines", "torch"):
    import torch


class Rollout:
    """One round's experience, in host arrays preallocated once, and where each episode's steps are.

    The learner writes a step's rows as they come (no device copy a step);
    :meth:`Learner.update` moves the round to the device once.

    Args:
        n_steps: Steps per env per round.
        n_envs: Envs.
        obs_size: Width of the flat observation.
    """

    def __init__(self, n_steps: int, n_envs: int, obs_size: int):
        shape = (n_steps, n_envs)
        self.obs = np.zeros((*shape, obs_size), np.float32)
        self.actions = np.zeros(shape, np.int64)
        self.logprobs = np.zeros(shape, np.float32)
        self.rewards = np.zeros(shape, np.float32)
        self.dones = np.zeros(shape, np.float32)
        self.values = np.zeros(shape, np.float32)
        self.episode = np.zeros(shape, np.int64)
        """Each step's episode number in its env (the ``episode`` of
        :class:`~feedbackgym.training.common.trainer_view.Credit`)."""
        self.episode_step = np.zeros(shape, np.int64)
        self.credit_applied = 0
        self.credit_dropped = 0

    def add_credit(self, env: int, credit: Credit) -> None:
        """Adds a review's credit to the rewards of its episode's steps in this round."""
        steps = np.flatnonzero(self.episode[:, env] == credit.episode)
        for k, value in enumerate(credit.values):
            if not value:
                continue
            index = credit.start + k - (self.episode_step[steps[0], env] if len(steps) else 0)
            if len(steps) and 0 <= index < len(steps):
                self.rewards[steps[index], env] += value
                self.credit_applied += 1
            else:  # a step of an earlier round: trained on already
                self.credit_dropped += 1


def make_agent(config: PPOConfig, envs: Any, critic_fields: tuple[str, ...] = ()) -> AnyAgent:
    """A new agent of the run's policy for ``envs`` (the entity policy reads their layout).

    Args:
        config: The run's settings.
        envs: The training envs (trainer views).
        critic_fields: Observation keys only the critic reads
            (:meth:`~feedbackgym.config.FeedbackConfig.critic_fields`).

    Raises:
        PolicyMismatchError: The entity policy, and the envs declare no entity view.
    """
    assert config.net_arch is not None  # resolved by PPOConfig
    hidden = config.net_arch[0]
    if not config.masks:  # the MLP
        obs_size = int(np.prod(envs.single_observation_space.shape))
        critic = envs.call("critic_columns", critic_fields)[0]
        n_actions = int(envs.single_action_space.n)
        return Agent(obs_size, n_actions, hidden, config.text_columns, critic_columns=critic)
    layout = envs.call("entity_layout")[0]
    if layout is None:
        raise PolicyMismatchError(f"{config.env_id} declares no entity view: use policy 'mlp'")
    entity, globals_ = layout.feature_columns(critic_fields)
    return EntityAgent(
        layout,
        hidden,
        text_length=config.text_columns,
        critic_columns=globals_,
        critic_entity_columns=entity,
    )


def check_checkpoint(saved: dict[str, Any], wanted: dict[str, Any]) -> None:
    """Raises PolicyMismatchError unless a checkpoint's agent ``saved`` is of ``wanted``'s shape.

    Example:
        >>> check_checkpoint({"obs_size": 4}, {"policy": "entity"})
        Traceback (most recent call last):
        ...
        feedbackgym.training.common.entity_network.PolicyMismatchError: the checkpoint holds \
an mlp policy; this run trains an entity policy
    """
    policies = saved.get("policy", "mlp"), wanted.get("policy", "mlp")
    if policies[0] != policies[1]:
        raise PolicyMismatchError(
            f"the checkpoint holds an {policies[0]} policy; this run trains an {policies[1]} policy"
        )
    if saved != wanted:
        changed = sorted(k for k in saved.keys() | wanted.keys() if saved.get(k) != wanted.get(k))
        raise PolicyMismatchError(
            f"the checkpoint's {policies[0]} policy has another shape ({', '.join(changed)}: "
            + "; ".join(f"{saved.get(k)!r} -> {wanted.get(k)!r}" for k in changed)
            + ")"
        )


class Learner:
    """Collects rounds from a vector env and updates the agent: the PPO loop, a round at a time.

    Args:
        config: The run's settings.
        envs: The envs (:func:`make_vector_env`).
        feedback: The run's feedback config as it starts: its shaping's discount is
            PPO's, and its critic-only fields
            (:meth:`~feedbackgym.config.FeedbackConfig.critic_fields`) are kept from the actor.
        device: Where the agent and the tensors live.
    """

    def __init__(
        self, config: PPOConfig, envs: Any, feedback: FeedbackConfig, device: torch.device
    ) -> None:
        self.config = config
        self.envs = envs
        self.gamma = feedback.shaping.gamma
        self.device = device
        obs_size = int(np.prod(envs.single_observation_space.shape))
        self.agent = make_agent(config, envs, feedback.critic_fields()).to(device)
        self.optimizer = make_optimizer(self.agent, config.learning_rate)
        self.learning_rate = config.learning_rate
        self._losses: dict[str, float] = {}
        self.updater: UpdateWorker | None = None
        """With ``overlap_update``, where the update runs from the first on: from then on it
        owns the trained weights and the optimizer (``optimizer`` is left behind)."""
        self.buffer = Rollout(config.n_steps, config.n_envs, obs_size)
        self.next_obs: np.ndarray | None = None
        self._returns = np.zeros(config.n_envs)
        self._episode = np.zeros(config.n_envs, np.int64)
        self._episode_step = np.zeros(config.n_envs, np.int64)
        self.episode_returns: list[float] = []
        """Env returns (without shaping) of the last 100 finished episodes."""
        self.episode_successes: list[bool] = []
        self._finished: list[float] = []
        self._successes: list[bool] = []

    def reset(self, seed: int) -> None:
        """Resets every env (env ``i`` with ``seed + i``)."""
        self.next_obs = self.envs.reset(seed).copy()
        self._episode[:] = 0
        self._episode_step[:] = 0
        self._returns[:] = 0.0

    def collect(self) -> dict[str, float]:
        """Plays one round; returns its episodes' mean env return and success (when any ended).

        Group by group, as each becomes ready: while some groups' envs step (in
        their workers), the learner records another's last step and picks its
        next actions (:meth:`~feedbackgym.training.workers.env_groups.EnvWorkers.step_wait_any`). A
        slow
        step holds up only its own group; each group plays ``n_steps`` steps
        in order, so every env's column of the round is its own trajectory. Each
        group draws its actions from its own generator, seeded from torch's at
        the round's start, so the round does not depend on which group
        finished first. In this process the groups take turns, as in lockstep.
        """
        assert self.next_obs is not None, "reset() first"
        self._finished, self._successes = [], []
        policy = rollout_sampler(self.agent)
        groups = self.envs.groups
        seeds = torch.randint(2**62, (len(groups),)).tolist()
        draws = [torch.Generator(device=self.device).manual_seed(s) for s in seeds]
        played = [0] * len(groups)
        for group, rows in enumerate(groups):
            self._act(policy, 0, group, rows, draws[group])
        stepping = len(groups)
        while stepping:
            group, step = self.envs.step_wait_any()
            rows = groups[group]
            self._record(played[group], rows, step)
            played[group] += 1
            if played[group] < self.config.n_steps:
                self._act(policy, played[group], group, rows, draws[group])
            else:
                stepping -= 1
        for env, credits in enumerate(self.envs.call("take_credits")):  # taken even if unused
            for credit in credits if self.config.review_credit else ():
                self.buffer.add_credit(env, credit)
        finished, successes = self._finished, self._successes
        self.episode_returns = (self.episode_returns + finished)[-100:]
        self.episode_successes = (self.episode_successes + successes)[-100:]
        trend = {"episodes": float(len(finished))}
        if finished:
            trend.update(mean_return=float(np.mean(finished)), success=float(np.mean(successes)))
        return trend

    def _act(self, policy: Any, t: int, group: int, rows: slice, draw: torch.Generator) -> None:
        """Picks step ``t``'s actions for ``group``'s envs with ``policy``; starts their step."""
        buffer, obs = self.buffer, self.next_obs[rows]  # type: ignore[index]
        buffer.obs[t, rows] = obs
        buffer.episode[t, rows] = self._episode[rows]
        buffer.episode_step[t, rows] = self._episode_step[rows]
        action, logprob, value = policy(torch.as_tensor(obs, device=self.device), draw)
        actions = action.cpu().numpy()
        buffer.actions[t, rows] = actions
        buffer.logprobs[t, rows] = logprob.cpu().numpy()
        buffer.values[t, rows] = value.cpu().numpy()
        self.envs.step_async(group, actions)

    def _record(self, t: int, rows: slice, step: StepBatch) -> None:
        """Files step ``t`` of the envs at ``rows``; keeps their next observations."""
        buffer = self.buffer
        done = step.terminated | step.truncated
        buffer.rewards[t, rows] = step.reward
        buffer.dones[t, rows] = done
        cut = np.flatnonzero(step.truncated & ~step.terminated)  # a terminal step ends it
        if len(cut) and not self.config.time_limit_terminal:
            # a cut-off episode's value, from its final observation
            with torch.inference_mode():
                final = torch.as_tensor(step.final_obs[cut], device=self.device)
                bootstrap = self.agent.value(final).cpu().numpy()
            buffer.rewards[t, rows.start + cut] += self.gamma * bootstrap
        returns = self._returns[rows]
        returns += step.env_reward
        self._episode_step[rows] += 1
        if done.any():
            self._finished += returns[done].tolist()
            self._successes += step.is_success[done].tolist()
            returns[done] = 0.0
            self._episode[rows][done] += 1
            self._episode_step[rows][done] = 0
        self.next_obs[rows] = step.obs  # type: ignore[index]

    def advantages(self) -> tuple[np.ndarray, np.ndarray]:
        """GAE advantages and returns of the round in the buffer."""
        buffer, gamma, lam = self.buffer, self.gamma, self.config.gae_lambda
        assert self.next_obs is not None
        with torch.inference_mode():
            next_obs = torch.as_tensor(self.next_obs, device=self.device)
            next_value = self.agent.value(next_obs).cpu().numpy()
        advantages = np.zeros_like(buffer.rewards)
        last = np.zeros_like(next_value)
        for t in reversed(range(self.config.n_steps)):
            following = next_value if t == self.config.n_steps - 1 else buffer.values[t + 1]
            not_done = 1.0 - buffer.dones[t]
            delta = buffer.rewards[t] + gamma * following * not_done - buffer.values[t]
            last = delta + gamma * lam * not_done * last
            advantages[t] = last
        return advantages, advantages + buffer.values

    def start_update(self, learning_rate: float | None = None) -> None:
        """Starts PPO's update on the round in the buffer (in the update worker, if any).

        The advantages are worked out here, with the weights that played the
        round; with an update worker the buffer is free again on return.
        """
        if learning_rate is not None:
            self.learning_rate = learning_rate
        buffer = self.buffer
        advantages, returns = self.advantages()
        batch = {
            key: array.reshape(-1, *array.shape[2:])  # (steps, envs, ...) -> (samples, ...)
            for key, array in (
                ("obs", buffer.obs),
                ("actions", buffer.actions),
                ("logprobs", buffer.logprobs),
                ("advantages", advantages),
                ("returns", returns),
            )
        }
        if self.config.overlap_update:
            if self.updater is None:  # it takes over the weights and the optimizer as they are
                self.updater = UpdateWorker(
                    self.agent,
                    self.config.update_settings,
                    threads=self.config.update_threads,
                    optimizer=self.optimizer,
                )
            self.updater.start(batch, self.learning_rate)
        else:
            self._losses = self._update_here(batch)

    def finish_update(self) -> dict[str, float]:
        """Waits for the update :meth:`start_update` began; returns its mean losses.

        With an update worker the acting weights become the worker's new ones.
        """
        if self.updater is None:
            return self._losses
        losses, weights = self.updater.result()
        self.agent.load_state_dict(weights)
        return losses

    def update(self, learning_rate: float | None = None) -> dict[str, float]:
        """PPO's clipped update on the round in the buffer; returns the mean losses."""
        self.start_update(learning_rate)
        return self.finish_update()

    def _update_here(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        config = self.config
        self.optimizer.param_groups[0]["lr"] = self.learning_rate
        tensors = {key: torch.as_tensor(array, device=self.device) for key, array in batch.items()}
        if self.device.type != "cpu":
            return ppo_update(self.agent, self.optimizer, tensors, config.update_settings)
        threads = torch.get_num_threads()
        torch.set_num_threads(max(1, min(config.update_threads, os.cpu_count() or 1)))
        try:
            return ppo_update(self.agent, self.optimizer, tensors, config.update_settings)
        finally:
            torch.set_num_threads(threads)

    def state_dict(self) -> dict[str, Any]:
        """The agent (with what rebuilds it) and the optimizer: a checkpoint."""
        if self.updater is not None:
            return {**self.updater.state_dict(), "shape": self.agent.shape}
        return {
            "agent": self.agent.state_dict(),
            "shape": self.agent.shape,
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores :meth:`state_dict` output.

        Raises:
            PolicyMismatchError: The checkpoint is of the other policy, or of other widths.
        """
        check_checkpoint(state["shape"], self.agent.shape)
        self.agent.load_state_dict(state["agent"])
        if self.updater is not None:
            self.updater.load_state_dict(state)
        else:
            self.optimizer.load_state_dict(state["optimizer"])

    def close(self) -> None:
        """Stops the update worker, if any."""
        if self.updater is not None:
            self.updater.close()
