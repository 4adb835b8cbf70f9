"""OpsIncident-v1: procedural incidents whose test split holds new compositions.

Each seed draws a service topology, faults placed by role, symptoms cascading
along call paths and misleading alerts; a difficulty knob (presets ``easy`` to
``extreme``, or explicit parameters) scales the horizon, and ``split="test"``
poses (fault type, topology shape) pairs that the train split never draws.
v0 (:mod:`feedbackgym.envs.ops`) stays registered and unchanged.
"""

from __future__ import annotations

from feedbackgym.envs.incident.catalog import FAULT_TYPES, N_SLOTS, ROLES
from feedbackgym.envs.incident.env import IncidentEnv, resolve_difficulty
from feedbackgym.envs.incident.scenario import DIFFICULTIES, PRESETS, SPLITS, Difficulty

__all__ = [
    "DIFFICULTIES",
    "FAULT_TYPES",
    "N_SLOTS",
    "PRESETS",
    "ROLES",
    "SPLITS",
    "Difficulty",
    "IncidentEnv",
    "resolve_difficulty",
]
