"""The ops incident suite: a pure-Python simulator of a small production system.

Validation seeds are fixed per difficulty and lie at or above
:data:`VALIDATION_SEED_START`; training code should draw its seeds below it
(:data:`TRAIN_SEED_LIMIT`), which keeps training and validation disjoint.
"""

from __future__ import annotations

from feedbackgym.envs.base import TRAIN_SEED_LIMIT, VALIDATION_SEED_START
from feedbackgym.envs.ops.catalog import FAULT_TYPES, SERVICES
from feedbackgym.envs.ops.env import OBS_MODES, VALIDATION_SEEDS, OpsIncidentEnv
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
