"""The ``compare`` command: train every arm x seed, then write a results table and curves.

Usage::

    feedbackgym compare --env ID --arms A,B --seeds N --steps N [--jobs J] [--out DIR] [--quick]

:func:`_add_arguments` declares the flags and :func:`_comparison_config`
turns them into a :class:`~feedbackgym.baselines.compare.ComparisonConfig`;
the baselines load only when the command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedbackgym.cli._helpers import CommandError, fraction, make_env, parse_kwargs, positive_int
from feedbackgym.schedules import ARMS
from feedbackgym.wrappers.shaping import TERMINAL_MODES

if TYPE_CHECKING:
    from feedbackgym.baselines.compare import ComparisonConfig

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Adds ``compare`` to the top-level subparsers ``commands``."""
    compare = commands.add_parser(
        "compare", help="train every arm x seed, then write a results table and curves"
    )
    _add_arguments(compare)
    compare.set_defaults(run=_cmd_compare)


def _add_arguments(compare: argparse.ArgumentParser) -> None:
    compare.add_argument(
        "--env", dest="env_id", help="env id (default with --quick: OpsIncidentEasy)"
    )
    compare.add_argument("--arms", help=f"comma-separated, from {','.join(ARMS)}")
    compare.add_argument("--seeds", type=positive_int, help="seeds per arm")
    compare.add_argument("--steps", type=positive_int, help="env steps per run")
    compare.add_argument(
        "--jobs", type=positive_int, help="runs in parallel (default 1; 2 with --quick)"
    )
    compare.add_argument("--out", default="runs/compare", help="output directory")
    compare.add_argument("--bc-episodes", type=int, default=0, help="behaviour-cloning warm-up")
    compare.add_argument("--kwarg", action="append", default=[], metavar="KEY=VALUE")
    compare.add_argument(
        "--config",
        metavar="FILE",
        help="feedback config (YAML or TOML) every run follows: edits apply at the next round; "
        "the flags below override it",
    )
    compare.add_argument(
        "--fixed-switch", action="store_true", help="no adaptive switch (default: return trend)"
    )
    compare.add_argument(
        "--min-success",
        type=fraction,
        help="hold the guide while training success is under this (default 0.3; 0: off)",
    )
    compare.add_argument(
        "--record", action="store_true", help="record every training episode (HDF5 store)"
    )
    compare.add_argument(
        "--switch-at", type=fraction, help="where the fade starts, as a fraction (default 0.4)"
    )
    compare.add_argument("--fade", type=float, help="fade length in rounds (default: 10%%)")
    compare.add_argument("--dropout", type=fraction, help="hint dropout (default 0.5)")
    compare.add_argument(
        "--dropout-scope", choices=("step", "episode"), help="what dropout withholds"
    )
    compare.add_argument(
        "--shaping-terminal",
        choices=TERMINAL_MODES,
        help="potential of a terminal state (default keep; see ShapeWithSubgoals)",
    )
    compare.add_argument(
        "--gamma",
        type=float,
        help="discount of the learner and of the shaping term (default 0.99)",
    )
    compare.add_argument(
        "--keep-checkpoints",
        type=int,
        help="newest round checkpoints kept per run (default 5; 0: every one)",
    )
    compare.add_argument(
        "--anneal-lr",
        action="store_true",
        help="decay PPO's learning rate linearly to 0 over each run (default: constant)",
    )
    compare.add_argument(
        "--time-limit-terminal",
        action="store_true",
        help="treat episodes cut off by the time limit as ended, not bootstrapped (default: "
        "bootstrapped, SB3's way)",
    )
    compare.add_argument("--quick", action="store_true", help="the short comparison (main job)")
    compare.add_argument("--resume", action="store_true", help="continue interrupted runs")


def _comparison_config(args: argparse.Namespace) -> ComparisonConfig:
    """The comparison the flags ask for (``--quick`` gives defaults that the flags override).

    Raises:
        CommandError: Neither ``--quick`` nor every one of ``--env --arms
            --seeds --steps`` is given, or the env id is unknown.
    """
    from feedbackgym.baselines.compare import QUICK, ComparisonConfig

    settings: dict[str, Any] = dict(QUICK) if args.quick else {}
    given = {
        "env_id": args.env_id,
        "arms": args.arms.split(",") if args.arms else None,
        "seeds": args.seeds,
        "steps": args.steps,
    }
    settings.update({k: v for k, v in given.items() if v is not None})
    missing = [k for k in ("env_id", "arms", "seeds", "steps") if k not in settings]
    if missing:
        raise CommandError(f"give --{' --'.join(missing).replace('env_id', 'env')} or --quick")
    make_env(settings["env_id"], {}).close()  # a clear error for an unknown id, before any run
    return ComparisonConfig(
        out=args.out,
        jobs=args.jobs or (2 if args.quick else 1),
        bc_episodes=args.bc_episodes,
        env_kwargs=parse_kwargs(args.kwarg),
        feedback_file=args.config,
        feedback_overrides=feedback_overrides(args),
        record=args.record,
        anneal_lr=args.anneal_lr,
        time_limit_terminal=args.time_limit_terminal,
        **settings,
        **({} if args.keep_checkpoints is None else {"keep_checkpoints": args.keep_checkpoints}),
    )


def feedback_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The feedback config sections the flags set (they override a ``--config`` file).

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> _add_arguments(parser)
        >>> feedback_overrides(parser.parse_args(["--gamma", "0.995", "--fixed-switch"]))
        {'schedule': {'adaptive': None}, 'shaping': {'gamma': 0.995}}
    """
    flags = {
        "schedule": {"switch_at": args.switch_at, "fade": args.fade},
        "guide": {"dropout": args.dropout, "dropout_scope": args.dropout_scope},
        "shaping": {"terminal": args.shaping_terminal, "gamma": args.gamma},
    }
    overrides: dict[str, Any] = {}
    for section, values in flags.items():
        given = {name: value for name, value in values.items() if value is not None}
        if given:
            overrides[section] = given
    if args.fixed_switch:
        overrides.setdefault("schedule", {})["adaptive"] = None
    elif args.min_success is not None:
        overrides.setdefault("schedule", {})["adaptive"] = {"min_success": args.min_success}
    return dict(sorted(overrides.items()))


def _cmd_compare(args: argparse.Namespace) -> int:
    from feedbackgym.baselines.compare import run_comparison

    run_comparison(_comparison_config(args), resume=args.resume)
    out = args.out.rstrip("/")
    print((Path(out) / "results.md").read_text())
    print(f"table: {out}/results.csv, curves: {out}/curves.png, runs: {out}/runs/")
    return 0
