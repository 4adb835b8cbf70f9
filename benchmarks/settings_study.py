r"""Which update settings learn fastest, per env step and per wall-clock second.

Trains the shaping arm on an OpsIncident env (``--gamma 0.995``,
``--time-limit-terminal``, the settings of the hard studies) with each
candidate's rollout and update settings, ``--seeds`` seeds each, one run at a
time (``--jobs`` at a time with more), and prints a table: env steps and
wall-clock seconds to 50% and 80% validation success (IQM over the seeds, ``≥``
where some runs never got there), final success (IQM [95% CI]) and the runs'
training steps per second. Runs live under ``--out``; run again, it goes on
from them (a run that finished is not run again). Validation is the compare
path's: 30 held-out seeds, about 15 times a run.

Example:
    python benchmarks/settings_study.py --env feedbackgym/OpsIncidentHard-v0 \\
        --steps 1000000 --seeds 2 --out runs/settings-hard
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from feedbackgym.config import FeedbackConfig
from feedbackgym.training.common.run_files import read_curve
from feedbackgym.training.experiments.compare import ComparisonConfig
from feedbackgym.training.experiments.logged_run import train_logged
from feedbackgym.training.experiments.stats import bootstrap_ci, iqm, steps_to

CANDIDATES: dict[str, dict[str, Any]] = {
    "sb3": {"n_envs": 8, "n_steps": 128, "n_epochs": 10, "batch_size": 256},
    "16x128-e4-b512": {"n_envs": 16, "n_steps": 128, "n_epochs": 4, "batch_size": 512},
    "16x128-e4-b512-lr1e-3": {
        "n_envs": 16,
        "n_steps": 128,
        "n_epochs": 4,
        "batch_size": 512,
        "learning_rate": 1e-3,
    },
    "32x64-e2-b1024-lr1e-3": {
        "n_envs": 32,
        "n_steps": 64,
        "n_epochs": 2,
        "batch_size": 1024,
        "learning_rate": 1e-3,
    },
    "16x128-e4-b512-lr2e-3": {
        "n_envs": 16,
        "n_steps": 128,
        "n_epochs": 4,
        "batch_size": 512,
        "learning_rate": 2e-3,
    },
    "16x64-e4-b256-lr1e-3": {
        "n_envs": 16,
        "n_steps": 64,
        "n_epochs": 4,
        "batch_size": 256,
        "learning_rate": 1e-3,
    },
    "8x128-e4-b256-lr1e-3": {
        "n_envs": 8,
        "n_steps": 128,
        "n_epochs": 4,
        "batch_size": 256,
        "learning_rate": 1e-3,
    },
}
"""Rollout and update settings to compare (``RunConfig`` fields), by name."""


def runs_of(args: argparse.Namespace, name: str) -> list[Any]:
    """The runs of candidate ``name``: the compare path's run configs, its settings on them."""
    feedback = FeedbackConfig.from_mapping({"shaping": {"gamma": args.gamma}}, source="--gamma")
    comparison = ComparisonConfig(
        env_id=args.env,
        arms=["shaping"],
        seeds=args.seeds,
        steps=args.steps,
        out=str(Path(args.out) / name),
        feedback=feedback,
        time_limit_terminal=True,
    )
    return [
        dataclasses.replace(run, **CANDIDATES[name], env_workers=args.env_workers)
        for run in comparison.run_configs()
    ]


def _train(run: Any) -> None:
    train_logged(run, resume=True)


def summary(runs: list[Any]) -> dict[str, Any]:
    """A candidate's row: steps and seconds to 50% / 80%, final success, steps/s."""
    curves = [read_curve(run.out_dir) for run in runs if (Path(run.out_dir) / "curve.csv").exists()]
    row: dict[str, Any] = {"runs": len(curves)}
    if not curves:
        return row
    for percent in (50, 80):
        steps, seconds, reached = [], [], 0
        for curve in curves:
            at, censored = steps_to(curve, percent / 100)
            reached += not censored
            steps.append(at)
            seconds.append(float(np.interp(at, curve["step"], curve["seconds"])))
        row[f"steps_to_{percent}"] = iqm(steps)
        row[f"seconds_to_{percent}"] = iqm(seconds)
        row[f"reached_{percent}"] = f"{reached}/{len(curves)}"
    finals = [float(curve["success"][-1]) for curve in curves]
    low, high = bootstrap_ci(finals, "iqm")
    row["final"] = f"{iqm(finals):.0%} [{low:.0%}, {high:.0%}]"
    row["steps_per_s"] = float(
        np.mean([curve["step"][-1] / curve["seconds"][-1] for curve in curves])
    )
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="feedbackgym/OpsIncidentHard-v0")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--gamma", type=float, default=0.995)
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--env-workers", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", default="runs/settings-study")
    parser.add_argument(
        "--resume", action="store_true", help="(runs always go on; kept for scripts)"
    )
    parser.add_argument("--table-only", action="store_true", help="print the table, train nothing")
    args = parser.parse_args(argv)
    names = args.candidates.split(",")
    unknown = [name for name in names if name not in CANDIDATES]
    if unknown:
        parser.error(f"unknown candidates {unknown}; choose from {', '.join(CANDIDATES)}")
    plan = {name: runs_of(args, name) for name in names}
    if not args.table_only:
        # seed by seed over the candidates, so that a stopped study compares like with like
        order = [runs[k] for k in range(args.seeds) for runs in plan.values()]
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for _ in pool.map(_train, order):
                pass
    rows = {name: summary(runs) for name, runs in plan.items()}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "summary.json").write_text(json.dumps(rows, indent=2))
    print(f"{args.env}, shaping, gamma {args.gamma}, {args.steps:,} steps, {args.seeds} seeds")
    print(
        "| settings | runs | steps to 50% | s to 50% | steps to 80% | s to 80% | final | steps/s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        if not row.get("runs"):
            print(f"| {name} | 0 | | | | | | |")
            continue
        print(
            f"| {name} | {row['runs']} | {row['steps_to_50']:,.0f} ({row['reached_50']}) "
            f"| {row['seconds_to_50']:.0f} | {row['steps_to_80']:,.0f} ({row['reached_80']}) "
            f"| {row['seconds_to_80']:.0f} | {row['final']} | {row['steps_per_s']:,.0f} |"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
