"""Success against the number of expert demonstrations: what a method is worth in demonstrations.

A demonstrations study runs the same arms with a behaviour-cloning warm start
from N expert episodes (``--bc-episodes N``) for several N at one budget.
:func:`write_demonstrations` writes, from its runs (as
:func:`~.report.find_runs` finds them, each with its
``method`` and ``demonstrations``)::

    demonstrations.csv  one row per arm and N: runs (and how many stopped short
                        of the others), final success (IQM and mean with bootstrap
                        95% CIs), steps to 80% (IQM, censored)
    demonstrations.md   that table; then, for each arm and N, the probability that
                        a run of it ends higher than a run of each other arm with
                        the same N, and than one of each other arm with that other
                        arm's most demonstrations
    demonstrations.png  IQM final success [95% CI] against N, one line per arm

``feedbackgym report`` writes them when its runs have more than one N.
matplotlib loads only in :func:`plot_demonstrations`.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from feedbackgym.training.common.run_files import read_curve
from feedbackgym.training.experiments.report import format_or_na, pyplot, save_plot, with_ci
from feedbackgym.training.experiments.stats import (
    Curve,
    final_success,
    probability_of_improvement,
    probability_of_improvement_ci,
    summarize_arm,
)

__all__ = [
    "DEMONSTRATION_FIELDS",
    "demonstration_rows",
    "plot_demonstrations",
    "write_demonstrations",
]

DEMONSTRATION_FIELDS = (
    "arm",
    "demonstrations",
    "runs",
    "short_runs",
    "last_step",
    "iqm",
    "iqm_low",
    "iqm_high",
    "success",
    "mean_low",
    "mean_high",
    "steps_to_80",
    "steps_to_80_censored",
    "reached_80",
)
"""The columns of ``demonstrations.csv`` (see :func:`demonstration_rows`)."""


Grouped = dict[tuple[str, int], list[Curve]]
"""The runs' curves by (method, demonstrations)."""


def _curves(runs: Sequence[Any]) -> Grouped:
    """The runs' curves by (method, demonstrations), methods in order of appearance, N ascending."""
    grouped: Grouped = {}
    for run in runs:
        grouped.setdefault((run.method, run.demonstrations), []).append(read_curve(run.out_dir))
    methods = list(dict.fromkeys(run.method for run in runs))
    return dict(sorted(grouped.items(), key=lambda item: (methods.index(item[0][0]), item[0][1])))


def demonstration_rows(runs: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per method and number of demonstrations, with :data:`DEMONSTRATION_FIELDS`.

    Args:
        runs: Runs with ``method`` (the arm trained), ``demonstrations`` and
            ``out_dir`` (each with one validation at least).

    Example:
        >>> import tempfile, types
        >>> from feedbackgym.training.common.run_files import CURVE_FIELDS, append_curve
        >>> root = Path(tempfile.mkdtemp())
        >>> def run(n, seed, success):
        ...     out = root / f"bc{n}-{seed}"
        ...     out.mkdir()
        ...     append_curve(out / "curve.csv", dict.fromkeys(CURVE_FIELDS, success)
        ...                  | {"step": 100, "round": 1, "phase": "none", "mean_length": 9})
        ...     return types.SimpleNamespace(method="shaping", demonstrations=n, out_dir=out)
        >>> rows = demonstration_rows([run(30, 0, 0.9), run(0, 0, 0.1), run(0, 1, 0.3)])
        >>> [(r["demonstrations"], r["runs"], round(r["success"], 2)) for r in rows]
        [(0, 2, 0.2), (30, 1, 0.9)]
    """
    return _rows(_curves(runs))


def _rows(grouped: Grouped) -> list[dict[str, Any]]:
    rows = []
    for (method, demonstrations), curves in grouped.items():
        summary = summarize_arm(method, curves)
        row = {field: summary.get(field) for field in DEMONSTRATION_FIELDS}
        rows.append(row | {"demonstrations": demonstrations, "runs": len(curves)})
    return rows


def _improvement_lines(grouped: Grouped) -> list[str]:
    """The Markdown rows: each arm at each N against the other arms at N and at their most N."""
    finals = {key: final_success(curves) for key, curves in grouped.items()}
    most = {method: n for method, n in finals}  # ascending N: the last one stays
    lines = []
    for (method, n), scores in finals.items():
        for (other, other_n), other_scores in finals.items():
            if other == method or other_n not in {n, most[other]}:
                continue
            probability = probability_of_improvement(scores, other_scores)
            low, high = probability_of_improvement_ci(scores, other_scores)
            cell = with_ci(probability, low, high, ".2f")
            lines.append(f"| {method} | {n} | {other} | {other_n} | {cell} |")
    return lines


def _markdown(rows: list[dict[str, Any]], improvement: list[str]) -> str:
    lines = [
        "| arm | demonstrations | runs | steps | IQM success [95% CI] | mean success [95% CI] "
        "| steps to 80% |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        bound = "≥ " if r["steps_to_80_censored"] else ""
        short = f" ({r['short_runs']} short)" if r["short_runs"] else ""
        lines.append(
            f"| {r['arm']} | {r['demonstrations']} | {r['runs']} | {r['last_step']:,.0f}{short} "
            f"| {with_ci(r['iqm'], r['iqm_low'], r['iqm_high'], '.0%')} "
            f"| {with_ci(r['success'], r['mean_low'], r['mean_high'], '.0%')} "
            f"| {bound}{format_or_na(r['steps_to_80'], ',.0f')} ({r['reached_80']}/{r['runs']}) |"
        )
    lines += [
        "",
        "Success at each run's last validation (the budget's end; short: runs that stopped "
        "before the group's last validation, still running or with a smaller budget), IQM and "
        "mean over the runs with percentile bootstrap 95% CIs (none with one run); "
        "demonstrations: expert episodes behaviour-cloned before the first round (0: none).",
    ]
    if improvement:
        lines += [
            "",
            "| arm | demonstrations | baseline | its demonstrations | P(arm > baseline) [95% CI] |",
            "|---|---|---|---|---|",
            *improvement,
            "",
            "Each arm at each N against every other arm with the same N and with that other "
            "arm's most demonstrations: the probability that a run of the arm ends with a higher "
            "validation success, ties counting half; bootstrap 95% CI.",
        ]
    return "\n".join(lines) + "\n"


def plot_demonstrations(out: Path, rows: list[dict[str, Any]], *, title: str) -> Path:
    """Plots each arm's IQM final success [95% CI] against the number of demonstrations.

    Args:
        out: The output directory.
        rows: As :func:`demonstration_rows` makes them.
        title: The plot's title.

    Returns:
        The path of the plot, ``out/demonstrations.png``.

    Raises:
        DependencyNotInstalled: matplotlib is missing.
    """
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(7, 4.2))
    for method in dict.fromkeys(r["arm"] for r in rows):
        mine = [r for r in rows if r["arm"] == method]
        n = [r["demonstrations"] for r in mine]
        middle = [r["iqm"] for r in mine]
        below = [r["iqm"] - r["iqm_low"] if r["runs"] > 1 else 0.0 for r in mine]
        above = [r["iqm_high"] - r["iqm"] if r["runs"] > 1 else 0.0 for r in mine]
        axis.errorbar(n, middle, yerr=[below, above], marker="o", capsize=3, label=method)
    axis.set_xscale("symlog", linthresh=10)
    axis.set_xlabel("expert demonstrations (behaviour-cloned episodes)")
    axis.set_ylabel("final validation success (IQM, 95% CI)")
    return save_plot(figure, axis, out / "demonstrations.png", title=title, legend="lower right")


def write_demonstrations(out: Path, runs: Sequence[Any], *, title: str) -> list[dict[str, Any]]:
    """Writes ``demonstrations.csv``, ``.md`` and ``.png`` into ``out``; returns the rows.

    Args:
        out: The output directory (it exists).
        runs: The runs (``method``, ``demonstrations``, ``out_dir`` each).
        title: The plot's title.
    """
    grouped = _curves(runs)
    rows = _rows(grouped)
    with (out / "demonstrations.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=DEMONSTRATION_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    markdown = _markdown(rows, _improvement_lines(grouped))
    (out / "demonstrations.md").write_text(markdown)
    plot_demonstrations(out, rows, title=title)
    return rows
