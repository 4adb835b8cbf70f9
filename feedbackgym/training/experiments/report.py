"""The report of a comparison: its results tables and its learning curves.

Writes, in the report's output directory::

    results.csv      one row per arm (see feedbackgym.training.experiments.stats.summarize_arm)
    results.md       the same in Markdown: IQM and mean success with bootstrap 95% CIs,
                     steps to 50% / 80% (``≥``: some run never got there), then the
                     probability of improvement of every arm over every other
    improvement.csv  arm, baseline, probability (that a run of arm beats one of baseline), low, high
    sooner.csv       the same for reaching 80% success in fewer env steps
    curves.png       mean validation success with a bootstrap 95% CI band; the
                     two-phase arms' first phase and fade shaded

:func:`write_report` writes them all from a list of runs: one comparison's
(``feedbackgym compare``), or several comparisons' found by :func:`find_runs`
(``feedbackgym report``). matplotlib loads only in :func:`plot_curves`.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from feedbackgym.errors import requires_extra
from feedbackgym.schedules import TWO_PHASE_ARMS
from feedbackgym.training.common.arms import rounds_for
from feedbackgym.training.common.run_files import read_curve
from feedbackgym.training.experiments.stats import (
    IMPROVEMENT_FIELDS,
    Curve,
    bootstrap_ci,
    final_success,
    improvement_rows,
    speed_scores,
    summarize_arm,
)

__all__ = [
    "WITH_CREDIT",
    "PHASE_GREY",
    "SPEED_PERCENT",
    "FoundRun",
    "find_runs",
    "format_or_na",
    "plot_curves",
    "pyplot",
    "run_label",
    "save_plot",
    "success_by_step",
    "with_ci",
    "write_report",
    "write_tables",
]

WITH_CREDIT = "review credit"
"""The label of a run of a review arm trained with ``review_credit`` on (``--review-credit``):
its reviews' credit was added to the rewards (the default until the switch to reviews was
made to change nothing the actor relies on; runs of that time stored it on)."""

SPEED_PERCENT = 80
"""The success the arms' speed is compared at (``sooner.csv``): the issue's goal threshold."""


@dataclass(frozen=True)
class FoundRun:
    """A run directory found by :func:`find_runs`.

    Attributes:
        arm: The run's label in the report (see :func:`run_label`).
        seed: The run's seed.
        out_dir: The run's directory.
        env_id: The run's env (``None`` when the run has no ``config.json``).
        trained: The arm the run trained, or what ``--rename`` called it.
        demonstrations: The expert episodes cloned before its first round (0: none).
        ablation: What the run changed of its arm (``"review credit"``), or ``""``.
        restart_demos: The expert episodes it restarted backwards along (0: none).
    """

    arm: str
    seed: int
    out_dir: str
    env_id: str | None = None
    trained: str = ""
    demonstrations: int = 0
    ablation: str = ""
    restart_demos: int = 0

    def __post_init__(self) -> None:
        if not self.trained:
            object.__setattr__(self, "trained", self.arm)

    @property
    def method(self) -> str:
        """The label without the cloned demonstrations: what a demonstrations study compares."""
        return run_label(self.trained, ablation=self.ablation, restart_demos=self.restart_demos)


def run_label(arm: str, demonstrations: int = 0, ablation: str = "", restart_demos: int = 0) -> str:
    """A run's label in a report: ``bcN+`` for N cloned demonstrations, ``(ablation)`` after.

    ``restartsN+`` marks a run that restarted backwards along N demonstrations.

    Example:
        >>> run_label("shaping"), run_label("shaping", 30), run_label("shaping", 10, "", 10)
        ('shaping', 'bc30+shaping', 'bc10+restarts10+shaping')
        >>> run_label("guide-then-review+shaping", ablation="review credit")
        'guide-then-review+shaping (review credit)'
    """
    label = f"restarts{restart_demos}+{arm}" if restart_demos else arm
    label = f"bc{demonstrations}+{label}" if demonstrations else label
    return f"{label} ({ablation})" if ablation else label


def find_runs(
    sources: Sequence[str | Path], renames: Mapping[tuple[str, str], str] | None = None
) -> tuple[list[FoundRun], list[str]]:
    """The runs of several comparisons, for one report: every ``SRC/runs/*/``.

    A run's arm and seed come from its ``config.json``, else from its
    directory's name (``ARM-seedS``). A run warm-started from N expert
    demonstrations (``bc_episodes``) is labelled ``bcN+ARM``, so one report
    holds a demonstrations study (see :mod:`~.demonstrations`),
    and a run of a review arm trained with review credit ``ARM (review credit)``.

    Args:
        sources: The comparisons' output directories.
        renames: ``{(source, arm): label}``: report that source's runs of that
            arm under ``label`` (e.g. runs made when an arm's name meant
            something else).

    Returns:
        The runs with one validation after a round at least in their ``curve.csv``
        (a clone's, before the first round, is not enough), and a note on each run
        left out (no validation after a round yet) or not finished (its last
        validation comes before its budget's last round).

    Raises:
        ValueError: A source holds no run, a run's arm and seed are unknown, or
            two runs have the same arm and seed.
    """
    runs: list[FoundRun] = []
    notes: list[str] = []
    seen: dict[tuple[str, int], Path] = {}
    for source in map(Path, sources):
        run_dirs = sorted(path for path in (source / "runs").glob("*") if path.is_dir())
        if not run_dirs:
            raise ValueError(f"{source} holds no runs (no directory in {source / 'runs'})")
        for run_dir in run_dirs:
            run, rounds = _found_run(run_dir)
            label = (renames or {}).get((str(source), run.trained))
            if label is not None:
                shown = run_label(label, run.demonstrations, run.ablation, run.restart_demos)
                run = dataclasses.replace(run, arm=shown, trained=label)
            if (run.arm, run.seed) in seen:
                other = seen[run.arm, run.seed]
                raise ValueError(f"{run.arm} seed {run.seed} is in both {other} and {run_dir}")
            seen[run.arm, run.seed] = run_dir
            curve = read_curve(run_dir) if (run_dir / "curve.csv").exists() else None
            if curve is None or not (curve["round"] > 0).any():  # a clone's alone does not count
                notes.append(f"{run_dir}: no validation after a round yet, left out")
                continue
            runs.append(run)
            if rounds is not None and curve["round"][-1] < rounds:
                notes.append(
                    f"{run_dir}: not finished, validated to {curve['step'][-1]:,.0f} steps "
                    f"(round {curve['round'][-1]:.0f} of {rounds})"
                )
    return runs, notes


def _found_run(run_dir: Path) -> tuple[FoundRun, int | None]:
    """A run, from its ``config.json`` or else its directory's name, and its budget in rounds."""
    config_path = run_dir / "config.json"
    if config_path.exists():
        config = json.loads(config_path.read_text())
        rounds = rounds_for(config["total_steps"], config["n_envs"], config["n_steps"])
        arm, demonstrations = config["arm"], config.get("bc_episodes", 0)
        reviewed = "review" in arm.split("+")[0]  # a review speaks (old arm names too)
        ablation = WITH_CREDIT if reviewed and config.get("review_credit") else ""
        restarts = config.get("restart_demos", 0)
        label = run_label(arm, demonstrations, ablation, restarts)
        where = (str(run_dir), config["env_id"])
        found = FoundRun(label, config["seed"], *where, arm, demonstrations, ablation, restarts)
        return found, rounds
    named = re.fullmatch(r"(.+)-seed(\d+)", run_dir.name)
    if named is None:
        raise ValueError(f"{run_dir}: no config.json, and its name is not ARM-seedS")
    return FoundRun(named[1], int(named[2]), str(run_dir)), None


def write_report(
    out: Path,
    runs: Sequence[Any],
    *,
    title: str,
    planned_switch: tuple[float, float] | None = None,
    notes: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Summarizes the runs per arm, then writes the tables and the plot into ``out``.

    Args:
        out: The output directory (it exists).
        runs: The runs (``arm`` and ``out_dir`` each), each with one validation at least.
        title: The plot's title.
        planned_switch: See :func:`plot_curves`.
        notes: Lines for the end of ``results.md`` (on the runs, see :func:`find_runs`).

    Returns:
        The results table rows, one per arm.
    """
    by_arm: dict[str, list[Curve]] = {}
    for run in runs:
        by_arm.setdefault(run.arm, []).append(read_curve(run.out_dir))
    rows = [summarize_arm(arm, curves) for arm, curves in by_arm.items()]
    improvement = improvement_rows({arm: final_success(curves) for arm, curves in by_arm.items()})
    sooner = improvement_rows(
        {arm: speed_scores(curves, SPEED_PERCENT) for arm, curves in by_arm.items()}
    )
    write_tables(out, rows, improvement, notes, sooner=sooner)
    plot_curves(out, runs, title=title, planned_switch=planned_switch)
    return rows


def format_or_na(value: float, spec: str) -> str:
    """``value`` formatted by ``spec``, or ``n/a`` for ``nan``.

    Example:
        >>> format_or_na(0.25, ".0%"), format_or_na(float("nan"), ".0%")
        ('25%', 'n/a')
    """
    return "n/a" if isinstance(value, float) and math.isnan(value) else format(value, spec)


def with_ci(value: float, low: float, high: float, spec: str) -> str:
    """``value [low, high]``, without the interval when it is ``nan``.

    Example:
        >>> with_ci(0.5, 0.25, 0.75, ".0%"), with_ci(0.5, float("nan"), float("nan"), ".0%")
        ('50% [25%, 75%]', '50%')
    """
    if math.isnan(low):
        return format_or_na(value, spec)
    return f"{format_or_na(value, spec)} [{low:{spec}}, {high:{spec}}]"


def _steps_cell(row: dict[str, Any], percent: int) -> str:
    """The steps to ``percent`` success [CI]: ``≥`` when censored, and how many runs got there."""
    bound = "≥ " if row[f"steps_to_{percent}_censored"] else ""
    reached = f"({row[f'reached_{percent}']}/{row['seeds']})"
    key = f"steps_to_{percent}"
    return f"{bound}{with_ci(row[key], row[f'{key}_low'], row[f'{key}_high'], ',.0f')} {reached}"


def _markdown(
    rows: list[dict[str, Any]],
    improvement: list[dict[str, Any]],
    notes: Sequence[str],
    sooner: list[dict[str, Any]],
) -> str:
    replays = any(r.get("replayed_steps", 0) for r in rows)
    lines = [
        "| arm | seeds | steps | IQM success [95% CI] | mean success [95% CI] | hints masked "
        "| steps to 50% | steps to 80% | final return | before switch | after switch |"
        + (" replayed steps | steps to 80% with replayed |" if replays else ""),
        "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if replays else ""),
    ]
    for r in rows:
        short = f" ({r['short_runs']} short)" if r["short_runs"] else ""
        lines.append(
            f"| {r['arm']} | {r['seeds']} | {r['last_step']:,.0f}{short} "
            f"| {with_ci(r['iqm'], r['iqm_low'], r['iqm_high'], '.0%')} "
            f"| {with_ci(r['success'], r['mean_low'], r['mean_high'], '.0%')} "
            f"| {r['success_unguided']:.0%} | {_steps_cell(r, 50)} | {_steps_cell(r, 80)} "
            f"| {r['final_return']:.2f} | {format_or_na(r['success_before_switch'], '.0%')} "
            f"| {format_or_na(r['success_after_switch'], '.0%')} |"
            + (
                f" {r['replayed_steps']:,.0f} | {r['steps_to_80_with_replayed']:,.0f} |"
                if replays
                else ""
            )
        )
    lines += [
        "",
        "Success at each run's last validation: IQM (mean of the middle half of the runs) "
        "and mean, with percentile bootstrap 95% CIs over the runs. Steps: the arm's last "
        "validation (short: runs that stopped before it). Steps to 50% / 80%: IQM over the "
        "runs, ≥ when some never got there (counted at their last validation), (reached/seeds)."
        + (
            " Replayed steps: the steps replayed to reach restarts (mean over the runs), "
            "not counted in steps; steps to 80% with replayed counts them too."
            if replays
            else ""
        ),
    ]
    if improvement:
        lines += [
            "",
            "| arm | baseline | P(arm > baseline) [95% CI] |",
            "|---|---|---|",
            *(
                f"| {i['arm']} | {i['baseline']} "
                f"| {with_ci(i['probability'], i['low'], i['high'], '.2f')} |"
                for i in improvement
            ),
            "",
            "P(arm > baseline): the probability that a run of arm ends with a higher validation "
            "success than a run of baseline, ties counting half; bootstrap 95% CI.",
        ]
    if sooner:
        lines += [
            "",
            f"| arm | baseline | P(arm reaches {SPEED_PERCENT}% sooner) [95% CI] |",
            "|---|---|---|",
            *(
                f"| {i['arm']} | {i['baseline']} "
                f"| {with_ci(i['probability'], i['low'], i['high'], '.2f')} |"
                for i in sooner
            ),
            "",
            f"P(arm reaches {SPEED_PERCENT}% sooner): the same over the env steps to "
            f"{SPEED_PERCENT}% success, a run that never got there slower than any that did "
            "(two such runs tie).",
        ]
    if notes:
        lines += ["", "Runs:", "", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"


def write_tables(
    out: Path,
    rows: list[dict[str, Any]],
    improvement: list[dict[str, Any]],
    notes: Sequence[str] = (),
    *,
    sooner: list[dict[str, Any]] | None = None,
) -> None:
    """Writes ``out/results.csv``, ``out/results.md``, ``out/improvement.csv`` and ``sooner.csv``.

    Args:
        out: The output directory.
        rows: One row per arm, as :func:`~.stats.summarize_arm` makes them.
        improvement: The arms' probabilities of improvement, as
            :func:`~.stats.improvement_rows` makes them.
        notes: Lines for the end of ``results.md``.
        sooner: The arms' probabilities of reaching :data:`SPEED_PERCENT` success
            sooner (``sooner.csv``, same columns as ``improvement.csv``); none: not written.
    """
    tables = [
        ("results.csv", list(rows[0]), rows),
        ("improvement.csv", IMPROVEMENT_FIELDS, improvement),
    ]
    if sooner is not None:
        tables.append(("sooner.csv", IMPROVEMENT_FIELDS, sooner))
    for name, fields, table in tables:
        with (out / name).open("w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=fields)
            writer.writeheader()
            writer.writerows(table)
    (out / "results.md").write_text(_markdown(rows, improvement, notes, sooner or []))


PHASE_GREY = "0.45"
"""The phases' shading (a grey, hatched for the fade) and the switch lines: no arm's colour,
so a phase never reads as an arm's CI band."""


def plot_curves(
    out: Path,
    runs: Sequence[Any],
    *,
    title: str,
    planned_switch: tuple[float, float] | None = None,
) -> Path:
    """Plots each arm's mean validation success, with a bootstrap 95% CI band of the mean.

    At each validation, the mean and its band are over the arm's runs that
    reached it: solid while every run has, dashed beyond the shortest run.
    Each arm has its own colour, its band the same; phases are grey
    (:data:`PHASE_GREY`), shaded only when a two-phase arm is plotted, from its runs'
    validations (the adaptive rule moves each run's switch on its own): to the
    median switch and, hatched, to the median end of the fade, with a dotted line at
    each run's switch; when no such run has switched yet, from ``planned_switch``.
    An arm with a curriculum also has its runs' mean task width, dotted, on the same scale.

    Args:
        out: The output directory.
        runs: The runs (``arm`` and ``out_dir`` each).
        title: The plot's title.
        planned_switch: Env steps where the configured switch and fade end
            come, or ``None`` when unknown.

    Returns:
        The path of the plot, ``out/curves.png``.

    Raises:
        DependencyNotInstalled: matplotlib is missing.
    """
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(8, 4.5))
    bounds = _phase_bounds(runs, planned_switch)
    if bounds:
        switch, fade_end = (float(np.median([b[i] for b in bounds])) for i in (0, 1))
        axis.axvspan(0, switch, color=PHASE_GREY, alpha=0.1, label="first phase (two-phase arms)")
        axis.axvspan(
            switch,
            fade_end,
            facecolor="none",
            edgecolor=PHASE_GREY,
            hatch="///",
            linewidth=0,
            alpha=0.4,
            label="fade (median)",
        )
    if len(bounds) > 1:
        for k, (each, _) in enumerate(bounds):
            axis.axvline(
                each,
                color=PHASE_GREY,
                linestyle=":",
                linewidth=1,
                label="each run's switch" if k == 0 else None,
            )
    for arm in dict.fromkeys(run.arm for run in runs):
        curves = [read_curve(r.out_dir) for r in runs if r.arm == arm]
        steps, at_step = success_by_step(curves)
        mean = np.array([np.mean(values) for values in at_step])
        low, high = np.array([bootstrap_ci(values) for values in at_step]).T
        ends = [c["step"][-1] for c in curves]
        common = int(np.searchsorted(steps, min(ends), side="right"))
        short = sum(end < steps[-1] for end in ends)
        label = f"{arm} (dashed: {short} short runs left out)" if short else arm
        (line,) = axis.plot(steps[:common], mean[:common], label=label)
        if short:
            dashed = slice(common - 1, None)
            axis.plot(steps[dashed], mean[dashed], color=line.get_color(), linestyle="--")
        axis.fill_between(steps, low, high, color=line.get_color(), alpha=0.15)
        _plot_curriculum(axis, arm, curves, line.get_color())
    axis.set_xlabel("env steps")
    axis.set_ylabel("validation success (mean, 95% CI)")
    return save_plot(figure, axis, out / "curves.png", title=title, legend="upper left")


def _plot_curriculum(axis: Any, arm: str, curves: Sequence[Any], color: str) -> None:
    """An arm's mean curriculum width at each validation, dotted (arms with a curriculum)."""
    if not any(np.isfinite(curve["curriculum"]).any() for curve in curves):
        return
    steps, widths = success_by_step([{**c, "success": c["curriculum"]} for c in curves])
    mean = [float(np.nanmean(w)) if np.isfinite(w).any() else np.nan for w in map(np.array, widths)]
    axis.plot(steps, mean, color=color, linestyle=":", label=f"{arm}: curriculum width (mean)")


def success_by_step(
    curves: Sequence[Mapping[str, np.ndarray]],
) -> tuple[np.ndarray, list[list[float]]]:
    """Every step some curve validated at, and the curves' success there.

    By step, not by row: a cloned run's curve starts at step 0 (one from before
    clones were validated, or an uncloned one, does not), and a short run lacks
    the last steps.

    Example:
        >>> cloned = {"step": np.array([0, 100, 200]), "success": np.array([0.5, 0.6, 0.7])}
        >>> older = {"step": np.array([100, 200]), "success": np.array([0.2, 0.3])}
        >>> steps, success = success_by_step([cloned, older])
        >>> steps.tolist(), success
        ([0, 100, 200], [[0.5], [0.6, 0.2], [0.7, 0.3]])
    """
    steps = np.unique(np.concatenate([curve["step"] for curve in curves]))
    success = [
        [float(c["success"][c["step"] == step][0]) for c in curves if step in c["step"]]
        for step in steps
    ]
    return steps, success


def pyplot() -> Any:
    """``matplotlib.pyplot``, drawing off-screen (Agg).

    Returns:
        The ``matplotlib.pyplot`` module.

    Raises:
        DependencyNotInstalled: matplotlib is missing.

    Example:
        >>> figure, axis = pyplot().subplots()  # doctest: +SKIP
    """
    with requires_extra("baselines", "matplotlib"):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    return plt


def save_plot(figure: Any, axis: Any, path: Path, *, title: str, legend: str) -> Path:
    """Finishes a success plot, saves it to ``path``, closes it and returns ``path``.

    Args:
        figure: The plot's matplotlib figure (from :func:`pyplot`).
        axis: Its axis, with the data drawn.
        path: Where the PNG goes.
        title: The plot's title.
        legend: The legend's matplotlib location (``"upper left"``).

    Example:
        >>> figure, axis = pyplot().subplots()  # doctest: +SKIP
        >>> save_plot(figure, axis, Path("plot.png"), title="t", legend="best")  # doctest: +SKIP
        PosixPath('plot.png')
    """
    axis.set_ylim(-0.02, 1.02)
    axis.set_title(title)
    axis.legend(loc=legend, fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    import matplotlib.pyplot as plt  # loaded by pyplot(), which drew the figure

    plt.close(figure)
    return path


def _phase_bounds(
    runs: Sequence[Any], planned: tuple[float, float] | None
) -> list[tuple[float, float]]:
    """Per two-phase run, the steps where its switch came and where its fade ended.

    ``[planned]`` when two-phase runs are plotted but none has switched (none
    when ``planned`` is ``None``); none when no two-phase run is plotted.
    """
    two_phase = [run for run in runs if getattr(run, "trained", run.arm) in TWO_PHASE_ARMS]
    bounds = []
    for run in two_phase:
        curve = read_curve(run.out_dir)
        phases = list(curve["phase"])
        later = [i for i, p in enumerate(phases) if p != phases[0]]
        settled = [i for i in later if phases[i] != "fade"]
        if later:
            end = curve["step"][settled[0]] if settled else curve["step"][-1]
            bounds.append((float(curve["step"][later[0]]), float(end)))
    if bounds or not two_phase or planned is None:
        return bounds
    return [planned]
