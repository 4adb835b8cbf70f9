"""A CleanRL-style PPO in plain torch that consumes the feedback stack: proof that any trainer can.

It trains over Gymnasium vector envs (sync or async workers), reads the Dict
observation (every key flattened) and, optionally, the text observation through
a byte-level embedding, and runs on CUDA when a GPU is present, else on the
CPU. Each iteration is a round: its :class:`~feedbackgym.control.FeedbackController`
takes the last round's trend (``loss``, ``mean_return``, ``success``) and pushes
the round's feedback state to every env through the vector env's ``call``,
exactly as the SB3 callbacks do.

Usage::

    python -m feedbackgym.baselines.ppo --env feedbackgym/OpsIncidentEasy-v0 --arm guide-then-review
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from feedbackgym.baselines.arms import ArmFeedback, rounds_for
from feedbackgym.baselines.system import SystemMonitor
from feedbackgym.config import FeedbackConfig
from feedbackgym.errors import DependencyNotInstalled
from feedbackgym.protocol import ENV_REWARD, IS_SUCCESS
from feedbackgym.wrappers.stack import make

try:
    import torch
    from torch import nn
    from torch.distributions import Categorical
except ImportError as error:
    raise DependencyNotInstalled.for_extra("torch", "baselines") from error

__all__ = ["Agent", "PPOConfig", "train"]

TEXT_VOCAB = 128


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
        async_envs: Subprocess workers (``AsyncVectorEnv``) instead of in-process ones.
        use_text: Also read the text observation (needs ``obs_mode="both"`` in ``env_kwargs``).
        text_length: Characters of text the embedding reads.
        learning_rate: Adam's step size.
        gae_lambda: GAE's λ.
        num_minibatches: Minibatches per epoch.
        update_epochs: Epochs per round.
        clip_coef: PPO's clip.
        ent_coef: Entropy bonus.
        vf_coef: Value-loss weight.
        max_grad_norm: Gradient clip.
        hidden: Hidden layer width.
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
    arm: str = "guide-then-review"
    seed: int = 0
    total_timesteps: int = 50_000
    num_envs: int = 8
    num_steps: int = 128
    async_envs: bool = False
    use_text: bool = False
    text_length: int = 512
    learning_rate: float = 3e-4
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 128
    bc_episodes: int = 0
    device: str = "auto"
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)
    feedback_file: str | None = None
    feedback_overrides: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def rounds(self) -> int:
        """Training rounds (iterations)."""
        return rounds_for(self.total_timesteps, self.num_envs, self.num_steps)


def _vector_keys(space: gym.spaces.Dict) -> list[tuple[str, int]]:
    keys = []
    for key, sub in space.spaces.items():
        if isinstance(sub, gym.spaces.Text):
            continue
        size = sub.n if isinstance(sub, gym.spaces.Discrete) else int(np.prod(sub.shape or ()))
        keys.append((key, int(size)))
    return keys


class Agent(nn.Module):
    """Actor-critic over a Dict observation (plus optional text)."""

    def __init__(self, space: gym.spaces.Dict, n_actions: int, config: PPOConfig) -> None:
        super().__init__()
        self.keys = _vector_keys(space)
        self.discrete = {k for k, s in space.spaces.items() if isinstance(s, gym.spaces.Discrete)}
        self.use_text = config.use_text
        self.text_length = config.text_length
        width = sum(size for _, size in self.keys)
        if self.use_text:
            self.embedding = nn.Embedding(TEXT_VOCAB, 32)
            width += 32
        self.trunk = nn.Sequential(
            nn.Linear(width, config.hidden),
            nn.Tanh(),
            nn.Linear(config.hidden, config.hidden),
            nn.Tanh(),
        )
        self.actor = nn.Linear(config.hidden, n_actions)
        self.critic = nn.Linear(config.hidden, 1)

    def features(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Flattens every key (one-hot for ``Discrete``) and embeds the text."""
        parts = []
        for key, size in self.keys:
            value = obs[key]
            if key in self.discrete:
                parts.append(nn.functional.one_hot(value.long().reshape(-1), size).float())
            else:
                parts.append(value.reshape(value.shape[0], -1).float())
        if self.use_text:
            tokens = obs["text_tokens"]
            mask = (tokens > 0).float().unsqueeze(-1)
            pooled = (self.embedding(tokens) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            parts.append(pooled)
        return self.trunk(torch.cat(parts, dim=1))

    def value(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """The critic's value."""
        return self.critic(self.features(obs)).squeeze(-1)

    def act(
        self, obs: dict[str, torch.Tensor], action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Samples (or scores) an action: action, log-prob, entropy, value."""
        hidden = self.features(obs)
        distribution = Categorical(logits=self.actor(hidden))
        if action is None:
            action = distribution.sample()
        return (
            action,
            distribution.log_prob(action),
            distribution.entropy(),
            self.critic(hidden).squeeze(-1),
        )


def tokenize(texts: Any, length: int) -> np.ndarray:
    """Bytes of each text (7-bit, 0 is padding), cut or padded to ``length``."""
    out = np.zeros((len(texts), length), np.int64)
    for row, text in enumerate(texts):
        codes = np.frombuffer(str(text).encode("ascii", "replace")[-length:], np.uint8)
        out[row, : len(codes)] = np.maximum(codes % TEXT_VOCAB, 1)
    return out


def to_tensors(obs: dict[str, Any], agent: Agent, device: torch.device) -> dict[str, torch.Tensor]:
    """A batch of Dict observations as tensors (text as tokens when the agent reads it)."""
    tensors = {k: torch.as_tensor(np.asarray(obs[k]), device=device) for k, _ in agent.keys}
    if agent.use_text:
        tensors["text_tokens"] = torch.as_tensor(
            tokenize(obs["text"], agent.text_length), device=device
        )
    return tensors


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def make_vector_env(config: PPOConfig, feedback: FeedbackConfig) -> Any:
    """The stack ``feedback`` describes in a sync or async vector env with same-step autoreset."""

    def build() -> gym.Env[Any, Any]:
        return make(config.env_id, feedback, **config.env_kwargs)

    vector_cls = gym.vector.AsyncVectorEnv if config.async_envs else gym.vector.SyncVectorEnv
    return vector_cls([build] * config.num_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def train(
    config: PPOConfig, *, on_round: Callable[[int, dict[str, float]], None] | None = None
) -> tuple[Agent, list[dict[str, float]]]:
    """Trains PPO on the arm's stack; returns the agent and one metrics dict per round.

    A round's metrics: the losses, mean return, episodes, guide and review
    weights, and the system metrics of :class:`~.system.SystemMonitor` (CPU,
    memory, ``steps_per_s``; GPU memory and utilisation on CUDA).
    """
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    device = _device(config.device)
    controller = config.controller()
    gamma = controller.config.shaping.gamma
    envs = make_vector_env(config, controller.config)
    assert isinstance(envs.single_observation_space, gym.spaces.Dict)
    agent = Agent(envs.single_observation_space, int(envs.single_action_space.n), config).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=config.learning_rate, eps=1e-5)
    if config.bc_episodes:
        _clone_expert(agent, config, controller.config, device)
    history: list[dict[str, float]] = []
    system = SystemMonitor()
    trend: dict[str, float] = {}
    try:
        controller.attach(envs)
        obs, _ = envs.reset(seed=config.seed)
        returns = np.zeros(config.num_envs)
        for round_ in range(config.rounds):
            state = controller.update(round_, **trend)
            batch, finished, successes, obs = _rollout(
                agent, envs, obs, config, gamma, device, returns
            )
            losses = _update(agent, optimizer, batch, config)
            mean_return = float(np.mean(finished)) if finished else float("nan")
            trend = {"loss": losses["loss"]}
            if finished:
                trend.update(mean_return=mean_return, success=float(np.mean(successes)))
            metrics = {
                **losses,
                "mean_return": mean_return,
                "episodes": float(len(finished)),
                "guide_weight": state.guide_weight,
                "review_weight": state.review_weight,
                **system.sample(steps=(round_ + 1) * config.num_envs * config.num_steps),
            }
            history.append(metrics)
            if on_round is not None:
                on_round(round_, metrics)
    finally:
        envs.close()
    return agent, history


def _rollout(
    agent: Agent,
    envs: Any,
    obs: dict[str, Any],
    config: PPOConfig,
    gamma: float,
    device: torch.device,
    returns: np.ndarray,
) -> tuple[dict[str, Any], list[float], list[bool], dict[str, Any]]:
    """One round's steps: the batch, the finished episodes' returns and successes, the last obs."""
    steps: list[dict[str, torch.Tensor]] = []
    actions, logprobs, rewards, dones, values = [], [], [], [], []
    finished: list[float] = []
    successes: list[bool] = []
    for _ in range(config.num_steps):
        tensors = to_tensors(obs, agent, device)
        with torch.no_grad():
            action, logprob, _, value = agent.act(tensors)
        obs, reward, terminated, truncated, info = envs.step(action.cpu().numpy())
        done = np.logical_or(terminated, truncated)
        env_reward = np.asarray(info.get(ENV_REWARD, reward), np.float64)
        returns += env_reward
        finished += [float(r) for r in returns[done]]
        successes += [bool(x) for x in np.asarray(info.get(IS_SUCCESS, np.zeros(len(done))))[done]]
        returns[done] = 0.0
        steps.append(tensors)
        actions.append(action)
        logprobs.append(logprob)
        rewards.append(torch.as_tensor(reward, dtype=torch.float32, device=device))
        dones.append(torch.as_tensor(done, dtype=torch.float32, device=device))
        values.append(value)
        if truncated.any():  # the value of a truncated episode's final observation, in its reward
            final = to_tensors(_stack_final(info, truncated, obs), agent, device)
            with torch.no_grad():
                bootstrap = agent.value(final)
            rewards[-1] = rewards[-1] + gamma * bootstrap * torch.as_tensor(
                truncated, device=device
            )
    with torch.no_grad():
        next_value = agent.value(to_tensors(obs, agent, device))
    advantages = _gae(
        torch.stack(rewards),
        torch.stack(values),
        torch.stack(dones),
        next_value,
        gamma,
        config.gae_lambda,
    )
    batch = {
        "obs": {k: torch.cat([s[k] for s in steps]) for k in steps[0]},
        "actions": torch.cat(actions),
        "logprobs": torch.cat(logprobs),
        "advantages": advantages.reshape(-1),
        "returns": (advantages + torch.stack(values)).reshape(-1),
    }
    return batch, finished, successes, obs


def _stack_final(
    info: dict[str, Any], truncated: np.ndarray, obs: dict[str, Any]
) -> dict[str, Any]:
    """Observations where truncated envs have their final observation instead of the reset one."""
    finals = info["final_obs"]
    stacked: dict[str, Any] = {}
    for key in obs:
        rows = [finals[i][key] if truncated[i] else obs[key][i] for i in range(len(truncated))]
        stacked[key] = rows if key == "text" else np.stack(rows)
    return stacked


def _gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> torch.Tensor:
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(next_value)
    for t in reversed(range(len(rewards))):
        following = next_value if t == len(rewards) - 1 else values[t + 1]
        not_done = 1.0 - dones[t]
        delta = rewards[t] + gamma * following * not_done - values[t]
        last = delta + gamma * gae_lambda * not_done * last
        advantages[t] = last
    return advantages


def _update(
    agent: Agent, optimizer: torch.optim.Optimizer, batch: dict[str, Any], config: PPOConfig
) -> dict[str, float]:
    size = len(batch["actions"])
    minibatch = max(1, size // config.num_minibatches)
    stats: dict[str, list[float]] = {"loss": [], "policy_loss": [], "value_loss": [], "entropy": []}
    for _ in range(config.update_epochs):
        order = torch.randperm(size)
        for start in range(0, size, minibatch):
            index = order[start : start + minibatch]
            obs = {k: v[index] for k, v in batch["obs"].items()}
            _, logprob, entropy, value = agent.act(obs, batch["actions"][index])
            ratio = (logprob - batch["logprobs"][index]).exp()
            advantages = batch["advantages"][index]
            if len(index) > 1:  # the std of one sample is undefined
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
            policy_loss = torch.max(
                -advantages * ratio,
                -advantages * ratio.clamp(1 - config.clip_coef, 1 + config.clip_coef),
            ).mean()
            value_loss = 0.5 * (value - batch["returns"][index]).pow(2).mean()
            loss = policy_loss - config.ent_coef * entropy.mean() + config.vf_coef * value_loss
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), config.max_grad_norm)
            optimizer.step()
            for key, value_ in (
                ("loss", loss),
                ("policy_loss", policy_loss),
                ("value_loss", value_loss),
                ("entropy", entropy.mean()),
            ):
                stats[key].append(value_.item())
    return {key: float(np.mean(values)) for key, values in stats.items()}


def _clone_expert(
    agent: Agent, config: PPOConfig, feedback: FeedbackConfig, device: torch.device
) -> None:
    from feedbackgym.baselines.bc import collect_expert, fit_log_prob

    env = make(config.env_id, feedback, **config.env_kwargs)
    observations, actions = collect_expert(env, config.bc_episodes, config.seed)
    env.close()
    if agent.use_text:
        observations["text_tokens"] = tokenize(observations.pop("text"), agent.text_length)
    observations.pop("text", None)

    def log_prob(obs: dict[str, torch.Tensor], act: torch.Tensor) -> torch.Tensor:
        return agent.act(obs, act)[1]

    fit_log_prob(
        log_prob, agent.parameters(), observations, actions, device=str(device), seed=config.seed
    )


def main(argv: list[str] | None = None) -> None:
    """Command line: train and print one line per round."""
    parser = argparse.ArgumentParser(description="CleanRL-style PPO over the feedback stack")
    parser.add_argument("--env", dest="env_id", default="feedbackgym/OpsIncidentEasy-v0")
    parser.add_argument("--arm", default="guide-then-review")
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
    print(f"device {_device(config.device)}, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
