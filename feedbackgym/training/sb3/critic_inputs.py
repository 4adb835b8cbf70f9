"""SB3's ``MultiInputPolicy`` with inputs for the critic alone: the actor reads zeros there.

:class:`CriticInputsPolicy` is SB3's ``MultiInputActorCriticPolicy`` with a
features extractor of its own for each head: the value function's is SB3's
``CombinedExtractor``; the actor's is the same with the ``critic_fields`` keys
at zero (:class:`ZeroedKeys`). What ``guide.reader = "critic"`` and
``review.reader = "critic"`` (the default) mean for SB3's MLP: the policy's input
carries no hint or review, the value function's does. The entity policy keeps
them from its actor inside :class:`~feedbackgym.training.common.entity_network.EntityAgent`.

Example:
    >>> import feedbackgym, torch
    >>> from feedbackgym.config import FeedbackConfig
    >>> from stable_baselines3 import PPO
    >>> arm = "guide+shaping+critic-hints"
    >>> env = feedbackgym.make("feedbackgym/OpsIncidentEasy-v2", arm)
    >>> fields = FeedbackConfig.for_arm(arm).critic_fields()
    >>> model = PPO(CriticInputsPolicy, env, n_steps=16, batch_size=16,
    ...             policy_kwargs={"critic_fields": fields})
    >>> obs, _ = env.reset(seed=0)
    >>> unhinted = {key: value * 0 if key in fields else value for key, value in obs.items()}
    >>> def logits(obs):
    ...     tensors = model.policy.obs_to_tensor(obs)[0]
    ...     return model.policy.get_distribution(tensors).distribution.logits
    >>> torch.equal(logits(obs), logits(unhinted))
    True
"""

from __future__ import annotations

from typing import Any

from feedbackgym.errors import requires_extra

with requires_extra("baselines", "stable_baselines3"):
    import torch
    from gymnasium import spaces
    from stable_baselines3.common.policies import MultiInputActorCriticPolicy
    from stable_baselines3.common.torch_layers import CombinedExtractor

__all__ = ["CriticInputsPolicy", "ZeroedKeys"]


class ZeroedKeys(CombinedExtractor):
    """SB3's ``CombinedExtractor`` with some keys' values at zero (the actor's features).

    Args:
        observation_space: The ``Dict`` observation space.
        zeroed: Keys read as zeros (keys the space lacks are skipped).
    """

    def __init__(self, observation_space: spaces.Dict, zeroed: tuple[str, ...] = ()) -> None:
        super().__init__(observation_space)
        self.zeroed = tuple(key for key in zeroed if key in observation_space.spaces)

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        """The flat features, the zeroed keys' at zero."""
        if self.zeroed:
            zeros = {key: torch.zeros_like(observations[key]) for key in self.zeroed}
            observations = {**observations, **zeros}
        return super().forward(observations)


class CriticInputsPolicy(MultiInputActorCriticPolicy):
    """``MultiInputPolicy`` whose actor reads ``critic_fields`` as zeros; its critic reads them.

    Args:
        *args: ``MultiInputActorCriticPolicy``'s.
        critic_fields: Observation keys only the critic reads.
        **kwargs: ``MultiInputActorCriticPolicy``'s (its features extractor is this
            policy's own).
    """

    def __init__(self, *args: Any, critic_fields: tuple[str, ...] = (), **kwargs: Any) -> None:
        self.critic_fields = tuple(critic_fields)
        self._actor_extractor_made = False
        kwargs["features_extractor_class"] = ZeroedKeys
        kwargs["features_extractor_kwargs"] = {"zeroed": self.critic_fields}
        kwargs["share_features_extractor"] = False
        super().__init__(*args, **kwargs)

    def make_features_extractor(self) -> CombinedExtractor:
        """The actor's extractor (SB3 makes it first), then the critic's, which reads every key.

        Both are made before the optimizer, so any weights they have are trained.
        """
        if self._actor_extractor_made:
            return CombinedExtractor(self.observation_space)  # type: ignore[arg-type]
        self._actor_extractor_made = True
        return ZeroedKeys(self.observation_space, zeroed=self.critic_fields)  # type: ignore[arg-type]

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "critic_fields": self.critic_fields}
