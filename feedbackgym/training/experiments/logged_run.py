"""Trains one run of a comparison with its reward-drop alerts in its ``run.log``.

A comparison shows one progress bar over all its runs; a line on stderr would
break it, so each run's alerts go to the ``run.log`` of its directory instead,
whichever process or machine trains it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from feedbackgym.training.common.run_settings import RunConfig
from feedbackgym.training.experiments.launch import train_run

__all__ = ["train_logged"]


def train_logged(
    config: RunConfig, *, resume: bool, progress: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """Trains one run (see :func:`~.launch.train_run`), alerts to ``run.log``.

    Args:
        config: The run; its ``out_dir`` receives every output, ``run.log`` too.
        resume: Continue from the last checkpoint in ``out_dir`` when there is one.
        progress: Called with the timestep count after each round.

    Returns:
        The run's final state.

    Example:
        >>> import tempfile
        >>> run = RunConfig("feedbackgym/OpsIncidentEasy-v0", "sparse", 0, 64,
        ...                 tempfile.mkdtemp(), n_envs=1, n_steps=64, eval_episodes=1)
        >>> train_logged(run, resume=False)["timesteps"]
        64
        >>> (Path(run.out_dir) / "run.log").exists()
        True
    """
    run_dir = Path(config.out_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(run_dir / "run.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    alerts = logging.getLogger("feedbackgym.control")
    alerts.addHandler(handler)
    propagate, alerts.propagate = alerts.propagate, False
    try:
        return train_run(config, resume=resume, progress=progress)
    finally:
        alerts.propagate = propagate
        alerts.removeHandler(handler)
        handler.close()
