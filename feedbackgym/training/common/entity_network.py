"""The entity policy: services, not positions. A shared encoder, attention, a pointer head, masks.

:class:`EntityAgent` reads a flat observation through the env's
:class:`~feedbackgym.entity_view.EntityLayout` (``[numeric, text, mask]``:
the text's byte codes when asked for, then the env's action mask, which
:class:`~.trainer_view.TrainerView` appends with ``masks=True``; SB3's
:mod:`~feedbackgym.training.sb3.entity_policy` hands :meth:`EntityAgent.scores` the
numeric columns alone and masks as ``MaskablePPO`` does):

=====================  ===================================================================
part                   what it does
=====================  ===================================================================
entity encoder         one MLP for every entity's row (``F -> d``), plus the globals' embedding
attention              ``layers`` blocks of self-attention over present entities; each
                       relation (call graph, blame pointers) adds a learned bias per head
pointer head           per-entity logits for each entity verb (``d -> V``): action
                       ``p * V + v`` is entity ``p``'s verb ``v``
global head            logits of the global verbs from the pooled embedding
mask                   the env's action mask, applied before sampling and scoring
critic                 an MLP on the pooled embedding, the critic-only globals, and for
                       each critic-only entity column the embeddings' mean weighted by it
=====================  ===================================================================

No weight depends on the entity count: a checkpoint trained with 8 positions
plays an env with 13. Permuting the positions of an observation permutes the
per-entity logits the same way and leaves the value unchanged (no positional
encoding; pooling is a masked mean).

``critic_columns`` (global columns) and ``critic_entity_columns`` (per-entity
columns; both empty by default) are what the actor does not read and the critic
does: how hints and reviews reach the critic alone (``guide.reader`` /
``review.reader``, :meth:`~feedbackgym.config.FeedbackConfig.critic_fields`). A
per-entity one, such as the guide's ``hint_targets``, reaches the critic as the
mean of the embeddings of the entities it marks: the critic learns what the
hinted service's state is worth, and the actor's input carries no hint.

Example:
    >>> import feedbackgym
    >>> from feedbackgym.training.common.trainer_view import trainer_env
    >>> env = trainer_env("feedbackgym/OpsIncidentEasy-v2", "shaping", masks=True)
    >>> agent = EntityAgent(env.entity_layout(), hidden=32)
    >>> obs = torch.as_tensor(env.reset(seed=0)[0])[None]
    >>> action, logprob, entropy, value = agent.act(obs)
    >>> bool(env.get_wrapper_attr("action_masks")()[int(action)]), agent.shape["policy"]
    (True, 'entity')
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from feedbackgym.entity_view import EntityLayout
from feedbackgym.errors import FeedbackGymError, requires_extra
from feedbackgym.training.common.trainer_view import TEXT_VOCAB

with requires_extra("baselines", "torch"):
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.distributions import Categorical

__all__ = ["EntityAgent", "PolicyMismatchError", "MaskedSampler", "permuted"]

TEXT_EMBEDDING = 32
"""Width of the text's mean byte embedding, joined to the globals with ``--use-text``."""


ABSENT_BIAS = -1e9
"""The attention bias on an absent entity: no weight, and no NaN if none is present."""


class PolicyMismatchError(FeedbackGymError, ValueError):
    """A policy, checkpoint or layout that does not fit the env or the run it is given."""


def _linear(width: int, out: int, gain: float = math.sqrt(2)) -> nn.Linear:
    layer = nn.Linear(width, out)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class _Block(nn.Module):
    """Self-attention over entities with a per-head bias from the relations, added to ``h``."""

    def __init__(self, hidden: int, heads: int, relations: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = _linear(hidden, 3 * hidden, 1.0)
        self.out = _linear(hidden, hidden)
        self.relation_bias = nn.Linear(relations, heads, bias=False) if relations else None

    def forward(
        self, h: torch.Tensor, absent: torch.Tensor, relations: torch.Tensor
    ) -> torch.Tensor:
        """The block on entity embeddings ``h [B, n, d]``."""
        batch, n, hidden = h.shape
        q, k, v = self.qkv(h).view(batch, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        bias = absent[:, None, None, :]  # [B, 1, 1, n]: ABSENT_BIAS on absent keys
        if self.relation_bias is not None:
            bias = bias + self.relation_bias(relations).permute(0, 3, 1, 2)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return h + torch.relu(self.out(attended.transpose(1, 2).reshape(batch, n, hidden)))


class EntityAgent(nn.Module):
    """An actor-critic over entities: attention, a pointer head, masked logits (module docs).

    Args:
        layout: Where the env's entity view lies in the flat observation.
        hidden: Embedding width ``d``.
        heads: Attention heads (``hidden`` must divide by it).
        layers: Attention blocks.
        text_length: Text byte codes between the numeric part and the mask (0: none).
        critic_columns: Global features (indices into the globals) only the critic reads.
        critic_entity_columns: Entity features (indices into each entity's row) only
            the critic reads.

    Raises:
        PolicyMismatchError: ``hidden`` does not divide by ``heads``, or a critic column
            is out of range.
    """

    def __init__(
        self,
        layout: EntityLayout,
        hidden: int = 32,
        *,
        heads: int = 4,
        layers: int = 1,
        text_length: int = 0,
        critic_columns: tuple[int, ...] = (),
        critic_entity_columns: tuple[int, ...] = (),
    ) -> None:
        super().__init__()
        widths = layout.widths
        if hidden % heads:
            raise PolicyMismatchError(f"hidden ({hidden}) must divide by heads ({heads})")
        for name, columns, width in (
            ("critic_columns", critic_columns, widths["globals"]),
            ("critic_entity_columns", critic_entity_columns, widths["entity"]),
        ):
            if any(not 0 <= c < width for c in columns):
                raise PolicyMismatchError(f"{name} {list(columns)} must index {width} features")
        self.shape: dict[str, Any] = {
            "policy": "entity",
            "widths": widths,
            "hidden": hidden,
            "heads": heads,
            "layers": layers,
            "text_length": text_length,
            "critic_columns": list(critic_columns),
            **(
                {"critic_entity_columns": list(critic_entity_columns)}
                if critic_entity_columns
                else {}
            ),
        }
        """What rebuilds this agent with a layout of the same widths (kept in checkpoints)."""
        self.text_length = text_length
        self.entity_actions = widths["entity_actions"]
        actor_globals = [c for c in range(widths["globals"]) if c not in set(critic_columns)]
        self.register_buffer(
            "actor_globals", torch.as_tensor(actor_globals, dtype=torch.long), persistent=False
        )
        self.register_buffer(
            "critic_globals", torch.as_tensor(critic_columns, dtype=torch.long), persistent=False
        )
        hidden_columns = set(critic_entity_columns)
        actor_entity = [c for c in range(widths["entity"]) if c not in hidden_columns]
        self.actor_entity: torch.Tensor
        self.critic_entity: torch.Tensor
        for name, kept in (
            ("actor_entity", actor_entity),
            ("critic_entity", critic_entity_columns),
        ):
            self.register_buffer(name, torch.as_tensor(kept, dtype=torch.long), persistent=False)
        global_width = len(actor_globals) + (TEXT_EMBEDDING if text_length else 0)
        if text_length:
            self.embedding = nn.Embedding(TEXT_VOCAB, TEXT_EMBEDDING)
        self.encode_entity = nn.Sequential(_linear(len(actor_entity), hidden), nn.ReLU())
        self.encode_globals = nn.Sequential(_linear(global_width, hidden), nn.ReLU())
        self.blocks = nn.ModuleList(
            _Block(hidden, heads, widths["relation"]) for _ in range(layers)
        )
        self.pointer = _linear(hidden, widths["entity_actions"], 0.01)
        self.global_verbs = _linear(hidden, widths["global_actions"], 0.01)
        critic_width = hidden * (1 + len(critic_entity_columns)) + len(critic_columns)
        self.critic = nn.Sequential(
            _linear(critic_width, hidden), nn.Tanh(), _linear(hidden, 1, 1.0)
        )
        self.bind(layout)

    def bind(self, layout: EntityLayout) -> None:
        """Reads observations through ``layout`` from now on (an env with any entity count).

        Raises:
            PolicyMismatchError: The layout's widths are not the ones the weights were built for.
        """
        if layout.widths != self.shape["widths"]:
            raise PolicyMismatchError(
                f"this entity policy was built for the widths {self.shape['widths']}; the env's "
                f"view has {layout.widths}"
            )
        self.layout = layout
        index = torch.as_tensor(layout.gather_index, device=self.pointer.weight.device)
        self.register_buffer("_gather", index, persistent=False)
        self.n_actions = layout.n_actions

    def _parts(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The pooled embedding, the per-entity embeddings and the critic's own inputs."""
        entities, present, relations, globals_ = self.layout.split(obs, self._gather)
        actor_globals = globals_[:, self.actor_globals]
        if self.text_length:
            start = self.layout.size
            codes = obs[:, start : start + self.text_length].long()
            mask = (codes > 0).float().unsqueeze(-1)
            text = (self.embedding(codes) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            actor_globals = torch.cat([actor_globals, text], dim=1)
        context = self.encode_globals(actor_globals)
        h = self.encode_entity(entities[..., self.actor_entity]) + context[:, None]
        present = present > 0.5
        absent = torch.zeros_like(present, dtype=h.dtype).masked_fill(~present, ABSENT_BIAS)
        for block in self.blocks:
            h = block(h, absent, relations)
        weights = present.to(h.dtype).unsqueeze(-1)
        pooled = (h * weights).sum(1) / weights.sum(1).clamp(min=1.0)  # a mean of the present
        critic_only = [globals_[:, self.critic_globals]]
        if len(self.critic_entity):  # each column's marked entities' mean embedding
            marks = entities[..., self.critic_entity] * weights  # [B, n, C]
            marked = torch.einsum("bnc,bnd->bcd", marks, h) / marks.sum(1).clamp(min=1.0)[..., None]
            critic_only.append(marked.flatten(1))
        return pooled, h, torch.cat(critic_only, dim=1)

    def scores(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Unmasked action logits ``[B, A]`` (entity-major, then the global verbs) and the value.

        ``obs`` needs the numeric columns and the text's (when read); a mask after them is
        not read here (SB3's ``MaskablePPO`` applies its own).
        """
        pooled, h, critic_only = self._parts(obs)
        per_entity = self.pointer(h).flatten(1)  # [B, n * V]: position-major, as the actions
        logits = torch.cat([per_entity, self.global_verbs(pooled)], dim=1)
        value = self.critic(torch.cat([pooled, critic_only], dim=1)).squeeze(-1)
        return logits, value

    def logits(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Action logits with the observation's mask applied, and the value."""
        logits, value = self.scores(obs)
        start = self.layout.size + self.text_length
        allowed = obs[:, start : start + self.n_actions] > 0.5
        return logits.masked_fill(~allowed, torch.finfo(logits.dtype).min), value

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """The critic's value."""
        return self.logits(obs)[1]

    def act(
        self, obs: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Samples (or scores) an action among the allowed: action, log-prob, entropy, value."""
        logits, value = self.logits(obs)
        distribution = Categorical(logits=logits, validate_args=False)
        if action is None:
            action = distribution.sample()
        return action, distribution.log_prob(action), distribution.entropy(), value


class MaskedSampler:
    """An entity agent's rollout inference: one forward, a draw among the allowed actions.

    The same call as the MLP's
    :class:`~feedbackgym.training.torch_ppo.network.FusedPolicy` (``(obs,
    generator) -> action, log-prob, value``), so the learner collects with either.
    Actions are drawn by the Gumbel-max trick: a masked action's log-probability
    is the float minimum, which no Gumbel draw lifts above an allowed one's, so
    it is never drawn.

    Args:
        agent: The agent, as it is now (a sampler reads its current weights).
    """

    def __init__(self, agent: EntityAgent) -> None:
        self.agent = agent

    def __call__(
        self, obs: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Samples an action for each row (with ``generator``'s draws): action, log-prob, value."""
        with torch.inference_mode():
            logits, value = self.agent.logits(obs)
            log_probs = torch.log_softmax(logits, dim=-1)
            uniform = torch.rand(log_probs.shape, device=obs.device, generator=generator)
            action = (log_probs - uniform.log_().neg_().log_()).argmax(dim=1)  # Gumbel-max
            return action, log_probs.gather(1, action[:, None])[:, 0], value


def permuted(layout: EntityLayout, obs: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``obs`` (flat, mask last) with its positions reordered: position ``p`` gets ``order[p]``'s.

    What the equivariance test and the docs use: every per-entity column,
    relation and mask column moves with its entity.
    """
    out = obs.copy()
    entity, present, relation, _ = layout.indices
    out[:, entity] = obs[:, entity[order]]
    out[:, present] = obs[:, present[order]]
    out[:, relation] = obs[:, relation[order][:, order]]
    verbs = layout.view.entity_actions
    start = obs.shape[1] - layout.n_actions  # the mask: the last columns
    per_entity = np.arange(layout.view.count * verbs).reshape(-1, verbs)
    out[:, start + per_entity] = obs[:, start + per_entity[order]]
    return out
