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

from feedbackgym.cli._helpers import CommandError, make_env, parse_kwargs, positive_int
from feedbackgym.cli._runs import add_run_arguments, feedback_overrides
from feedbackgym.schedules import ARMS

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
    compare.add_argument(
        "--arms",
        help=f"comma-separated, from {', '.join(ARMS)} (+shaping: with subgoal shaping; "
        "explore: no feedback, a count-based exploration bonus)",
    )
    compare.add_argument("--seeds", type=positive_int, help="seeds per arm")
    compare.add_argument("--steps", type=positive_int, help="env steps per run")
    compare.add_argument(
        "--jobs", type=positive_int, help="runs in parallel (default 1; 2 with --quick)"
    )
    compare.add_argument("--out", default="runs/compare", help="output directory")
    add_run_arguments(compare)
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
        trainer=args.trainer,
        device=args.device,
        env_workers=args.env_workers,
        overlap_update=args.overlap_update,
        **settings,
        **({} if args.keep_checkpoints is None else {"keep_checkpoints": args.keep_checkpoints}),
    )


def _cmd_compare(args: argparse.Namespace) -> int:
    from feedbackgym.baselines.compare import run_comparison

    run_comparison(_comparison_config(args), resume=args.resume)
    out = args.out.rstrip("/")
    print((Path(out) / "results.md").read_text())
    print(f"table: {out}/results.csv, curves: {out}/curves.png, runs: {out}/runs/")
    return 0
