"""The trainers a run can use, and the default: names only, so the CLI can offer them cheaply."""

from __future__ import annotations

__all__ = ["DEFAULT_TRAINER", "TRAINERS"]

TRAINERS = ("sb3", "torch")
"""The trainers a run can use."""

DEFAULT_TRAINER = "torch"
"""The torch trainer: on OpsIncident medium it learned as well as SB3's PPO per step (5 seeds
each, 1M steps: 80% at 494k on 5/5 seeds against 500k on 4/5; final 90% ± 7 against
86% ± 13), and trains faster."""
