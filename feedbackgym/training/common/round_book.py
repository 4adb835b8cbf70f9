"""The end of each training round, for any trainer: checkpoint, validation, best, state.

A round's work is done once the learner has trained on its rollout. Then
:meth:`RoundBook.finish` saves the round's checkpoint (the newest
``keep_checkpoints`` are kept), validates every ``eval_every`` rounds and at
the last (hints shown and masked, on the env's held-out seeds, in the
controller's state; the hint reliance goes to the controller's reliance rule),
keeps the best checkpoint as the rollback target, and writes ``state.json``
(see :mod:`~.run_files`). A behaviour-cloned run's clone is
validated once before the first round (:meth:`RoundBook.validate_clone`).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from feedbackgym.control import FeedbackController
from feedbackgym.errors import requires_extra
from feedbackgym.training.common.run_files import (
    append_curve,
    best_checkpoint,
    drop_old_checkpoints,
    read_state,
    write_state,
)
from feedbackgym.training.common.validation import (
    Evaluation,
    Policy,
    evaluate_policy,
    validation_seeds,
)

with requires_extra("baselines", "torch"):
    import torch

__all__ = ["RoundBook"]

Log = Callable[[str, float], None]


class RoundBook:
    """Closes the rounds of one run.

    Args:
        config: The run's :class:`~feedbackgym.training.sb3.run_sb3.RunConfig`.
        controller: The run's controller (its state is saved, and validated in).
        eval_envs: The validation envs: copies of the arm's stack, as the learner
            sees it, played in lockstep (see
            :func:`~feedbackgym.training.common.validation.evaluate_policy`).
        suffix: The checkpoints' file suffix (``".zip"`` for SB3, ``".pt"`` for torch).
        progress: Called with the timestep count after each round.
    """

    def __init__(
        self,
        config: Any,
        controller: FeedbackController,
        eval_envs: Sequence[Any],
        *,
        suffix: str,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.config = config
        self.controller = controller
        self.eval_envs = list(eval_envs)
        self.suffix = suffix
        self.report_progress = progress
        self.run_dir = Path(config.out_dir)
        self.checkpoints = self.run_dir / "checkpoints"
        self.seeds = validation_seeds(self.eval_envs[0], config.eval_episodes)
        state = read_state(self.run_dir)
        self.best = state.get("best_success", -1.0)
        self.replayed_steps = int(state.get("replayed_steps", 0))
        """Steps replayed to reach restarts so far (see :meth:`add_replayed`)."""
        self._seconds_before = float(state.get("seconds", 0.0))
        self._started = time.monotonic()

    @property
    def seconds(self) -> float:
        """Wall-clock seconds the run has trained so far.

        Counted from when this book was opened (the envs up), plus what the
        sessions before a resume took.
        """
        return self._seconds_before + time.monotonic() - self._started

    def add_replayed(self, steps: float) -> None:
        """Counts a round's steps replayed to reach restarts (its ``replayed_steps`` metric)."""
        self.replayed_steps += int(steps)

    def checkpoint(self, round_: int) -> Path:
        """The checkpoint file of round ``round_``."""
        return self.checkpoints / f"round_{round_:04d}{self.suffix}"

    def finish(
        self,
        finished: int,
        *,
        timesteps: int,
        save: Callable[[Path], None],
        policy: Policy,
        pending_report: dict[str, float] | None,
        log: Log,
    ) -> None:
        """Closes round ``finished`` (its rollout trained on).

        Args:
            finished: The round.
            timesteps: Env steps done so far.
            save: Writes the learner's checkpoint to the path given.
            policy: Maps the validation envs' observations to actions (sampled).
            pending_report: The round's trend when it is not reported yet (the
                run stops here), else ``None``.
            log: Records a scalar for TensorBoard (``tag``, ``value``).
        """
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        save(self.checkpoint(finished))
        state = read_state(self.run_dir)
        last = finished + 1 >= self.config.rounds
        if finished % self.config.eval_every == 0 or last:
            evaluation = self.validate(finished + 1, timesteps, policy, log)
            if evaluation.success > self.best:
                self.best = evaluation.success
                best = best_checkpoint(self.run_dir, self.suffix, exists=False)
                shutil.copyfile(self.checkpoint(finished), best.with_name(best.name + ".tmp"))
                best.with_name(best.name + ".tmp").replace(best)  # atomic, like state.json
                state["best_round"] = finished
            state["best_success"] = self.best
        state.update(
            round=finished,
            timesteps=timesteps,
            replayed_steps=self.replayed_steps,
            seconds=round(self.seconds, 2),
            controller=self.controller.state_dict(),
            pending_report=pending_report,
        )
        write_state(self.run_dir, state)
        # Only now: a crash before the state names this round must find the last one.
        drop_old_checkpoints(self.checkpoints, self.config.keep_checkpoints, self.suffix)
        if self.report_progress is not None:
            self.report_progress(timesteps)

    def validate(self, round_: int, timesteps: int, policy: Policy, log: Log) -> Evaluation:
        """Evaluates ``policy`` in round ``round_``'s feedback; appends to the curve.

        The hint reliance is reported to the controller
        (:meth:`~feedbackgym.control.FeedbackController.report_reliance`): with a
        reliance rule, the guide's dropout of the rounds to come follows it.
        """
        evaluation = self._evaluate(round_, timesteps, policy)
        log("feedback/validation_success", evaluation.success)
        log("feedback/validation_success_unguided", evaluation.success_unguided)
        log("feedback/hint_reliance", evaluation.reliance)
        self.controller.report_reliance(evaluation.reliance)
        return evaluation

    def validate_clone(self, policy: Policy) -> Evaluation:
        """Evaluates a behaviour-cloned policy before its first round: ``curve.csv`` at step 0.

        So a run's curve starts where cloning left it. Only the curve has it: the
        TensorBoard logs and the controller (its reliance rule) start with the
        rounds.

        Returns:
            The clone's evaluation (in round 0's feedback).
        """
        return self._evaluate(0, 0, policy)

    def _evaluate(self, round_: int, timesteps: int, policy: Policy) -> Evaluation:
        """Evaluates ``policy`` in round ``round_``'s feedback; appends to ``curve.csv``."""
        controller = self.controller
        state = controller.state if controller.round == round_ else controller.state_at(round_)
        # The policy is sampled (argmax policies loop on repeated inspections), with a fixed
        # torch seed so that a validation is reproducible.
        with torch.random.fork_rng():
            torch.manual_seed(self.config.seed)
            evaluation = evaluate_policy(self.eval_envs, policy, self.seeds, state)
        append_curve(
            self.run_dir / "curve.csv",
            evaluation.curve_row(
                timesteps,
                round_,
                state.phase,
                self.replayed_steps,
                seconds=self.seconds,
                curriculum=state.curriculum,
            ),
        )
        return evaluation
