"""``feedbackgym compare``: every arm × seed as parallel runs, one results table, learning curves.

This module runs the comparison; :mod:`~.stats` computes the
results tables from the runs' curves and :mod:`~.report` writes them
and plots the curves.

Outputs in ``--out``::

    config.json        the full comparison config
    runs/ARM-seedS/    each run (see feedbackgym.training.common.run_files): TensorBoard logs,
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
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedbackgym._process import exit_with_parent
from feedbackgym.config import checked_arm, load_config
from feedbackgym.schedules import ARMS, TWO_PHASE_ARMS
from feedbackgym.training.common.run_files import read_state
from feedbackgym.training.common.run_settings import RunConfig
from feedbackgym.training.experiments.report import write_report
from feedbackgym.training.experiments.task_overlap import validation_overlap

if TYPE_CHECKING:
    from feedbackgym.training.experiments.ray_runs import RayOptions

__all__ = ["ComparisonConfig", "QUICK", "run_comparison"]


class ComparisonConfig:
    """A comparison: which env, arms, seeds and budget, and the settings every run shares.

    The settings are those of one run (:class:`~feedbackgym.training.common.run_settings.RunConfig`,
    written there once): :attr:`base` holds them, and each run is the base with
    its own arm, seed and directory (:meth:`run_configs`).

    Args:
        env_id: The env.
        arms: Arms to compare (see :data:`feedbackgym.schedules.ARMS`); each
            run's config is its arm's preset on the comparison's feedback config.
        seeds: Seeds per arm.
        steps: Env steps per run.
        out: Output directory.
        jobs: Runs in parallel (processes; on Ray the cluster's resources decide).
        first_seed: The first seed: the runs have seeds ``first_seed`` to
            ``first_seed + seeds - 1`` (fresh seeds for a confirmation).
        **settings: Any other field of ``RunConfig`` (``n_envs``, ``learning_rate``,
            ``feedback``, ``feedback_file``, ``record``, ``trainer``, ...), with its
            default there, except ``eval_every``: about 15 validations per run
            unless given.

    Attributes:
        arms: The arms.
        seeds: Seeds per arm.
        first_seed: The first seed.
        out: The output directory.
        jobs: Runs in parallel.
        base: The settings every run shares (its ``arm`` is the first arm's, its
            ``seed`` 0 and its ``out_dir`` the comparison's: each run has its own).

    Raises:
        ValueError: An unknown arm or run setting, or a budget below one round.
        ConfigError: A bad feedback setting or config file.

    Example:
        >>> config = ComparisonConfig(
        ...     "feedbackgym/OpsIncidentEasy-v1", ["sparse", "shaping"], 2, 4096, "out", n_envs=4
        ... )
        >>> config.base.n_envs, config.rounds, config.base.eval_every
        (4, 8, 1)
        >>> ComparisonConfig("feedbackgym/OpsIncidentEasy-v1", ["sparse"], 1, 4096, "out", lr=1)
        Traceback (most recent call last):
        ...
        ValueError: unknown run settings: lr (a comparison takes RunConfig's fields)
    """

    def __init__(
        self,
        env_id: str,
        arms: list[str],
        seeds: int,
        steps: int,
        out: str,
        jobs: int = 1,
        first_seed: int = 0,
        **settings: Any,
    ) -> None:
        if not arms:
            raise ValueError("a comparison needs at least one arm")
        for arm in arms:
            checked_arm(arm, ARMS)
        own = {"env_id", "arm", "seed", "total_steps", "out_dir"}
        odd = sorted(settings.keys() - ({f.name for f in fields(RunConfig)} - own))
        if odd:
            raise ValueError(
                f"unknown run settings: {', '.join(odd)} (a comparison takes RunConfig's fields)"
            )
        self.arms = list(arms)
        self.seeds = seeds
        self.first_seed = first_seed
        self.out = out
        self.jobs = jobs
        base = RunConfig(
            env_id=env_id, arm=self.arms[0], seed=0, total_steps=steps, out_dir=out, **settings
        )
        if seeds < 1 or steps < base.n_envs * base.n_steps or jobs < 1 or first_seed < 0:
            raise ValueError(
                "need seeds >= 1, jobs >= 1, first_seed >= 0 and steps >= n_envs * n_steps "
                f"({base.n_envs * base.n_steps})"
            )
        if "eval_every" not in settings:
            base = replace(base, eval_every=max(1, base.rounds // 15))
        self.base = base
        self.run_configs()  # checks every arm's feedback settings before any run starts

    @property
    def env_id(self) -> str:
        """The env."""
        return self.base.env_id

    @property
    def steps(self) -> int:
        """Env steps per run."""
        return self.base.total_steps

    @property
    def rounds(self) -> int:
        """Training rounds per run."""
        return self.base.rounds

    def planned_switch(self) -> tuple[float, float] | None:
        """Env steps where the two-phase arms' switch and fade end are planned.

        ``None`` when no arm has two phases. A followed file is read as it is now.
        """
        two_phase = [run for run in self.run_configs() if run.arm in TWO_PHASE_ARMS]
        if not two_phase:
            return None
        base = self.base
        feedback = load_config(base.feedback_file) if base.feedback_file else base.feedback
        schedule = two_phase[0].arm_config(feedback).schedule
        steps_per_round = base.n_envs * base.n_steps
        switch = schedule.switch_at * self.rounds * steps_per_round
        return switch, switch + schedule.fade_length * steps_per_round

    def run_configs(self) -> list[RunConfig]:
        """One run config per arm and seed, seed by seed: the base with its arm, seed and directory.

        Every arm's run of seed 0 comes before any run of seed 1, and so on: runs
        start in this order, so a comparison stopped part-way has the same seeds
        done in every arm with ``jobs=1``, and with more jobs, one seed more in
        some arms at most; its table compares like with like.

        Raises:
            ConfigError: A bad feedback setting or config file.

        Example:
            >>> config = ComparisonConfig(
            ...     "feedbackgym/OpsIncidentEasy-v1", ["sparse", "shaping"], 2, 4096, "out"
            ... )
            >>> [(run.arm, run.seed, run.out_dir) for run in config.run_configs()][1:3]
            [('shaping', 0, 'out/runs/shaping-seed0'), ('sparse', 1, 'out/runs/sparse-seed1')]
        """
        return [
            replace(
                self.base,
                arm=arm,
                seed=seed,
                out_dir=str(Path(self.out) / "runs" / f"{arm}-seed{seed}"),
                feedback_overrides=dict(self.base.feedback_overrides),
                env_kwargs=dict(self.base.env_kwargs),
            )
            for seed in range(self.first_seed, self.first_seed + self.seeds)
            for arm in self.arms
        ]

    def to_json(self) -> str:
        """The comparison as JSON (``config.json`` of its output directory).

        The settings every run shares, as a run's ``config.json`` writes them, and
        the comparison's own: ``arms``, ``seeds``, ``out``, ``jobs`` and, when not 0,
        ``first_seed``.
        """
        shared = json.loads(self.base.to_json())
        for own in ("arm", "seed", "out_dir"):
            del shared[own]
        data = {"arms": self.arms, "seeds": self.seeds, "out": self.out, "jobs": self.jobs}
        if self.first_seed:
            data["first_seed"] = self.first_seed
        return json.dumps({**shared, **data}, indent=2, sort_keys=True)


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
    base = config.base
    overlap = validation_overlap(base.env_id, base.env_kwargs, base.eval_episodes)
    return write_report(
        out,
        runs,
        title=f"{config.env_id}: {config.seeds} seeds per arm",
        planned_switch=config.planned_switch(),
        notes=[_policy_note(base), *([] if overlap is None else [overlap])],
    )


def _policy_note(base: RunConfig) -> str:
    """The line of ``results.md`` that names what every run trained.

    Example:
        >>> base = RunConfig(env_id="feedbackgym/OpsIncidentEasy-v2", arm="shaping", seed=0,
        ...                  total_steps=4096, out_dir="out")
        >>> _policy_note(base)
        'torch trainer, entity policy (widths [32, 32]), entropy coefficient 0.03'
    """
    return (
        f"{base.trainer} trainer, {base.policy} policy (widths {base.net_arch}), "
        f"entropy coefficient {base.ent_coef:g}"
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
        fired = read_state(Path(run.out_dir)).get("alerts")
        if fired:
            rounds = ", ".join(str(r) for r in fired)
            lines.append(
                f"reward-drop alert: {Path(run.out_dir).name} at round{'s' * (len(fired) > 1)} "
                f"{rounds} (see {Path(run.out_dir) / 'run.log'})"
            )
    return lines


def _steps_done(run_dir: str) -> int:
    """Env steps a run has already done (from its ``state.json``; 0 when it has none)."""
    return int(read_state(Path(run_dir)).get("timesteps", 0))


def _progress_bar(total: int, show: bool) -> Any:
    if not show:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="step", desc="compare", unit_scale=True)
