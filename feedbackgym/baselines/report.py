"""The report of a comparison: its results table and its learning curves.

Writes, in the comparison's output directory::

    results.csv    the table rows (see feedbackgym.baselines.stats.summarize_arm)
    results.md     the same table in Markdown, with 95% CIs and n/a for missing values
    curves.png     validation success over training, phases shaded

matplotlib loads only in :func:`plot_curves`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from feedbackgym.baselines.rundir import read_curve
from feedbackgym.schedules import TWO_PHASE_ARMS

__all__ = ["plot_curves", "write_tables"]


def _fmt(value: float, spec: str) -> str:
    """``value`` formatted by ``spec``, or ``n/a`` for ``nan``.

    Example:
        >>> _fmt(0.25, ".0%"), _fmt(float("nan"), ".0%")
        ('25%', 'n/a')
    """
    return "n/a" if isinstance(value, float) and math.isnan(value) else format(value, spec)


def write_tables(out: Path, rows: list[dict[str, Any]]) -> None:
    """Writes the results table as ``out/results.csv`` and ``out/results.md``.

    Args:
        out: The comparison's output directory.
        rows: One row per arm, as :func:`~feedbackgym.baselines.stats.summarize_arm` makes them.
    """
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


def plot_curves(
    out: Path,
    runs: Sequence[Any],
    *,
    title: str,
    planned_switch: tuple[float, float] | None = None,
) -> Path:
    """Plots mean validation success per arm (min-max band), guide and fade phases shaded.

    The phases come from the two-phase runs' validations (the adaptive rule
    moves each run's switch on its own): shaded to the median switch and the
    median end of the fade, with a dotted line at each run's switch; when no
    such run has switched yet, from ``planned_switch``. Nothing is shaded
    when no two-phase arm is plotted.

    Args:
        out: The comparison's output directory.
        runs: The runs (``arm`` and ``out_dir`` each).
        title: The plot's title.
        planned_switch: Env steps where the configured switch and fade end
            come, or ``None`` when no arm of the comparison has two phases.

    Returns:
        The path of the plot, ``out/curves.png``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4.5))
    bounds = _phase_bounds(runs, planned_switch)
    if bounds:
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
    axis.set_title(title)
    axis.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    path = out / "curves.png"
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def _phase_bounds(
    runs: Sequence[Any], planned: tuple[float, float] | None
) -> list[tuple[float, float]]:
    """Per two-phase run, the steps where its switch came and where its fade ended.

    ``[planned]`` when no two-phase run has switched (none when ``planned`` is ``None``).
    """
    bounds = []
    for run in runs:
        if run.arm in TWO_PHASE_ARMS:
            curve = read_curve(run.out_dir)
            phases = list(curve["phase"])
            later = [i for i, p in enumerate(phases) if p != phases[0]]
            settled = [i for i in later if phases[i] != "fade"]
            if later:
                end = curve["step"][settled[0]] if settled else curve["step"][-1]
                bounds.append((float(curve["step"][later[0]]), float(end)))
    if bounds or planned is None:
        return bounds
    return [planned]
