"""The ops incident suite: a pure-Python simulator of a small production system.

Validation seeds are fixed per difficulty and lie at or above
:data:`VALIDATION_SEED_START`; training code should draw its seeds below it
(:data:`TRAIN_SEED_LIMIT`), which keeps training and validation disjoint.
"""

from __future__ import annotations

from feedbackgym.envs.ops.catalog import FAULT_TYPES, SERVICES
from feedbackgym.envs.ops.env import OBS_MODES, OpsIncidentEnv
from feedbackgym.envs.ops.state import DIFFICULTIES

__all__ = [
    "DIFFICULTIES",
    "FAULT_TYPES",
    "OBS_MODES",
    "SERVICES",
    "TRAIN_SEED_LIMIT",
    "VALIDATION_SEEDS",
    "VALIDATION_SEED_START",
    "OpsIncidentEnv",
]

VALIDATION_SEED_START = 10_000_000
"""Every validation seed is at least this; training seeds stay below."""
TRAIN_SEED_LIMIT = VALIDATION_SEED_START

VALIDATION_SEEDS: dict[str, tuple[int, ...]] = {
    difficulty: tuple(
        range(VALIDATION_SEED_START + 1000 * i, VALIDATION_SEED_START + 1000 * i + 100)
    )
    for i, difficulty in enumerate(DIFFICULTIES)
}
"""100 held-out seeds per difficulty: ``10_000_000..10_000_099`` for easy,
``10_001_000..`` for medium, ``10_002_000..`` for hard."""
