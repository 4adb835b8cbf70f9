"""The entity policy for SB3: ``MaskablePPO`` with the torch trainer's encoder as its policy.

:class:`EntityPolicy` is a ``MaskableActorCriticPolicy`` whose features are the
:class:`~feedbackgym.training.common.entity_network.EntityAgent`'s unmasked
action logits and value: the same encoder, attention, pointer head and critic
as the torch trainer's, with no MLP between them and the heads.
``MaskablePPO`` applies the env's ``action_masks()`` in rollouts and updates;
pass ``action_masks`` to ``predict`` to honour them when playing.

A user's own SB3 script::

    from sb3_contrib import MaskablePPO
    from feedbackgym.training.sb3 import EntityPolicy, entity_policy_kwargs

    env = feedbackgym.make("feedbackgym/OpsIncidentEasy-v2", "shaping")
    model = MaskablePPO(EntityPolicy, env, policy_kwargs=entity_policy_kwargs(env))
    model.learn(100_000)

Example:
    >>> import feedbackgym
    >>> from sb3_contrib import MaskablePPO
    >>> env = feedbackgym.make("feedbackgym/OpsIncidentEasy-v2", "shaping")
    >>> model = MaskablePPO(EntityPolicy, env, n_steps=16, batch_size=16,
    ...                     policy_kwargs=entity_policy_kwargs(env, hidden=32))
    >>> obs, _ = env.reset(seed=0)
    >>> masks = env.get_wrapper_attr("action_masks")()
    >>> action, _ = model.predict(obs, action_masks=masks)
    >>> bool(masks[int(action)])
    True
"""

from __future__ import annotations

from typing import Any

from feedbackgym.entity_view import EntityLayout, entity_view_of
from feedbackgym.errors import requires_extra
from feedbackgym.training.common.entity_network import EntityAgent, PolicyMismatchError

with requires_extra("baselines", "sb3_contrib"):
    import gymnasium as gym
    import numpy as np
    import torch
    from gymnasium import spaces
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from torch import nn

__all__ = [
    "MASK_KEY",
    "EntityExtractor",
    "EntityPolicy",
    "MaskInObservation",
    "entity_policy_kwargs",
    "masked_predict",
]

MASK_KEY = "action_mask"
"""The key :class:`MaskInObservation` adds to an observation (taken off before ``predict``)."""


class EntityExtractor(BaseFeaturesExtractor):
    """An :class:`EntityAgent` as SB3's features: ``[unmasked logits (A), value (1)]``.

    Args:
        observation_space: The env's ``Dict`` observation space.
        layout: Where the env's entity view lies in the flat vector of that space.
        hidden: The encoder's embedding width.
        heads: Attention heads.
        layers: Attention blocks.
        critic_fields: Observation keys only the critic reads
            (:meth:`~feedbackgym.config.FeedbackConfig.critic_fields`).
    """

    def __init__(
        self,
        observation_space: spaces.Dict,
        layout: EntityLayout,
        hidden: int = 64,
        heads: int = 4,
        layers: int = 1,
        critic_fields: tuple[str, ...] = (),
    ) -> None:
        super().__init__(observation_space, features_dim=layout.n_actions + 1)
        self.keys = [
            k for k, v in observation_space.spaces.items() if not isinstance(v, spaces.Text)
        ]
        entity, globals_ = layout.feature_columns(critic_fields)
        self.agent = EntityAgent(
            layout,
            hidden,
            heads=heads,
            layers=layers,
            critic_columns=globals_,
            critic_entity_columns=entity,
        )

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        """The flat vector (the keys in order, as SB3 preprocessed them) through the agent."""
        flat = torch.cat([observations[key].flatten(1) for key in self.keys], dim=1)
        logits, value = self.agent.scores(flat)
        return torch.cat([logits, value[:, None]], dim=1)


class _Split(nn.Module):
    """SB3's ``mlp_extractor`` slot: the features split into the logits and the value."""

    def __init__(self, n_actions: int) -> None:
        super().__init__()
        self.latent_dim_pi = n_actions
        self.latent_dim_vf = 1
        self.n_actions = n_actions

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        return features[:, : self.n_actions]

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        return features[:, self.n_actions :]


class EntityPolicy(MaskableActorCriticPolicy):
    """A ``MaskableActorCriticPolicy`` over :class:`EntityExtractor`: its logits and value as is.

    Give ``features_extractor_kwargs`` (:func:`entity_policy_kwargs`); the
    extractor's own initialisation is kept (``ortho_init`` off).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("features_extractor_class", EntityExtractor)
        kwargs["ortho_init"] = False
        kwargs["net_arch"] = []
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        n_actions = int(self.action_space.n)  # type: ignore[attr-defined]
        self.mlp_extractor = _Split(n_actions)  # type: ignore[assignment]

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the pointer head scores the actions
        self.value_net = nn.Identity()  # type: ignore[assignment]  # the critic values
        self.optimizer = self.optimizer_class(
            self.parameters(),
            lr=lr_schedule(1),  # type: ignore[call-arg]
            **self.optimizer_kwargs,
        )


def entity_policy_kwargs(env: Any, hidden: int = 64, **settings: Any) -> dict[str, Any]:
    """``policy_kwargs`` of :class:`EntityPolicy` for ``env`` (one env, or an SB3 ``VecEnv``).

    Raises:
        PolicyMismatchError: The env declares no entity view.
    """
    if hasattr(env, "get_attr"):  # an SB3 VecEnv
        view = env.get_attr("entity_view", [0])[0] if env.has_attr("entity_view") else None
    else:
        view = entity_view_of(env)
    if view is None:
        raise PolicyMismatchError("the entity policy needs an env that declares an entity view")
    layout = EntityLayout(env.observation_space, view)
    return {"features_extractor_kwargs": {"layout": layout, "hidden": hidden, **settings}}


class MaskInObservation(gym.ObservationWrapper[Any, Any, Any]):
    """Adds the env's ``action_masks()`` to each observation as :data:`MASK_KEY`, for validation.

    What lets a policy that sees only observations (the run's validation) honour
    the masks: :func:`masked_predict` takes the key off and hands it to ``predict``.

    Args:
        env: An env with ``action_masks()`` and a ``Dict`` observation.
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self._masks = env.get_wrapper_attr("action_masks")

    def observation(self, observation: Any) -> Any:
        """The observation with the mask of the state it shows."""
        return {**observation, MASK_KEY: self._masks()}


def masked_predict(model: Any, observations: list[Any], deterministic: bool = False) -> np.ndarray:
    """``model.predict`` on observations of :class:`MaskInObservation` envs, their masks applied.

    Example:
        >>> import feedbackgym
        >>> from sb3_contrib import MaskablePPO
        >>> env = MaskInObservation(feedbackgym.make("feedbackgym/OpsIncidentEasy-v2", "shaping"))
        >>> model = MaskablePPO(EntityPolicy, env.env, n_steps=16, batch_size=16,
        ...                     policy_kwargs=entity_policy_kwargs(env.env, hidden=32))
        >>> obs, _ = env.reset(seed=0)
        >>> action = masked_predict(model, [obs])[0]
        >>> bool(obs[MASK_KEY][action])
        True
    """
    keys = [key for key in observations[0] if key != MASK_KEY]
    batch = {key: np.stack([obs[key] for obs in observations]) for key in keys}
    masks = np.stack([obs[MASK_KEY] for obs in observations])
    actions, _ = model.predict(batch, deterministic=deterministic, action_masks=masks)
    return np.asarray(actions)
