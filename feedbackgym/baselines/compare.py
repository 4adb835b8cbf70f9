"""``feedbackgym compare``: every arm × seed as parallel runs, one results table, learning curves.

Outputs in ``--out``::

    config.json        the full comparison config
    runs/ARM-seedS/    each run (see feedbackgym.baselines.runner): TensorBoard logs,
                       curve.csv, versioned checkpoints, state.json
    results.csv        per arm: success (mean, 95% CI), steps to 50% / 80%, final return,
    results.md         success before and after the switch, success with hints masked
    curves.png         validation success over training, phases shaded
"""

from __future__ import annotations

import csv
import json
import math
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from feedbackgym.baselines.arms import ArmSettings, checked_keep_checkpoints, rounds_for
from feedbackgym.schedules import ARMS, DEFAULT_MIN_SUCCESS

__all__ = ["ComparisonConfig", "QUICK", "run_comparison", "summarize_runs"]

_T95: tuple[float, ...] = (
    *(12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179),
    *(2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064),
    *(2.060, 2.056, 2.052, 2.048, 2.045, 2.042),
)
"""Two-sided 95% Student t quantiles for 1 to 30 degrees of freedom."""
_Z95 = 1.959964


def t95(df: int) -> float:
    """The two-sided 95% Student t quantile for ``df`` >= 1 degrees of freedom.

    Within 0.001: a table to 30, then two terms of the Cornish-Fisher expansion.

    Example:
        >>> t95(4), t95(30), round(t95(31), 3), round(t95(60), 3), round(t95(1000), 3)
        (2.776, 2.042, 2.039, 2.0, 1.962)
    """
    if df <= len(_T95):
        return _T95[df - 1]
    z = _Z95
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass
class ComparisonConfig:
    """A comparison: which env, arms, seeds and budget.

    Attributes:
        env_id: The env.
        arms: Arms to compare (see :data:`feedbackgym.schedules.ARMS`).
        seeds: Seeds per arm.
        steps: Env steps per run.
        out: Output directory.
        jobs: Runs in parallel (processes).
        n_envs: Envs per run.
        n_steps: Steps per env per round.
        eval_every: Rounds between validations (``None``: about 15 per run).
        eval_episodes: Validation seeds per validation.
        bc_episodes: Expert episodes for a behaviour-cloning warm-up (0: none).
        switch_at: Where the fade starts, as a fraction of training.
        fade: Fade length in rounds (``None``: 10% of training, at least 5 rounds).
        adaptive: :class:`~feedbackgym.schedules.TrendRule` arguments that move the
            switch from the training trend (default: the return trend, and the
            guide held while the training success is under 30%), or ``None``.
        env_kwargs: Keyword arguments for ``gym.make``.
        record: Record every training episode in each run's ``trajectories/``.
        dropout: Hint dropout of the guide arms (see :class:`ArmSettings`).
        dropout_scope: ``"step"`` or ``"episode"`` (see :class:`ArmSettings`).
        keep_checkpoints: Round checkpoints kept per run, the newest (0: every one;
            each run's ``best.zip`` is always kept).
        shaping_terminal: The potential of a terminal state (see
            :class:`~feedbackgym.wrappers.ShapeWithSubgoals` and :class:`ArmSettings`).
        gamma: The discount of the learner (PPO) and of the shaping term.
        anneal_lr: Decay PPO's learning rate linearly to 0 over each run.
        time_limit_terminal: Let PPO treat time-limit cut-offs as ends (no bootstrap).
    """

    env_id: str
    arms: list[str]
    seeds: int
    steps: int
    out: str
    jobs: int = 1
    n_envs: int = 8
    n_steps: int = 128
    eval_every: int | None = None
    eval_episodes: int = 30
    bc_episodes: int = 0
    switch_at: float = 0.4
    fade: float | None = None
    adaptive: dict[str, Any] | None = field(
        default_factory=lambda: {"metric": "return", "min_success": DEFAULT_MIN_SUCCESS}
    )
    env_kwargs: dict[str, Any] | None = None
    record: bool = False
    dropout: float = ArmSettings.dropout
    dropout_scope: str = ArmSettings.dropout_scope
    keep_checkpoints: int = 5
    anneal_lr: bool = False
    time_limit_terminal: bool = False
    shaping_terminal: str = ArmSettings.shaping_terminal
    gamma: float = ArmSettings.gamma

    def __post_init__(self) -> None:
        unknown = [a for a in self.arms if a not in ARMS]
        if unknown or not self.arms:
            raise ValueError(f"unknown arms {unknown}; choose from {', '.join(ARMS)}")
        if self.seeds < 1 or self.steps < self.n_envs * self.n_steps or self.jobs < 1:
            raise ValueError(
                "need seeds >= 1, jobs >= 1 and steps >= n_envs * n_steps "
                f"({self.n_envs * self.n_steps})"
            )
        self.arm_settings()  # checks the feedback settings before any run starts
        checked_keep_checkpoints(self.keep_checkpoints)

    @property
    def rounds(self) -> int:
        """Training rounds per run."""
        return rounds_for(self.steps, self.n_envs, self.n_steps)

    @property
    def fade_rounds(self) -> float:
        """The fade length in rounds (``fade``, or 10% of training, at least 5)."""
        return self.fade if self.fade is not None else max(5.0, 0.1 * self.rounds)

    def arm_settings(self) -> ArmSettings:
        """The feedback settings every run of this comparison shares.

        Raises:
            ValueError: A setting is out of range (the shaping's ``gamma`` or terminal mode).
        """
        return ArmSettings(
            total_rounds=self.rounds,
            switch_at=self.switch_at,
            fade=self.fade_rounds,
            adaptive=self.adaptive,
            dropout=self.dropout,
            dropout_scope=self.dropout_scope,
            shaping_terminal=self.shaping_terminal,
            gamma=self.gamma,
            env_kwargs=dict(self.env_kwargs or {}),
        )

    def run_configs(self) -> list[Any]:
        """One :class:`~feedbackgym.baselines.runner.RunConfig` per arm and seed."""
        from feedbackgym.baselines.runner import RunConfig

        eval_every = self.eval_every or max(1, self.rounds // 15)
        settings = self.arm_settings()
        return [
            RunConfig(
                env_id=self.env_id,
                arm=arm,
                seed=seed,
                total_steps=self.steps,
                out_dir=str(Path(self.out) / "runs" / f"{arm}-seed{seed}"),
                n_envs=self.n_envs,
                n_steps=self.n_steps,
                eval_every=eval_every,
                eval_episodes=self.eval_episodes,
                bc_episodes=self.bc_episodes,
                settings=settings,
                record=self.record,
                keep_checkpoints=self.keep_checkpoints,
                anneal_lr=self.anneal_lr,
                time_limit_terminal=self.time_limit_terminal,
            )
            for arm in self.arms
            for seed in range(self.seeds)
        ]


QUICK = {
    "env_id": "feedbackgym/OpsIncidentEasy-v0",
    "arms": ["sparse", "shaping", "guide-then-review"],
    "seeds": 2,
    "steps": 153_600,
    "eval_episodes": 20,
}
"""The ``--quick`` comparison (the README's main job): about 4.5 minutes on 2 idle cores.

At 61,440 steps no arm had learned anything yet (all 0%); at 150k steps sparse is still
at 0% while guide-then-review is at about 40% (see the README's Results)."""


def _run_one(config: Any, resume: bool, queue: Any) -> dict[str, Any]:
    from feedbackgym.baselines.runner import train_run

    def progress(steps: int) -> None:
        queue.put((config.out_dir, steps))

    return train_run(config, resume=resume, progress=progress)


def run_comparison(
    config: ComparisonConfig, *, resume: bool = False, show_progress: bool = True
) -> list[dict[str, Any]]:
    """Runs every arm × seed (``jobs`` at a time), then writes the table and the plot.

    Returns:
        The results table rows, one per arm.
    """
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(asdict(config), indent=2, sort_keys=True))
    runs = config.run_configs()
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        queue = manager.Queue()
        bar = _progress_bar(len(runs) * config.steps, show_progress)
        done = {run.out_dir: _steps_done(run.out_dir) for run in runs} if resume else {}
        with ProcessPoolExecutor(max_workers=config.jobs, mp_context=context) as pool:
            pending = {pool.submit(_run_one, run, resume, queue) for run in runs}
            while pending:
                finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in finished:
                    future.result()  # re-raise a run's error here
                while not queue.empty():
                    run_dir, steps = queue.get()
                    done[run_dir] = steps
                if bar is not None and sum(done.values()) != bar.n:
                    bar.n = sum(done.values())
                    bar.refresh()
        if bar is not None:
            bar.close()
    rows = summarize_runs(out, runs)
    _write_tables(out, rows)
    plot_curves(out, runs, config)
    return rows


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


def _ci95(values: Sequence[float]) -> float:
    n = len(values)
    if n < 2:
        return float("nan")
    return float(t95(n - 1) * np.std(values, ddof=1) / math.sqrt(n))


def _steps_to(curve: dict[str, np.ndarray], threshold: float) -> float:
    reached = np.nonzero(curve["success"] >= threshold)[0]
    return float(curve["step"][reached[0]]) if len(reached) else float("nan")


def summarize_runs(out: Path, runs: Sequence[Any]) -> list[dict[str, Any]]:
    """Aggregates the runs' curves per arm into the results table rows."""
    from feedbackgym.baselines.runner import read_curve

    by_arm: dict[str, list[dict[str, np.ndarray]]] = {}
    for run in runs:
        by_arm.setdefault(run.arm, []).append(read_curve(run.out_dir))
    rows = []
    for arm, curves in by_arm.items():
        final = [float(c["success"][-1]) for c in curves]
        unguided = [float(c["success_unguided"][-1]) for c in curves]
        to50 = [_steps_to(c, 0.5) for c in curves]
        to80 = [_steps_to(c, 0.8) for c in curves]
        before, after = _around_switch(curves)
        rows.append(
            {
                "arm": arm,
                "seeds": len(curves),
                "success": float(np.mean(final)),
                "success_ci95": _ci95(final),
                "success_unguided": float(np.mean(unguided)),
                "steps_to_50": _mean_reached(to50),
                "reached_50": sum(not math.isnan(s) for s in to50),
                "steps_to_80": _mean_reached(to80),
                "reached_80": sum(not math.isnan(s) for s in to80),
                "final_return": float(np.mean([c["mean_return"][-1] for c in curves])),
                "success_before_switch": before,
                "success_after_switch": after,
            }
        )
    return rows


def _mean_reached(steps: Sequence[float]) -> float:
    reached = [s for s in steps if not math.isnan(s)]
    return float(np.mean(reached)) if reached else float("nan")


def _around_switch(curves: Sequence[dict[str, np.ndarray]]) -> tuple[float, float]:
    """Success at the last validation before the fade, and the mean after the fade ends."""
    before, after = [], []
    for curve in curves:
        phases = list(curve["phase"])
        if "fade" not in phases and len(set(phases)) < 2:
            continue  # this seed never switched (within the run)
        first_phase = phases[0]
        pre = [s for s, p in zip(curve["success"], phases, strict=True) if p == first_phase]
        post = [
            s
            for s, p in zip(curve["success"], phases, strict=True)
            if p not in (first_phase, "fade")
        ]
        if pre and post:
            before.append(pre[-1])
            after.append(float(np.mean(post)))
    if not before:
        return float("nan"), float("nan")
    return float(np.mean(before)), float(np.mean(after))


def _fmt(value: float, spec: str) -> str:
    return "n/a" if isinstance(value, float) and math.isnan(value) else format(value, spec)


def _write_tables(out: Path, rows: list[dict[str, Any]]) -> None:
    with (out / "results.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "| arm | seeds | success (95% CI) | hints masked | steps to 50% | steps to 80% "
        "| final return | before switch | after switch |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['arm']} | {r['seeds']} "
            f"| {r['success']:.0%} ± {_fmt(r['success_ci95'] * 100, '.0f')} "
            f"| {r['success_unguided']:.0%} "
            f"| {_fmt(r['steps_to_50'], ',.0f')} ({r['reached_50']}/{r['seeds']}) "
            f"| {_fmt(r['steps_to_80'], ',.0f')} ({r['reached_80']}/{r['seeds']}) "
            f"| {r['final_return']:.2f} | {_fmt(r['success_before_switch'], '.0%')} "
            f"| {_fmt(r['success_after_switch'], '.0%')} |"
        )
    (out / "results.md").write_text("\n".join(lines) + "\n")


def plot_curves(out: Path, runs: Sequence[Any], config: ComparisonConfig) -> Path:
    """Plots mean validation success per arm (min-max band), guide and fade phases shaded.

    The phases come from the two-phase runs' validations (the adaptive rule
    moves each run's switch on its own): shaded to the median switch and the
    median end of the fade, with a dotted line at each run's switch; without
    such runs, from the configured schedule.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from feedbackgym.baselines.runner import read_curve

    figure, axis = plt.subplots(figsize=(8, 4.5))
    bounds = _phase_bounds(runs, config)
    switch, fade_end = (float(np.median([b[i] for b in bounds])) for i in (0, 1))
    axis.axvspan(0, switch, color="tab:green", alpha=0.08, label="first phase (two-phase arms)")
    axis.axvspan(switch, fade_end, color="tab:orange", alpha=0.12, label="fade (median)")
    if len(bounds) > 1:
        for k, (each, _) in enumerate(bounds):
            axis.axvline(
                each,
                color="tab:orange",
                linestyle=":",
                linewidth=1,
                label="each run's switch" if k == 0 else None,
            )
    for arm in dict.fromkeys(run.arm for run in runs):
        curves = [read_curve(r.out_dir) for r in runs if r.arm == arm]
        length = min(len(c["step"]) for c in curves)
        steps = curves[0]["step"][:length]
        success = np.stack([c["success"][:length] for c in curves])
        axis.plot(steps, success.mean(axis=0), label=arm)
        axis.fill_between(steps, success.min(axis=0), success.max(axis=0), alpha=0.15)
    axis.set_xlabel("env steps")
    axis.set_ylabel("validation success")
    axis.set_ylim(-0.02, 1.02)
    axis.set_title(f"{config.env_id}: {config.seeds} seeds per arm")
    axis.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    path = out / "curves.png"
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def _phase_bounds(runs: Sequence[Any], config: ComparisonConfig) -> list[tuple[float, float]]:
    """Per two-phase run, the steps where its switch came and where its fade ended.

    The configured ones when no two-phase run has switched.
    """
    from feedbackgym.baselines.runner import read_curve

    bounds = []
    for run in runs:
        if run.arm in ("guide-then-review", "review-then-guide"):
            curve = read_curve(run.out_dir)
            phases = list(curve["phase"])
            later = [i for i, p in enumerate(phases) if p != phases[0]]
            settled = [i for i in later if phases[i] != "fade"]
            if later:
                end = curve["step"][settled[0]] if settled else curve["step"][-1]
                bounds.append((float(curve["step"][later[0]]), float(end)))
    if bounds:
        return bounds
    steps_per_round = config.n_envs * config.n_steps
    switch = config.switch_at * config.rounds * steps_per_round
    return [(switch, switch + config.fade_rounds * steps_per_round)]
