"""Train one run with its trainer: SB3 or the torch trainer, each loaded only when used."""

from __future__ import annotations

from feedbackgym.training.common.run_settings import RunConfig
from feedbackgym.training.common.trainer_names import Progress, RunState

__all__ = ["train_run"]


def train_run(config: RunConfig, *, resume: bool = False, progress: Progress = None) -> RunState:
    """Trains one run with its ``trainer``.

    Arguments and result as :class:`~feedbackgym.training.common.trainer_names.TrainRun`.
    """
    if config.trainer == "torch":
        from feedbackgym.training.torch_ppo.run_torch import train_torch_run

        return train_torch_run(config, resume=resume, progress=progress)
    from feedbackgym.training.sb3.run_sb3 import train_sb3_run

    return train_sb3_run(config, resume=resume, progress=progress)
