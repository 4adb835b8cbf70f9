"""The trainers a run can use, the default, and what a trainer's run function is.

Names only (and a protocol), so the CLI can offer them cheaply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__ = [
    "DEFAULT_NET_ARCH",
    "DEFAULT_TRAINER",
    "POLICIES",
    "TRAINERS",
    "Progress",
    "RunState",
    "TrainRun",
    "DEFAULT_ENT_COEF",
    "default_net_arch",
    "resolve_policy",
]

Progress = Callable[[int], None] | None
"""What a run calls with the env steps done after each round (``None``: nothing)."""
RunState = dict[str, Any]
"""A run's state as its ``state.json`` holds it."""


class TrainRun(Protocol):
    """A trainer's run function: trains one arm with one seed; returns the run's final state.

    :func:`~feedbackgym.training.experiments.launch.train_run` hands a run to one
    (the torch trainer's, SB3's); the GRPO trainer's has the same shape.

    Args:
        config: The run's settings; its ``out_dir`` receives every output
            (:mod:`~feedbackgym.training.common.run_files`).
        resume: Continue from the last checkpoint in ``out_dir`` when there is one.
        progress: Called with the env steps done after each round.

    Returns:
        The run's final state (its ``state.json``).
    """

    def __call__(self, config: Any, *, resume: bool = False, progress: Progress = None) -> RunState:
        """Trains the run."""
        ...


TRAINERS = ("sb3", "torch")
"""The trainers a run can use."""

DEFAULT_TRAINER = "torch"
"""The torch trainer: on OpsIncident medium it learned as well as SB3's PPO per step (5 seeds
each, 1M steps: 80% at 494k on 5/5 seeds against 500k on 4/5; final 90% ± 7 against
86% ± 13), and trains faster."""

POLICIES = ("entity", "mlp")
"""The policies a run can train: the entity policy (attention over an env's entities, a
pointer head, action masks; for envs that declare an entity view) or an MLP over the flat
observation. Either trainer trains either (SB3: ``MaskablePPO`` for the entity policy)."""


def resolve_policy(policy: str | None, env_id: str) -> str:
    """The policy a run trains: ``policy``, or by default ``entity`` where the env declares a view.

    Raises:
        ValueError: An unknown policy, or ``entity`` for an env that declares no view.

    Example:
        >>> import feedbackgym
        >>> resolve_policy(None, "feedbackgym/OpsIncidentEasy-v2")
        'entity'
        >>> resolve_policy(None, "feedbackgym/OpsIncidentEasy-v0")
        'mlp'
        >>> resolve_policy("entity", "feedbackgym/OpsIncidentEasy-v0")
        Traceback (most recent call last):
        ...
        ValueError: policy 'entity' needs an env that declares an entity view; \
feedbackgym/OpsIncidentEasy-v0 declares none (use policy 'mlp')
    """
    from feedbackgym.registration import declares_entity_view

    if policy is None:
        return "entity" if declares_entity_view(env_id) else "mlp"
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if policy == "entity" and not declares_entity_view(env_id):
        raise ValueError(
            f"policy 'entity' needs an env that declares an entity view; {env_id} declares "
            "none (use policy 'mlp')"
        )
    return policy


DEFAULT_NET_ARCH = {"mlp": (128, 128), "entity": (32, 32)}
"""Each policy's hidden widths unless a run gives them: the MLP's two layers; the entity
policy's embedding width (and its critic's hidden layer). At 32 the entity policy's round
takes at most 1/0.7 of the MLP's wall-clock on OpsIncident easy (``docs/training.md``)."""


def default_net_arch(policy: str) -> list[int]:
    """The hidden widths a run of ``policy`` trains unless told otherwise.

    Example:
        >>> default_net_arch("entity")
        [32, 32]
    """
    return list(DEFAULT_NET_ARCH[policy])


DEFAULT_ENT_COEF = {"mlp": 0.01, "entity": 0.03}
"""Each policy's PPO entropy coefficient unless a run gives it. The entity policy's pointer
head moves every service's verb at once and collapsed at 0.01 on OpsIncidentEasy-v2 (4 of
5 seeds at 0% after 500k steps); at 0.03 it explores until it finds resolutions
(``docs/results/ops_v2/entity/``)."""
