"""Registers every feedbackgym environment id with Gymnasium.

Ids use string entry points and plain-data kwargs (never lambdas), so
``gym.make``, ``gym.make("feedbackgym:feedbackgym/...")``, ``EnvSpec.to_json()``
and vector envs all work. Called once from ``feedbackgym/__init__.py``.
"""

from __future__ import annotations

import importlib
from typing import Any

from gymnasium.envs.registration import register, registry
from gymnasium.envs.registration import spec as registered

__all__ = ["ENV_DESCRIPTIONS", "evaluation_kwargs", "has_splits", "register_envs"]

_OPS_ENTRY = "feedbackgym.envs.ops.env:OpsIncidentEnv"
_OPS_STEPS = 80
_INCIDENT_ENTRY = "feedbackgym.envs.incident.env:IncidentEnv"
_INCIDENT_V2_ENTRY = "feedbackgym.envs.incident.v2:IncidentEnvV2"
_INCIDENT_PRESETS = (
    ("easy", "one fault 1-2 hops below the alert, 5-8 services"),
    ("medium", "one fault 1-3 hops down, two misleading alerts, 7-10 services"),
    ("hard", "two faults 2-4 hops down, two misleading alerts, 9-13 services"),
    ("extreme", "three waves of two faults 3-6 hops down, two misleading alerts, 12-16 services"),
)

_SPECS: list[dict[str, Any]] = [
    {
        "id": "feedbackgym/OpsIncident-v0",
        "entry_point": _OPS_ENTRY,
        "kwargs": {"difficulty": "medium", "obs_mode": "vector"},
        "max_episode_steps": _OPS_STEPS,
        "description": "Incident response in a simulated production system "
        "(kwargs: difficulty easy|medium|hard, obs_mode vector|text|both).",
    },
    *(
        {
            "id": f"feedbackgym/OpsIncident{difficulty.title()}-v0",
            "entry_point": _OPS_ENTRY,
            "kwargs": {"difficulty": difficulty, "obs_mode": "vector"},
            "max_episode_steps": _OPS_STEPS,
            "description": f"OpsIncident at {difficulty} difficulty: {what}.",
        }
        for difficulty, what in (
            ("easy", "one fault"),
            ("medium", "one fault plus two misleading alerts elsewhere"),
            ("hard", "two interacting faults plus misleading alerts"),
        )
    ),
    *(
        spec
        for version, entry, description, suffix in (
            (
                "v1",
                _INCIDENT_ENTRY,
                "Procedural incidents in drawn topologies, held-out compositions in "
                "split='test' (kwargs: difficulty easy|medium|hard|extreme, split train|test, "
                "obs_mode, knobs such as faults=, max_hops=); the preset sets the step limit.",
                "",
            ),
            (
                "v2",
                _INCIDENT_V2_ENTRY,
                "OpsIncident-v1's incidents with a test split of new systems and new "
                "solutions and an opaque task id (kwargs as v1's).",
                "; new systems in split='test'",
            ),
        )
        for spec in (
            {
                "id": f"feedbackgym/OpsIncident-{version}",
                "entry_point": entry,
                "kwargs": {"difficulty": "medium", "obs_mode": "vector", "split": "train"},
                "max_episode_steps": None,
                "description": description,
            },
            *(
                {
                    "id": f"feedbackgym/OpsIncident{difficulty.title()}-{version}",
                    "entry_point": entry,
                    "kwargs": {"difficulty": difficulty, "obs_mode": "vector", "split": "train"},
                    "max_episode_steps": None,
                    "description": f"OpsIncident-{version} at {difficulty}: {what}{suffix}.",
                }
                for difficulty, what in _INCIDENT_PRESETS
            ),
        )
    ),
    {
        "id": "feedbackgym/CodeFix-v0",
        "entry_point": "feedbackgym.envs.code.env:CodeFixEnv",
        "kwargs": {"difficulty": "medium", "obs_mode": "vector", "sandbox": "auto"},
        "max_episode_steps": 40,
        "description": "Fix a seeded bug in a small Python project, tests run in a sandbox "
        "(kwargs: difficulty easy|medium|hard, sandbox docker|local|auto, obs_mode).",
    },
    *(
        {
            "id": f"feedbackgym/Web{name}-v0",
            "entry_point": "feedbackgym.envs.web.env:WebEnv",
            "kwargs": {"task": task, "obs_mode": "vector"},
            "max_episode_steps": 60,
            "description": f"{what}, in headless Chromium (kwargs: obs_mode vector|text|both).",
        }
        for name, task, what in (
            (
                "Checkout",
                "checkout",
                "Shop checkout: search, variant, coupon, address, delivery, pay",
            ),
            ("Form", "form", "Multi-page membership form with validation errors to correct"),
            (
                "OrderAdmin",
                "order_admin",
                "Order admin: find an order, refund, note, status, notify",
            ),
        )
    ),
    *(
        {
            "id": f"feedbackgym/MiniWoB-{task}-v0",
            "entry_point": "feedbackgym.envs.web.miniwob:MiniWoBEnv",
            "kwargs": {"task": task, "obs_mode": "vector"},
            "max_episode_steps": 20,
            "description": f"MiniWoB++ {task} page on feedbackgym's Playwright driver.",
        }
        for task in (
            "choose-list",
            "click-button",
            "click-checkboxes",
            "click-dialog",
            "click-link",
            "click-tab-2",
            "email-inbox",
            "enter-text",
            "login-user",
            "search-engine",
        )
    ),
]

ENV_DESCRIPTIONS: dict[str, str] = {spec["id"]: spec["description"] for spec in _SPECS}
"""One line per registered id, as ``feedbackgym envs`` prints it."""


def register_envs() -> None:
    """Registers every feedbackgym environment (idempotent)."""
    for spec in _SPECS:
        if spec["id"] not in registry:
            register(**{k: v for k, v in spec.items() if k != "description"})


def has_splits(env_id: str) -> bool:
    """Whether the registered env takes ``split="train"|"test"`` (held-out compositions).

    Example:
        >>> register_envs()
        >>> has_splits("feedbackgym/OpsIncidentEasy-v1"), has_splits("feedbackgym/CodeFix-v0")
        (True, False)
    """
    try:
        return "split" in (registered(env_id).kwargs or {})
    except Exception:  # an unknown or unregistered id: gym.make reports it
        return False


def evaluation_kwargs(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` for the env that validation and evaluation play: the test split.

    An env with splits gets ``split="test"`` (unless ``kwargs`` names a split);
    any other env is validated on its held-out seeds with ``kwargs`` unchanged.

    Example:
        >>> register_envs()
        >>> evaluation_kwargs("feedbackgym/OpsIncidentEasy-v1", {"obs_mode": "text"})
        {'obs_mode': 'text', 'split': 'test'}
    """
    if has_splits(env_id) and "split" not in kwargs:
        return {**kwargs, "split": "test"}
    return dict(kwargs)


def env_class(env_id: str) -> Any:
    """The class (or factory) a registered id builds, imported but not built.

    Example:
        >>> register_envs()
        >>> env_class("feedbackgym/OpsIncidentEasy-v2").__name__
        'IncidentEnvV2'
    """
    entry = registered(env_id).entry_point
    if isinstance(entry, str):
        module, _, name = entry.partition(":")
        entry = getattr(importlib.import_module(module), name)
    return entry


def declares_entity_view(env_id: str) -> bool:
    """Whether the registered env declares an entity view (the entity policy's default).

    Example:
        >>> register_envs()
        >>> declares_entity_view("feedbackgym/OpsIncidentEasy-v2")
        True
        >>> declares_entity_view("feedbackgym/OpsIncidentEasy-v0")
        False
    """
    from feedbackgym.entity_view import ENTITY_VIEW

    return hasattr(env_class(env_id), ENTITY_VIEW)
