"""``feedbackgym compare``: every arm × seed as parallel runs, one results table, learning curves.

This module runs the comparison; :mod:`~.stats` computes the
results tables from the runs' curves and :mod:`~.report` writes them
and plots the curves.

Outputs in ``--out``::

    config.json        the full comparison config
    runs/ARM-seedS/    each run (see feedbackgym.training.sb3.run_sb3): TensorBoard logs,
                       curve.csv, versioned checkpoints, state.json, run.log (its
                       reward-drop alerts, kept out of the progress bar)
    results.csv        per arm: success (IQM and mean, bootstrap 95% CIs), steps to 50% / 80%,
    results.md         final return, success before and after the switch, with hints masked
    improvement.csv    per pair of arms: the probability that a run of one beats one of the other
    sooner.csv         per pair of arms: the probability that a run of one reaches 80% sooner
    curves.png         validation success over training (mean, 95% CI), phases shaded
"""

from __future__ import annotations

import json
import multiprocessing
import queue
import sys
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedbackgym._process import exit_with_parent
from feedbackgym.config import FeedbackConfig, load_config
from feedbackgym.schedules import ARMS, TWO_PHASE_ARMS
from feedbackgym.training.common.arms import checked_keep_checkpoints, rounds_for
from feedbackgym.training.common.run_settings import RunConfig, config_json
from feedbackgym.training.common.trainer_names import DEFAULT_TRAINER
from feedbackgym.training.common.update_presets import DEFAULT_PRESET, UPDATE_PRESETS
from feedbackgym.training.experiments.report import write_report

if TYPE_CHECKING:
    from feedbackgym.training.experiments.ray_runs import RayOptions

__all__ = ["ComparisonConfig", "QUICK", "run_comparison"]

_DEFAULT = UPDATE_PRESETS[DEFAULT_PRESET]
"""Where a comparison's rollout and update settings come from unless given."""


@dataclass
class ComparisonConfig:
    """A comparison: which env, arms, seeds and budget, and one feedback config for all arms.

    Attributes:
        env_id: The env.
        arms: Arms to compare (see :data:`feedbackgym.schedules.ARMS`); each
            run's config is its arm's preset on the comparison's config.
        seeds: Seeds per arm.
        steps: Env steps per run.
        out: Output directory.
        jobs: Runs in parallel (processes; on Ray the cluster's resources decide).
        n_envs: Envs per run. This and the next four default to the
            :data:`~feedbackgym.training.common.update_presets.DEFAULT_PRESET`'s
            values; ``UPDATE_PRESETS["sb3"].settings()`` gives SB3's update.
        n_steps: Steps per env per round.
        n_epochs: Passes over each round's rollout.
        batch_size: Samples per minibatch of the update.
        learning_rate: PPO's learning rate.
        eval_every: Rounds between validations (``None``: about 15 per run).
        eval_episodes: Validation seeds per validation.
        bc_episodes: Expert episodes for a behaviour-cloning warm-up (0: none).
        restart_demos: Expert episodes each run restarts backwards along (0:
            none; see :class:`~feedbackgym.training.common.run_settings.RunConfig`).
        feedback: The feedback config (see :class:`~feedbackgym.config.FeedbackConfig`;
            ``shaping.gamma`` is also PPO's discount).
        feedback_file: A YAML/TOML config file every run follows instead of
            ``feedback``: a valid edit applies to every env of every run at its
            next round.
        feedback_overrides: ``{section: {field: value}}`` applied on top of the
            file (or of ``feedback``), as command-line flags do.
        env_kwargs: Keyword arguments for ``gym.make``.
        record: Record every training episode in each run's ``trajectories/``.
        keep_checkpoints: Round checkpoints kept per run, the newest (0: every one;
            each run's ``best.zip`` is always kept).
        anneal_lr: Decay PPO's learning rate linearly to 0 over each run.
        time_limit_terminal: Let PPO treat time-limit cut-offs as ends (no bootstrap).
        review_credit: Add the reviews' credit to the rewards the learner trains on
            (review arms; ``False`` for the ablation without it).
        trainer: ``"torch"`` (the default) or ``"sb3"`` (see
            :class:`~feedbackgym.training.common.run_settings.RunConfig`).
        device: ``"auto"`` (CUDA when present), ``"cuda"`` or ``"cpu"``.
        env_workers: The torch trainer's env worker processes per run (see
            :class:`~feedbackgym.training.common.run_settings.RunConfig`).
        overlap_update: The torch trainer's update in a worker process, overlapping
            the next round's collection (see
            :class:`~feedbackgym.training.common.run_settings.RunConfig`).
        env_backend: Where each run's envs live, ``"processes"`` or ``"ray"`` (Ray
            actors; see :class:`~feedbackgym.training.common.run_settings.RunConfig`).
        env_actor_cpus: CPUs each env actor asks for (``env_backend="ray"``).
    """

    env_id: str
    arms: list[str]
    seeds: int
    steps: int
    out: str
    jobs: int = 1
    n_envs: int = _DEFAULT.n_envs
    n_steps: int = _DEFAULT.n_steps
    n_epochs: int = _DEFAULT.n_epochs
    batch_size: int = _DEFAULT.batch_size
    learning_rate: float = _DEFAULT.learning_rate
    eval_every: int | None = None
    eval_episodes: int = 30
    bc_episodes: int = 0
    restart_demos: int = 0
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)
    feedback_file: str | None = None
    feedback_overrides: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] | None = None
    record: bool = False
    keep_checkpoints: int = 5
    anneal_lr: bool = False
    time_limit_terminal: bool = False
    review_credit: bool = True
    trainer: str = DEFAULT_TRAINER
    device: str = "auto"
    env_workers: int = 0
    overlap_update: bool = False
    env_backend: str = "processes"
    env_actor_cpus: float = 1.0

    def __post_init__(self) -> None:
        unknown = [a for a in self.arms if a not in ARMS]
        if unknown or not self.arms:
            raise ValueError(f"unknown arms {unknown}; choose from {', '.join(ARMS)}")
        if self.seeds < 1 or self.steps < self.n_envs * self.n_steps or self.jobs < 1:
            raise ValueError(
                "need seeds >= 1, jobs >= 1 and steps >= n_envs * n_steps "
                f"({self.n_envs * self.n_steps})"
            )
        self.run_configs()  # checks the feedback settings before any run starts
        checked_keep_checkpoints(self.keep_checkpoints)

    @property
    def rounds(self) -> int:
        """Training rounds per run."""
        return rounds_for(self.steps, self.n_envs, self.n_steps)

    def planned_switch(self) -> tuple[float, float] | None:
        """Env steps where the two-phase arms' switch and fade end are planned.

        ``None`` when no arm has two phases. A followed file is read as it is now.
        """
        two_phase = [run for run in self.run_configs() if run.arm in TWO_PHASE_ARMS]
        if not two_phase:
            return None
        base = load_config(self.feedback_file) if self.feedback_file else self.feedback
        schedule = two_phase[0].arm_config(base).schedule
        steps_per_round = self.n_envs * self.n_steps
        switch = schedule.switch_at * self.rounds * steps_per_round
        return switch, switch + schedule.fade_length * steps_per_round

    def run_configs(self) -> list[Any]:
        """One :class:`~feedbackgym.training.sb3.run_sb3.RunConfig` per arm and seed, seed by seed.

        Every arm's run of seed 0 comes before any run of seed 1, and so on: runs
        start in this order, so a comparison stopped part-way has the same seeds
        done in every arm with ``jobs=1``, and with more jobs, one seed more in
        some arms at most; its table compares like with like.

        Raises:
            ConfigError: A bad feedback setting or config file.

        Example:
            >>> config = ComparisonConfig(
            ...     "feedbackgym/OpsIncidentEasy-v0", ["sparse", "shaping"], 2, 4096, "out"
            ... )
            >>> [(run.arm, run.seed) for run in config.run_configs()]
            [('sparse', 0), ('shaping', 0), ('sparse', 1), ('shaping', 1)]
        """
        eval_every = self.eval_every or max(1, self.rounds // 15)
        return [
            RunConfig(
                env_id=self.env_id,
                arm=arm,
                seed=seed,
                total_steps=self.steps,
                out_dir=str(Path(self.out) / "runs" / f"{arm}-seed{seed}"),
                n_envs=self.n_envs,
                n_steps=self.n_steps,
                n_epochs=self.n_epochs,
                batch_size=self.batch_size,
                learning_rate=self.learning_rate,
                eval_every=eval_every,
                eval_episodes=self.eval_episodes,
                bc_episodes=self.bc_episodes,
                restart_demos=self.restart_demos,
                feedback=self.feedback,
                feedback_file=self.feedback_file,
                feedback_overrides=dict(self.feedback_overrides),
                env_kwargs=dict(self.env_kwargs or {}),
                record=self.record,
                keep_checkpoints=self.keep_checkpoints,
                anneal_lr=self.anneal_lr,
                time_limit_terminal=self.time_limit_terminal,
                review_credit=self.review_credit,
                trainer=self.trainer,
                device=self.device,
                env_workers=self.env_workers,
                overlap_update=self.overlap_update,
                env_backend=self.env_backend,
                env_actor_cpus=self.env_actor_cpus,
            )
            for seed in range(self.seeds)
            for arm in self.arms
        ]

    def to_json(self) -> str:
        """The comparison as JSON (``config.json`` of its output directory)."""
        return config_json(self)


QUICK = {
    "env_id": "feedbackgym/OpsIncidentEasy-v0",
    "arms": ["sparse", "shaping", "guide-then-review+shaping"],
    "seeds": 5,
    "steps": 112_640,
    "eval_episodes": 16,
}
"""The ``--quick`` comparison (the README's main job): under 6 minutes on 2 cores.

Five seeds (the fewest the statistics are reported on) of 110 rounds each, 16
validation episodes. Measured on a quiet 2-core machine: 150 rounds took 7.5 minutes
(sparse 0%, shaping 25%, guide-then-review+shaping 31%); 110 rounds with 20 validation
episodes 6 min 7 s (0%, 20%, 20%: both shaped arms apart from sparse, P = 1.00); 100
rounds 5.5 minutes, where sparse no longer stood apart (P(shaping > sparse) = 0.90
[0.70, 1.00])."""


_progress_queue: Any = None
"""The queue a worker reports its runs' progress to (set by :func:`_start_worker`)."""


def _start_worker(queue: Any) -> None:
    """Pool initializer: keeps the progress queue; ends the worker if the comparison dies."""
    global _progress_queue
    _progress_queue = queue
    exit_with_parent()


def _run_one(config: Any, resume: bool) -> dict[str, Any]:
    """Trains one run in a pool worker; its reward-drop alerts go to its ``run.log``."""
    from feedbackgym.training.experiments.logged_run import train_logged

    def progress(steps: int) -> None:
        _progress_queue.put((config.out_dir, steps))

    return train_logged(config, resume=resume, progress=progress)


def run_comparison(
    config: ComparisonConfig,
    *,
    resume: bool = False,
    show_progress: bool = True,
    ray: RayOptions | None = None,
) -> list[dict[str, Any]]:
    """Runs every arm × seed (``jobs`` at a time, or on Ray), then writes the tables and the plot.

    Args:
        config: The comparison.
        resume: Go on from the runs' last checkpoints.
        show_progress: Show a progress bar, and after it a line on stderr per
            run whose reward-drop alert fired (the runs log it to their
            ``run.log`` only, so that it does not break the bar).
        ray: Run every run as a Ray task on this cluster instead of in a local
            process pool (``config.jobs`` is then unused: the cluster's
            resources decide how many run at once). Needs the ``ray`` extra.

    Returns:
        The results table rows, one per arm.
    """
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(config.to_json())
    runs = config.run_configs()
    bar = _progress_bar(len(runs) * config.steps, show_progress)
    done = {run.out_dir: _steps_done(run.out_dir) for run in runs} if resume else {}

    def report(steps: dict[str, int]) -> None:
        done.update(steps)
        if bar is not None and sum(done.values()) != bar.n:
            bar.n = sum(done.values())
            bar.refresh()

    try:
        if ray is None:
            _run_in_pool(runs, config.jobs, resume, report)
        else:
            from feedbackgym.training.experiments.ray_runs import run_on_ray

            run_on_ray(runs, ray, resume=resume, progress=report)
    finally:
        if bar is not None:
            bar.close()
    if show_progress:
        for line in _alert_lines(runs):
            print(line, file=sys.stderr)
    return write_report(
        out,
        runs,
        title=f"{config.env_id}: {config.seeds} seeds per arm",
        planned_switch=config.planned_switch(),
    )


def _run_in_pool(
    runs: list[Any], jobs: int, resume: bool, report: Callable[[dict[str, int]], None]
) -> None:
    """Trains the runs in a local process pool, ``jobs`` at a time."""
    context = multiprocessing.get_context("spawn")
    progress = context.Queue()  # no manager process: nothing outlives a killed comparison
    done: dict[str, int] = {}
    with ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=context,
        initializer=_start_worker,
        initargs=(progress,),
    ) as pool:
        pending = {pool.submit(_run_one, run, resume) for run in runs}
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in finished:
                future.result()  # re-raise a run's error here
            _drain(progress, done)
            report(done)


def _drain(progress: Any, done: dict[str, int]) -> None:
    """Takes every progress report waiting in the queue (run directory, steps done)."""
    while True:
        try:
            run_dir, steps = progress.get_nowait()
        except queue.Empty:
            return
        done[run_dir] = steps


def _alert_lines(runs: list[Any]) -> list[str]:
    """One line per run whose reward-drop alert fired: the rounds (its ``state.json``)."""
    lines = []
    for run in runs:
        path = Path(run.out_dir) / "state.json"
        fired = json.loads(path.read_text()).get("alerts") if path.exists() else None
        if fired:
            rounds = ", ".join(str(r) for r in fired)
            lines.append(
                f"reward-drop alert: {Path(run.out_dir).name} at round{'s' * (len(fired) > 1)} "
                f"{rounds} (see {Path(run.out_dir) / 'run.log'})"
            )
    return lines


def _steps_done(run_dir: str) -> int:
    """Env steps a run has already done (from its ``state.json``; 0 when it has none)."""
    path = Path(run_dir) / "state.json"
    return int(json.loads(path.read_text()).get("timesteps", 0)) if path.exists() else 0


def _progress_bar(total: int, show: bool) -> Any:
    if not show:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="step", desc="compare", unit_scale=True)
