r"""Time to a result through ``compare``: wall-clock and env steps to 50% and 80% success.

In one run on one machine, one ``feedbackgym compare`` command after another
(the path users take: a subprocess, validations and the report included):

* the ``--arms`` (default: shaping) on ``--env`` (default: OpsIncident-v0 hard, with
  ``--flags`` ``--gamma 0.995 --time-limit-terminal``) with the torch trainer's
  defaults, with ``--preset sb3`` (SB3's update, the torch trainer), and with
  ``--trainer sb3``, ``--seeds`` seeds each, one run at a time, one ``compare`` a
  setup: env steps and seconds to 50% and 80% validation success per arm (IQM over
  the seeds, from each run's ``curve.csv``; ``≥`` where a run never got there,
  counted at its end), and final success (IQM [95% CI]);
* throughput: the 131,072-step command ``compare --env feedbackgym/OpsIncidentHard-v0
  --arms guide-then-review --seeds 1 --steps 131072 --jobs 1 --trainer torch``
  (the whole command's steps/s, validations included) beside the bare loop's
  (``python -m feedbackgym.training.torch_ppo.ppo``, same env and arm) and the
  stack's own stepping rate with random actions, measured in the same run.

``--sb3-steps`` caps the SB3 runs (they are the slowest); a capped run that did
not get to a threshold is counted at its end (``≥``). Outputs go under
``--out``; ``--resume`` goes on from the runs there (the timings of a resumed
run add its sessions).

Example:
    python benchmarks/time_to_result.py --seeds 5 --out runs/time-to-result --resume
    python benchmarks/time_to_result.py --env feedbackgym/OpsIncidentEasy-v1 \
        --arms shaping,shaping+reexplore --flags="" --steps 1000000 --out runs/ttr-v1
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import feedbackgym
from feedbackgym.config import FeedbackConfig
from feedbackgym.training.common.arms import arm_config
from feedbackgym.training.common.run_files import read_curve
from feedbackgym.training.experiments.stats import bootstrap_ci, iqm, steps_to

ENV_ID = "feedbackgym/OpsIncidentHard-v0"
"""The default ``--env``, and the env of the throughput measurement."""
FLAGS = "--gamma 0.995 --time-limit-terminal"
"""The default ``--flags``: the ``compare`` flags every setup adds (hard v0's)."""
SETUPS = {
    "torch": [],
    "torch-preset-sb3": ["--preset", "sb3"],
    "sb3": ["--trainer", "sb3"],
}
"""The ``compare`` commands timed, by name (``--setups``): their flags beyond the common ones:
the torch trainer's defaults, the torch trainer with SB3's update, and SB3's PPO."""
THROUGHPUT_STEPS = 131_072


def compare(out: Path, flags: list[str], *, resume: bool) -> float:
    """Runs one ``feedbackgym compare`` command; returns its wall-clock seconds."""
    command = [sys.executable, "-m", "feedbackgym.cli", "compare", "--out", str(out), *flags]
    if resume:
        command.append("--resume")
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def to_result(out: Path, arm: str) -> dict[str, Any]:
    """Steps and seconds to 50% / 80% (IQM over ``arm``'s runs), and final success, from the curves.

    Raises:
        FileNotFoundError: ``out`` holds no run of ``arm``.
    """
    runs = sorted((out / "runs").glob(f"{arm}-seed*"))
    if not runs:
        raise FileNotFoundError(f"no run of {arm} in {out / 'runs'}")
    curves = [read_curve(run) for run in runs]
    row: dict[str, Any] = {"runs": len(curves)}
    for percent in (50, 80):
        steps, seconds, reached = [], [], 0
        for curve in curves:
            at, censored = steps_to(curve, percent / 100)
            reached += not censored
            steps.append(at)
            seconds.append(float(np.interp(at, curve["step"], curve["seconds"])))
        row[f"steps_{percent}"] = iqm(steps)
        row[f"seconds_{percent}"] = iqm(seconds)
        row[f"reached_{percent}"] = reached
    finals = [float(curve["success"][-1]) for curve in curves]
    row["final"] = iqm(finals)
    row["final_ci"] = bootstrap_ci(finals, "iqm")
    return row


def stack_rate(steps: int) -> float:
    """Steps/s of the guide-then-review stack alone, random actions, resets as episodes end."""
    env = feedbackgym.make(ENV_ID, arm_config("guide-then-review", FeedbackConfig(), 64))
    env.action_space.seed(0)
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    rate = steps / (time.perf_counter() - start)
    env.close()
    return rate


def bare_loop_rate(steps: int) -> float:
    """Steps/s of ``python -m feedbackgym.training.torch_ppo.ppo`` (the whole command)."""
    command = [
        sys.executable,
        "-m",
        "feedbackgym.training.torch_ppo.ppo",
        "--env",
        ENV_ID,
        "--arm",
        "guide-then-review",
        "--total-timesteps",
        str(steps),
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return steps / (time.perf_counter() - start)


def _mark(row: dict[str, Any], percent: int) -> str:
    """``≥`` where some run never got to ``percent``."""
    return "" if row[f"reached_{percent}"] == row["runs"] else "≥ "


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default=ENV_ID, help="the env (default %(default)s)")
    parser.add_argument("--arms", default="shaping", help="comma-separated (default shaping)")
    parser.add_argument(
        "--flags", default=FLAGS, help="compare flags every setup adds (default %(default)s)"
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2_000_000, help="budget of the torch runs")
    parser.add_argument("--sb3-steps", type=int, default=500_000, help="budget of the SB3 runs")
    parser.add_argument("--setups", default=",".join(SETUPS), help="comma-separated")
    parser.add_argument("--out", default="runs/time-to-result")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args(argv)
    out = Path(args.out)
    arms = args.arms.split(",")
    results: dict[str, Any] = {}
    for name in args.setups.split(","):
        if name not in SETUPS:
            parser.error(f"--setups: unknown setup {name!r}; choose from {', '.join(SETUPS)}")
        steps = args.sb3_steps if name == "sb3" else args.steps
        flags = [
            *("--env", args.env, "--arms", args.arms, "--seeds", str(args.seeds)),
            *("--steps", str(steps), "--jobs", "1", *shlex.split(args.flags)),
            *SETUPS[name],
        ]
        folder = out / name
        seconds = compare(folder, flags, resume=args.resume)
        for arm in arms:
            row = f"{name}, {arm}" if len(arms) > 1 else name
            results[row] = {**to_result(folder, arm), "command_seconds": seconds, "steps": steps}
            print(row, json.dumps(results[row]), flush=True)
    if not args.skip_throughput:
        stack = stack_rate(THROUGHPUT_STEPS // 4)
        flags = [
            *("--env", ENV_ID, "--arms", "guide-then-review", "--seeds", "1"),
            *("--steps", str(THROUGHPUT_STEPS), "--jobs", "1", "--trainer", "torch"),
        ]
        command = THROUGHPUT_STEPS / compare(out / "throughput", flags, resume=False)
        bare = bare_loop_rate(THROUGHPUT_STEPS)
        results["throughput"] = {"stack": stack, "compare": command, "bare_loop": bare}
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print(f"\n{args.env}, {args.arms}, {args.flags or 'no flags'}, {args.seeds} seeds, 2 cores")
    print("| setup | steps | to 50%: steps | s | to 80%: steps | s | final success |")
    print("|---|---|---|---|---|---|---|")
    for name, row in results.items():
        if name == "throughput":
            continue
        low, high = row["final_ci"]
        print(
            f"| {name} | {row['steps']:,} | {_mark(row, 50)}{row['steps_50']:,.0f} "
            f"| {_mark(row, 50)}{row['seconds_50']:.0f} | {_mark(row, 80)}{row['steps_80']:,.0f} "
            f"| {_mark(row, 80)}{row['seconds_80']:.0f} "
            f"| {row['final']:.0%} [{low:.0%}, {high:.0%}] |"
        )
    if "throughput" in results:
        rates = results["throughput"]
        print(f"\nthroughput, {THROUGHPUT_STEPS:,} steps, guide-then-review on {ENV_ID}:")
        print("| what | steps/s | x stack |")
        print("|---|---|---|")
        for name, key in (
            ("stack, random actions", "stack"),
            ("compare (whole command)", "compare"),
            ("bare loop (whole command)", "bare_loop"),
        ):
            print(f"| {name} | {rates[key]:,.0f} | {rates[key] / rates['stack']:.2f} |")


if __name__ == "__main__":
    main()
