"""A CleanRL-style PPO in plain torch that consumes the feedback stack at the speed of the envs.

It trains over a Gymnasium vector env (in-process, or subprocess workers) of
the arm's stack, each env seen through :class:`~.flat.TrainerView`: one flat
``float32`` observation (the text, if used, as byte codes read by an
embedding) and an info of two keys, so neither the vector env nor the learner
handles per-key dicts. Actor and critic are separate MLPs (as SB3's
``MultiInputPolicy`` with ``net_arch=[h, h]``). Review credit is added to the
rewards of the round's steps before the advantages are computed, as the SB3
path does. Each iteration is a round: the run's
:class:`~feedbackgym.control.FeedbackController` takes the last round's trend
(``loss``, ``mean_return``, ``success``) and pushes the round's feedback state
to every env. It runs on CUDA when asked (``device="auto"`` and a GPU), else
on the CPU with one torch thread.

:func:`train` is the loop alone (what an experiment script calls);
:mod:`feedbackgym.baselines.torch_run` adds the run directory (TensorBoard,
validation, checkpoints, resume, recording) that ``feedbackgym train`` and
``feedbackgym compare --trainer torch`` use.

Usage::

    python -m feedbackgym.baselines.ppo --env feedbackgym/OpsIncidentEasy-v0 \
        --arm guide-then-review+shaping
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any

import numpy as np

from feedbackgym.baselines.agent import (
    Agent,
    FusedPolicy,
    UpdateSettings,
    make_optimizer,
    ppo_update,
)
from feedbackgym.baselines.arms import ArmFeedback, rounds_for
from feedbackgym.baselines.device import resolve_device
from feedbackgym.baselines.env_workers import (
    EnvGroups,
    EnvWorkers,
    StepBatch,
    check_env_backend,
    steps_slowly,
    worker_layout,
)
from feedbackgym.baselines.flat import Credit, trainer_env
from feedbackgym.baselines.system import SystemMonitor
from feedbackgym.baselines.update_worker import UpdateWorker
from feedbackgym.config import FeedbackConfig
from feedbackgym.control import FeedbackController
from feedbackgym.errors import DependencyNotInstalled

try:
    import torch
except ImportError as error:
    raise DependencyNotInstalled.for_extra("torch", "baselines") from error

__all__ = [
    "Agent",
    "FusedPolicy",
    "Learner",
    "PPOConfig",
    "RoundResult",
    "Rollout",
    "make_vector_env",
    "resolve_device",
    "round_trend",
    "start_learner",
    "train",
    "train_rounds",
]


@dataclass
class PPOConfig(ArmFeedback):
    """PPO settings (CleanRL's names).

    Attributes:
        env_id: The env.
        arm: The comparison arm whose stack to train on.
        seed: Seed of torch, numpy and the envs.
        total_timesteps: Env steps to train for.
        num_envs: Parallel envs.
        num_steps: Steps per env per round.
        workers: Worker processes that step the envs, two groups each: a worker
            steps one group while the learner picks the other's actions (0:
            every env in the learner's process; ``None``: 0, or for envs with
            slow steps such as web and code, one per env up to
            :data:`~.env_workers.SLOW_ENV_WORKERS`, each env stepped as soon as
            its last step is back). See :func:`~.env_workers.worker_layout`.
            With ``env_backend="ray"``: the Ray actors that hold the envs
            (``None`` or 0: 2, or 4 for envs with slow steps; see
            :func:`~.ray_envs.actor_layout`).
        env_backend: Where the envs live: ``"processes"`` (this machine) or
            ``"ray"`` (Ray actors of ``env_actor_cpus`` CPUs each, spread over
            the cluster's nodes: :class:`~.ray_envs.RayEnvWorkers`; needs the
            ``ray`` extra).
        env_actor_cpus: CPUs each env actor asks for (``env_backend="ray"``).
        use_text: Also read the text observation (needs ``obs_mode="both"`` in ``env_kwargs``).
        text_length: Characters of text the embedding reads.
        learning_rate: Adam's step size.
        anneal_lr: Decay the learning rate linearly to 0 over the run.
        gae_lambda: GAE's λ.
        num_minibatches: Minibatches per epoch.
        update_epochs: Epochs per round.
        update_threads: Torch threads for the update on the CPU (the envs wait
            meanwhile; inference between env steps keeps one). More threads than
            free cores (runs side by side) slow every run down many times over.
        overlap_update: Train each round in an update worker process while the
            next round is collected with the weights before that update (one
            update stale; the controller hears a round's loss one round later).
            See :mod:`~.update_worker`.
        clip_coef: PPO's clip.
        ent_coef: Entropy bonus.
        vf_coef: Value-loss weight.
        max_grad_norm: Gradient clip.
        hidden: Hidden layer width (two layers, actor and critic each).
        review_credit: Add review credit to the rewards of the round's steps.
        time_limit_terminal: Treat an episode cut off by its time limit as ended
            rather than bootstrapping its value from its final observation.
        bc_episodes: Expert episodes for a behaviour-cloning warm-up (0: none).
        device: ``"auto"`` (CUDA when available), ``"cuda"`` or ``"cpu"``.
        feedback: The feedback config the arm's preset goes on; its
            ``shaping.gamma`` is the discount.
        feedback_file: A YAML/TOML config file to follow instead of ``feedback``
            (edits apply at the next round); ``feedback_overrides`` go on top.
        feedback_overrides: ``{section: {field: value}}`` applied to every version read.
        env_kwargs: Keyword arguments for ``gym.make``.
    """

    env_id: str
    arm: str = "guide-then-review+shaping"
    seed: int = 0
    total_timesteps: int = 50_000
    num_envs: int = 8
    num_steps: int = 128
    workers: int | None = None
    env_backend: str = "processes"
    env_actor_cpus: float = 1.0
    use_text: bool = False
    text_length: int = 512
    learning_rate: float = 3e-4
    anneal_lr: bool = False
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    update_threads: int = 2
    overlap_update: bool = False
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 128
    review_credit: bool = True
    time_limit_terminal: bool = False
    bc_episodes: int = 0
    device: str = "auto"
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)
    feedback_file: str | None = None
    feedback_overrides: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_env_backend(self.env_backend, self.env_actor_cpus)

    @property
    def rounds(self) -> int:
        """Training rounds (iterations)."""
        return rounds_for(self.total_timesteps, self.num_envs, self.num_steps)

    @property
    def update_settings(self) -> UpdateSettings:
        """What :func:`~.agent.ppo_update` needs of these settings."""
        return UpdateSettings(**{f.name: getattr(self, f.name) for f in fields(UpdateSettings)})


def make_vector_env(
    config: PPOConfig, feedback: FeedbackConfig, *, record: Any = None
) -> EnvGroups:
    """``num_envs`` stacks as ``feedback`` describes, each seen through :class:`~.flat.TrainerView`.

    In the learner's process, or in worker processes (see :func:`~.env_workers.worker_layout`),
    or with ``env_backend="ray"`` in Ray actors over a cluster's nodes
    (:class:`~.ray_envs.RayEnvWorkers`; a recording store goes to them as its
    path, so each actor writes on its node).
    ``record`` is a store, or its path. A store goes to worker processes as its
    path and options: each worker's envs share one copy (one shard, or one
    writer process with ``writer="process"``); with a path, each env opens its own.
    """
    text_length = config.text_length if config.use_text else 0
    build = partial(trainer_env, config.env_id, feedback, text_length, record, **config.env_kwargs)
    if config.env_backend == "ray":
        from feedbackgym.baselines.ray_envs import ray_env_workers

        return ray_env_workers(
            [build] * config.num_envs,
            config.workers,
            slow=steps_slowly(config.env_id),
            num_cpus=config.env_actor_cpus,
        )
    processes, groups = worker_layout(config.env_id, config.num_envs, config.workers)
    return EnvWorkers([build] * config.num_envs, groups=groups, processes=processes)


class Rollout:
    """One round's experience, in host arrays preallocated once, and where each episode's steps are.

    The learner writes a step's rows as they come (no device copy a step);
    :meth:`Learner.update` moves the round to the device once.

    Args:
        num_steps: Steps per env per round.
        num_envs: Envs.
        obs_size: Width of the flat observation.
    """

    def __init__(self, num_steps: int, num_envs: int, obs_size: int):
        shape = (num_steps, num_envs)
        self.obs = np.zeros((*shape, obs_size), np.float32)
        self.actions = np.zeros(shape, np.int64)
        self.logprobs = np.zeros(shape, np.float32)
        self.rewards = np.zeros(shape, np.float32)
        self.dones = np.zeros(shape, np.float32)
        self.values = np.zeros(shape, np.float32)
        self.episode = np.zeros(shape, np.int64)
        """Each step's episode number in its env (:class:`~.flat.Credit`'s ``episode``)."""
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


class Learner:
    """Collects rounds from a vector env and updates the agent: the PPO loop, a round at a time.

    Args:
        config: The run's settings.
        envs: The envs (:func:`make_vector_env`).
        gamma: The discount (the shaping's).
        device: Where the agent and the tensors live.
    """

    def __init__(self, config: PPOConfig, envs: Any, gamma: float, device: torch.device) -> None:
        self.config = config
        self.envs = envs
        self.gamma = gamma
        self.device = device
        obs_size = int(np.prod(envs.single_observation_space.shape))
        text_length = config.text_length if config.use_text else 0
        n_actions = int(envs.single_action_space.n)
        self.agent = Agent(obs_size, n_actions, config.hidden, text_length).to(device)
        self.optimizer = make_optimizer(self.agent, config.learning_rate)
        self.learning_rate = config.learning_rate
        self._losses: dict[str, float] = {}
        self.updater: UpdateWorker | None = None
        """With ``overlap_update``, where the update runs from the first on: from then on it
        owns the trained weights and the optimizer (``optimizer`` is left behind)."""
        self.buffer = Rollout(config.num_steps, config.num_envs, obs_size)
        self.next_obs: np.ndarray | None = None
        self._returns = np.zeros(config.num_envs)
        self._episode = np.zeros(config.num_envs, np.int64)
        self._episode_step = np.zeros(config.num_envs, np.int64)
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
        next actions (:meth:`~.env_workers.EnvWorkers.step_wait_any`). A slow
        step holds up only its own group; each group plays ``num_steps`` steps
        in order, so every env's column of the round is its own trajectory. Each
        group draws its actions from its own generator, seeded from torch's at
        the round's start, so the round does not depend on which group
        finished first. In this process the groups take turns, as in lockstep.
        """
        assert self.next_obs is not None, "reset() first"
        self._finished, self._successes = [], []
        policy = FusedPolicy(self.agent)
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
            if played[group] < self.config.num_steps:
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

    def _act(
        self, policy: FusedPolicy, t: int, group: int, rows: slice, draw: torch.Generator
    ) -> None:
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
        for t in reversed(range(self.config.num_steps)):
            following = next_value if t == self.config.num_steps - 1 else buffer.values[t + 1]
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
        """Restores :meth:`state_dict` output."""
        self.agent.load_state_dict(state["agent"])
        if self.updater is not None:
            self.updater.load_state_dict(state)
        else:
            self.optimizer.load_state_dict(state["optimizer"])

    def close(self) -> None:
        """Stops the update worker, if any."""
        if self.updater is not None:
            self.updater.close()


def round_trend(losses: dict[str, float] | None, collected: dict[str, float]) -> dict[str, float]:
    """What a round reports to the controller: its loss, its episodes' mean return and success.

    ``losses`` is ``None`` when no update has finished yet (an overlapped first round).
    """
    trend = {k: v for k, v in collected.items() if k != "episodes"}
    return trend if losses is None else {"loss": losses["loss"], **trend}


@dataclass(frozen=True)
class RoundResult:
    """A round of :func:`train_rounds`, trained on.

    Attributes:
        index: The round.
        learning_rate: Its learning rate.
        collected: What :meth:`Learner.collect` returned for it.
        losses: Its update's mean losses.
        trend: What it reported to the controller (the last round: would report).
        seen: What ``seen()`` returned right after the round was collected.
    """

    index: int
    learning_rate: float
    collected: dict[str, float]
    losses: dict[str, float]
    trend: dict[str, float]
    seen: Any


def train_rounds(
    learner: Learner,
    controller: Any,
    first_round: int,
    seen: Callable[[], Any] = lambda: None,
) -> Generator[RoundResult, None, None]:
    """Collects and trains rounds ``first_round`` to the last; yields each once trained on.

    The controller must be on ``first_round`` already; each next round's state
    is set from the round's trend before that round is collected. Without an
    update worker a round is collected after the consumer has handled the one
    before (``collect, update, report, yield``); with one, round ``r + 1`` is
    collected while round ``r`` trains, from the trend of round ``r``'s
    collection and round ``r - 1``'s loss.

    While it runs, the objects that exist when it starts (torch's, the
    envs', the agent's) are left out of the garbage collector's passes
    (:func:`gc.freeze`): each full pass would walk every one of them again
    (~300,000 in a trainer, ~160 ms a pass), for no garbage. They are
    put back when it ends or is closed (a consumer that keeps it after an
    error should close it). If objects are frozen already when it starts,
    that freeze is the caller's, and left as it is.

    Args:
        learner: The learner (reset).
        controller: The run's :class:`~feedbackgym.control.FeedbackController`.
        first_round: The round to start at.
        seen: Called right after each round's collection; its value is the
            round's :attr:`RoundResult.seen` (e.g. the envs' feedback counts).
    """
    config = learner.config
    overlap = config.overlap_update
    owner = not gc.get_freeze_count()  # a freeze already held (the caller's) is left as it is
    if owner:
        gc.freeze()
    try:
        collected, observed = learner.collect(), seen()
        losses_before: dict[str, float] | None = None
        for round_ in range(first_round, config.rounds):
            last = round_ + 1 >= config.rounds
            learning_rate = learning_rate_at(config, round_)
            learner.start_update(learning_rate)
            if overlap and not last:
                trend = round_trend(losses_before, collected)
                controller.update(round_ + 1, **trend)
                following = learner.collect(), seen()
            losses = learner.finish_update()
            if not overlap or last:
                trend = round_trend(losses, collected)
                if not last:
                    controller.update(round_ + 1, **trend)
            yield RoundResult(round_, learning_rate, collected, losses, trend, observed)
            if last:
                return
            if not overlap:
                following = learner.collect(), seen()
            (collected, observed), losses_before = following, losses
    finally:
        if owner:
            gc.unfreeze()


def learning_rate_at(config: PPOConfig, round_: int) -> float:
    """The learning rate of round ``round_`` (linear decay to 0 with ``anneal_lr``)."""
    if not config.anneal_lr:
        return config.learning_rate
    return config.learning_rate * (1.0 - round_ / config.rounds)


def train(
    config: PPOConfig,
    *,
    on_round: Callable[[int, dict[str, float]], None] | None = None,
    record: Any = None,
) -> tuple[Agent, list[dict[str, float]]]:
    """Trains PPO on the arm's stack; returns the agent and one metrics dict per round.

    With ``record`` (a :class:`~feedbackgym.datasets.TrajectoryStore` or its path)
    every training episode is recorded there.

    A round's metrics: the losses, mean return and success of the episodes that
    ended in it, their count, the guide and review weights, and the system
    metrics of :class:`~.system.SystemMonitor` (CPU, memory, ``steps_per_s``;
    GPU memory and utilisation on CUDA).
    """
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    device = resolve_device(config.device)
    history: list[dict[str, float]] = []
    learner, controller = start_learner(config, device, record=record)
    system = SystemMonitor()  # from here: building the envs is not a round's
    try:
        if config.bc_episodes:
            clone_into(learner.agent, config, controller.config, device)
        for done in train_rounds(learner, controller, 0, seen=lambda: controller.state):
            metrics = {
                **done.losses,
                "mean_return": done.collected.get("mean_return", float("nan")),
                "episodes": done.collected["episodes"],
                "guide_weight": done.seen.guide_weight,
                "review_weight": done.seen.review_weight,
                **system.sample(steps=(done.index + 1) * config.num_envs * config.num_steps),
            }
            history.append(metrics)
            if on_round is not None:
                on_round(done.index, metrics)
    finally:
        learner.close()
        learner.envs.close()
    return learner.agent, history


def start_learner(
    config: PPOConfig, device: torch.device, *, record: Any = None
) -> tuple[Learner, FeedbackController]:
    """A learner on new envs, reset, and the arm's controller attached to them at round 0.

    What every torch training loop starts with (:func:`train`, benchmarks);
    on an error the envs are closed.

    Args:
        config: The run's settings.
        device: Where the agent lives.
        record: A store (or its path) to record every training episode in.

    Returns:
        The learner (its :attr:`Learner.envs` are the new envs) and the
        :class:`~feedbackgym.control.FeedbackController`.

    Example:
        >>> config = PPOConfig("feedbackgym/OpsIncidentEasy-v0", num_envs=2, num_steps=8)
        >>> learner, controller = start_learner(config, torch.device("cpu"))
        >>> learner.next_obs.shape[0], controller.state.round
        (2, 0)
        >>> learner.envs.close()
    """
    controller = config.controller()
    envs = make_vector_env(config, controller.config, record=record)
    try:
        learner = Learner(config, envs, controller.config.shaping.gamma, device)
        controller.attach(envs)
        learner.reset(config.seed)
        controller.update(0)
    except BaseException:
        envs.close()
        raise
    return learner, controller


def clone_into(
    agent: Agent, config: PPOConfig, feedback: FeedbackConfig, device: torch.device
) -> float:
    """Behaviour-clones ``config.bc_episodes`` expert episodes into ``agent``; returns the loss."""
    from feedbackgym.baselines.bc import collect_expert, fit_log_prob

    text_length = config.text_length if config.use_text else 0
    env = trainer_env(config.env_id, feedback, text_length, **config.env_kwargs)
    try:
        observations, actions = collect_expert(env, config.bc_episodes, config.seed)
    finally:
        env.close()

    def log_prob(obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return agent.act(obs, act)[1]

    return fit_log_prob(
        log_prob, agent.parameters(), observations, actions, device=str(device), seed=config.seed
    )


def main(argv: list[str] | None = None) -> None:
    """Command line: train and print one line per round."""
    parser = argparse.ArgumentParser(description="CleanRL-style PPO over the feedback stack")
    parser.add_argument("--env", dest="env_id", default="feedbackgym/OpsIncidentEasy-v0")
    parser.add_argument("--arm", default="guide-then-review+shaping")
    parser.add_argument("--total-timesteps", type=int, default=50_000)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--use-text", action="store_true")
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="feedback config (YAML or TOML) to follow: edits apply at the next round",
    )
    args = parser.parse_args(argv)
    env_kwargs = {"obs_mode": "both"} if args.use_text else {}
    config = PPOConfig(
        env_id=args.env_id,
        arm=args.arm,
        total_timesteps=args.total_timesteps,
        num_envs=args.num_envs,
        seed=args.seed,
        use_text=args.use_text,
        device=args.device,
        feedback_file=args.config,
        env_kwargs=env_kwargs,
    )
    start = time.perf_counter()

    def report(round_: int, metrics: dict[str, float]) -> None:
        print(
            f"round {round_}: " + " ".join(f"{k}={v:.3f}" for k, v in metrics.items()), flush=True
        )

    train(config, on_round=report)
    print(f"device {resolve_device(config.device)}, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
