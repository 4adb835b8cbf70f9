"""The code suite: fix a seeded bug in a generated Python project, tests run in a sandbox.

Validation seeds are fixed per difficulty and lie at or above
:data:`VALIDATION_SEED_START`; training code should draw its seeds below it.
Importing this package loads neither the docker SDK nor bubblewrap: a
sandbox starts when an env is made.
"""

from __future__ import annotations

from feedbackgym.envs.base import TRAIN_SEED_LIMIT, VALIDATION_SEED_START
from feedbackgym.envs.code.env import OBS_MODES, VALIDATION_SEEDS, CodeFixEnv
from feedbackgym.envs.code.families import FAMILIES
from feedbackgym.envs.code.generator import DIFFICULTIES
from feedbackgym.envs.code.sandbox import SANDBOXES

__all__ = [
    "DIFFICULTIES",
    "FAMILIES",
    "OBS_MODES",
    "SANDBOXES",
    "TRAIN_SEED_LIMIT",
    "VALIDATION_SEEDS",
    "VALIDATION_SEED_START",
    "CodeFixEnv",
]
