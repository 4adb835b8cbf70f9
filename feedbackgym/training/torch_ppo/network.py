"""The torch trainer's network and its PPO update: what the learner and the update worker share.

:class:`Agent` is an actor and a critic MLP over a flat observation;
:class:`FusedPolicy` joins them for the rollout's inference; :func:`ppo_update`
is PPO's clipped update over one round, run by the learner itself or by its
update worker (:mod:`~.update_worker`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from feedbackgym.errors import requires_extra
from feedbackgym.training.common.trainer_view import TEXT_VOCAB

if TYPE_CHECKING:
    from feedbackgym.entity_view import EntityLayout
    from feedbackgym.training.common.entity_network import EntityAgent

with requires_extra("baselines", "torch"):
    import torch
    from torch import nn
    from torch.distributions import Categorical

__all__ = [
    "Agent",
    "AnyAgent",
    "FusedPolicy",
    "UpdateSettings",
    "build_agent",
    "make_optimizer",
    "ppo_update",
    "rollout_sampler",
]


LOSS_NAMES = ("loss", "policy_loss", "value_loss", "entropy")
"""The mean losses :func:`ppo_update` returns, in this order."""


def _mlp(width: int, hidden: int, out: int, gain: float) -> nn.Sequential:
    layers = [nn.Linear(width, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh()]
    head = nn.Linear(hidden, out)
    for layer in (*layers[::2], head):
        assert isinstance(layer, nn.Linear)
        nn.init.orthogonal_(layer.weight, np.sqrt(2) if layer is not head else gain)
        nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers, head)


class Agent(nn.Module):
    """Actor and critic MLPs over a flat observation (its last ``text_length`` columns: text).

    Args:
        obs_size: Width of the flat observation.
        n_actions: Number of discrete actions.
        hidden: Hidden layer width.
        text_length: Trailing columns that hold the text's byte codes (0: none).
        critic_columns: Numeric columns only the critic reads: the actor's input holds
            zero there (hints or reviews for the value function alone).

    Example:
        >>> agent = Agent(obs_size=3, n_actions=2, hidden=8, critic_columns=(2,))
        >>> hinted, plain = torch.tensor([[1.0, 0.0, 1.0]]), torch.tensor([[1.0, 0.0, 0.0]])
        >>> logits = [agent.actor(agent.actor_input(obs)) for obs in (hinted, plain)]
        >>> torch.equal(*logits), torch.equal(agent.value(hinted), agent.value(plain))
        (True, False)
    """

    def __init__(
        self,
        obs_size: int,
        n_actions: int,
        hidden: int,
        text_length: int = 0,
        critic_columns: tuple[int, ...] = (),
    ) -> None:
        super().__init__()
        self.text_length = text_length
        self.shape = {
            "obs_size": obs_size,
            "n_actions": n_actions,
            "hidden": hidden,
            "text_length": text_length,
            **({"critic_columns": list(critic_columns)} if critic_columns else {}),
        }
        """The arguments that rebuild this agent (kept in checkpoints; without critic-only
        columns, the shape of checkpoints saved before there were any)."""
        width = obs_size - text_length
        if any(not 0 <= c < width for c in critic_columns):
            raise ValueError(
                f"critic_columns {list(critic_columns)} must index the {width} numbers"
            )
        actor_mask = torch.ones(obs_size)
        actor_mask[list(critic_columns)] = 0.0
        self.actor_mask: torch.Tensor
        self.register_buffer("actor_mask", actor_mask, persistent=False)
        self.critic_columns = tuple(critic_columns)
        if text_length:
            self.embedding = nn.Embedding(TEXT_VOCAB, 32)
            width += 32
        self.actor = _mlp(width, hidden, n_actions, gain=0.01)
        self.critic = _mlp(width, hidden, 1, gain=1.0)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """The numeric part, and the text's mean byte embedding when there is text."""
        if not self.text_length:
            return obs
        numeric, codes = obs[:, : -self.text_length], obs[:, -self.text_length :].long()
        mask = (codes > 0).float().unsqueeze(-1)
        pooled = (self.embedding(codes) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return torch.cat([numeric, pooled], dim=1)

    def actor_input(self, obs: torch.Tensor) -> torch.Tensor:
        """The actor's features: :meth:`features` with the critic-only columns at zero."""
        return self.features(obs * self.actor_mask if self.critic_columns else obs)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """The critic's value."""
        return self.critic(self.features(obs)).squeeze(-1)

    def act(
        self, obs: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Samples (or scores) an action: action, log-prob, entropy, value."""
        features = self.features(obs)
        actor_features = self.actor_input(obs) if self.critic_columns else features
        distribution = Categorical(logits=self.actor(actor_features), validate_args=False)
        if action is None:
            action = distribution.sample()
        return (
            action,
            distribution.log_prob(action),
            distribution.entropy(),
            self.critic(features).squeeze(-1),
        )


class FusedPolicy:
    """An agent's actor and critic as one network, for the rollout: one matmul a layer.

    The two MLPs' layers are joined (the first side by side, the others block-
    diagonally), so a step's inference is three ``addmm`` calls instead of six
    module calls; actions are drawn by inverse CDF. The actor's first layer has
    zero weight on the critic-only columns, as if its input held zero there.
    Built from the weights as they are; build a new one after an update.

    Args:
        agent: The agent.

    Example:
        >>> agent = Agent(obs_size=4, n_actions=3, hidden=8)
        >>> action, logprob, value = FusedPolicy(agent)(torch.zeros(2, 4))
        >>> torch.allclose(value, agent.value(torch.zeros(2, 4)))
        True
    """

    def __init__(self, agent: Agent) -> None:
        self.features = agent.features
        actor, critic = (
            [layer for layer in mlp if isinstance(layer, nn.Linear)]
            for mlp in (agent.actor, agent.critic)
        )
        with torch.no_grad():
            actor_first = actor[0].weight.clone()
            actor_first[:, list(agent.critic_columns)] = 0.0
            first = torch.cat([actor_first, critic[0].weight])
            joined = [first] + [
                torch.block_diag(a.weight, c.weight)
                for a, c in zip(actor[1:], critic[1:], strict=True)
            ]
            self.layers = [
                (weight.T.contiguous(), torch.cat([a.bias, c.bias]))
                for weight, a, c in zip(joined, actor, critic, strict=True)
            ]

    def __call__(
        self, obs: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Samples an action for each row (with ``generator``'s draws): action, log-prob, value."""
        with torch.inference_mode():
            out = self.features(obs)
            for k, (weight, bias) in enumerate(self.layers):
                out = torch.addmm(bias, out, weight)
                if k < len(self.layers) - 1:
                    out = torch.tanh(out)
            log_probs = torch.log_softmax(out[:, :-1], dim=-1)
            draw = torch.rand(len(obs), 1, device=obs.device, generator=generator)
            below = log_probs.exp().cumsum(dim=1) < draw
            action = below.sum(dim=1).clamp_(max=log_probs.shape[1] - 1)
            return action, log_probs.gather(1, action[:, None])[:, 0], out[:, -1]


AnyAgent: TypeAlias = "Agent | EntityAgent"
"""Either policy's agent: both have ``act``, ``value`` and ``shape``."""


def build_agent(shape: dict[str, Any], layout: EntityLayout | None = None) -> AnyAgent:
    """The agent a checkpoint's ``shape`` describes: an :class:`Agent` or an entity agent.

    Args:
        shape: The agent's ``shape`` (kept in every checkpoint).
        layout: The env's entity layout (the entity policy reads through it).

    Raises:
        PolicyMismatchError: An entity shape without a layout, or with one of other widths.

    Example:
        >>> build_agent(Agent(obs_size=4, n_actions=3, hidden=8).shape).shape["n_actions"]
        3
    """
    from feedbackgym.training.common.entity_network import EntityAgent, PolicyMismatchError

    settings: dict[str, Any] = {
        key: tuple(value) if key.startswith("critic_") else value for key, value in shape.items()
    }
    if settings.pop("policy", "mlp") != "entity":
        return Agent(**settings)
    if layout is None:
        raise PolicyMismatchError("an entity policy needs an env that declares an entity view")
    widths = settings.pop("widths")
    if layout.widths != widths:
        raise PolicyMismatchError(
            f"the checkpoint's widths {widths} are not the env's ({layout.widths})"
        )
    return EntityAgent(layout, settings.pop("hidden"), **settings)


def rollout_sampler(agent: AnyAgent) -> Any:
    """The rollout's inference for ``agent``: ``(obs, generator) -> action, log-prob, value``."""
    if isinstance(agent, Agent):
        return FusedPolicy(agent)
    from feedbackgym.training.common.entity_network import MaskedSampler

    return MaskedSampler(agent)


@dataclass(frozen=True)
class UpdateSettings:
    """How :func:`ppo_update` trains on a round (see ``PPOConfig``).

    Attributes:
        n_epochs: Epochs over the round.
        num_minibatches: Minibatches per epoch.
        clip_coef: PPO's clip.
        ent_coef: Entropy bonus.
        vf_coef: Value-loss weight.
        max_grad_norm: Gradient clip.
    """

    n_epochs: int = 4
    num_minibatches: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5


def make_optimizer(agent: AnyAgent, learning_rate: float) -> torch.optim.Adam:
    """The agent's Adam (fused: one kernel for every tensor, ~17% of a gradient step)."""
    return torch.optim.Adam(agent.parameters(), lr=learning_rate, eps=1e-5, fused=True)


def ppo_update(
    agent: AnyAgent,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, torch.Tensor],
    settings: UpdateSettings,
) -> dict[str, float]:
    """PPO's clipped update on one round; returns the mean losses (:data:`LOSS_NAMES`).

    Args:
        agent: The agent to train.
        optimizer: Its optimizer.
        batch: The round, flat over steps and envs: ``obs``, ``actions``,
            ``logprobs`` (the behaviour policy's), ``advantages`` and ``returns``.
        settings: Epochs, minibatches and the loss's coefficients.

    Example:
        >>> agent = Agent(obs_size=4, n_actions=3, hidden=8)
        >>> batch = {"obs": torch.zeros(8, 4), "actions": torch.zeros(8, dtype=torch.long),
        ...          "logprobs": torch.full((8,), -1.1), "advantages": torch.ones(8),
        ...          "returns": torch.ones(8)}
        >>> sorted(ppo_update(agent, make_optimizer(agent, 3e-4), batch, UpdateSettings()))
        ['entropy', 'loss', 'policy_loss', 'value_loss']
    """
    obs, actions, logprobs = batch["obs"], batch["actions"], batch["logprobs"]
    advantages, returns = batch["advantages"], batch["returns"]
    size = len(actions)
    minibatch = max(2, size // settings.num_minibatches)
    totals = torch.zeros(4, device=obs.device)
    count = 0
    for _ in range(settings.n_epochs):
        order = torch.randperm(size, device=obs.device)
        for start in range(0, size, minibatch):
            index = order[start : start + minibatch]
            _, logprob, entropy, value = agent.act(obs[index], actions[index])
            ratio = (logprob - logprobs[index]).exp()
            adv = advantages[index]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            clipped = ratio.clamp(1 - settings.clip_coef, 1 + settings.clip_coef)
            policy_loss = torch.max(-adv * ratio, -adv * clipped).mean()
            value_loss = 0.5 * (value - returns[index]).pow(2).mean()
            entropy_mean = entropy.mean()
            loss = policy_loss - settings.ent_coef * entropy_mean + settings.vf_coef * value_loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), settings.max_grad_norm)
            optimizer.step()
            totals += torch.stack([loss, policy_loss, value_loss, entropy_mean]).detach()
            count += 1
    means = (totals / max(1, count)).tolist()
    return dict(zip(LOSS_NAMES, means, strict=True))
