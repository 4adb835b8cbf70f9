"""The code suite: fix a seeded bug in a generated Python project, tests run in a sandbox.

Validation seeds are fixed per difficulty and lie at or above
:data:`VALIDATION_SEED_START`; training code should draw its seeds below it.
Importing this package loads neither the docker SDK nor bubblewrap: a
sandbox starts when an env is made.
"""

from __future__ import annotations

from feedbackgym.envs.code.env import OBS_MODES, CodeFixEnv
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

VALIDATION_SEED_START = 10_000_000
"""Every validation seed is at least this; training seeds stay below."""
TRAIN_SEED_LIMIT = VALIDATION_SEED_START

VALIDATION_SEEDS: dict[str, tuple[int, ...]] = {
    difficulty: tuple(
        range(VALIDATION_SEED_START + 1000 * i, VALIDATION_SEED_START + 1000 * i + 100)
    )
    for i, difficulty in enumerate(DIFFICULTIES)
}
"""100 held-out seeds per difficulty."""
