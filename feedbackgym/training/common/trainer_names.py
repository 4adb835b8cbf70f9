"""The trainers a run can use, the default, and what a trainer's run function is.

Names only (and a protocol), so the CLI can offer them cheaply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["DEFAULT_TRAINER", "TRAINERS", "Progress", "RunState", "TrainRun"]

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
