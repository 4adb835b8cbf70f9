"""The ``train`` command: one run of one arm, with SB3 or the torch trainer.

Usage::

    feedbackgym train --env ID --steps N [--arm ARM] [--seed S] [--trainer sb3|torch]
                      [--device auto|cuda|cpu] [--out DIR] [--config FILE] [--record] [--resume]

The run directory is the one ``compare`` makes for each run (TensorBoard,
``curve.csv``, checkpoints, ``state.json``, ``trajectories/``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from feedbackgym.cli._helpers import arm_type, make_env, positive_int
from feedbackgym.cli._runs import add_run_arguments, run_settings
from feedbackgym.schedules import ARMS

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Adds ``train`` to the top-level subparsers ``commands``."""
    train = commands.add_parser("train", help="train one arm with one seed (one run directory)")
    train.add_argument("--env", dest="env_id", required=True, help="env id")
    train.add_argument(
        "--arm",
        default="guide-then-review+shaping",
        type=arm_type(ARMS),
        metavar="ARM",
        help="the arm (+shaping: with subgoal shaping; explore: a count-based exploration bonus)",
    )
    train.add_argument("--seed", type=int, default=0, help="the run's seed")
    train.add_argument("--steps", type=positive_int, required=True, help="env steps")
    train.add_argument("--out", default="runs/train", help="the run directory")
    add_run_arguments(train)
    train.add_argument("--resume", action="store_true", help="continue an interrupted run")
    train.set_defaults(run=_cmd_train)


def _cmd_train(args: argparse.Namespace) -> int:
    from feedbackgym.training.common.run_settings import RunConfig
    from feedbackgym.training.experiments.launch import train_run

    settings = run_settings(args)
    make_env(args.env_id, settings.get("env_kwargs", {})).close()  # an unknown id: before the run
    config = RunConfig(
        env_id=args.env_id,
        arm=args.arm,
        seed=args.seed,
        total_steps=args.steps,
        out_dir=args.out,
        **settings,
    )
    state = train_run(config, resume=args.resume)
    summary = {key: state.get(key) for key in ("round", "timesteps", "best_success", "alerts")}
    print(json.dumps(summary))
    print(f"run: {args.out} (tensorboard --logdir {args.out}/tb)")
    return 0
