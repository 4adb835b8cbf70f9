"""The ``compare`` command: train every arm x seed, then write a results table and curves.

Usage::

    feedbackgym compare --env ID --arms A,B --seeds N --steps N [--jobs J] [--out DIR] [--quick]
        [--backend local|ray] [--address auto|ray://HOST:PORT] [--cpus-per-run N]
        [--gpus-per-run N] [--shared-out] [--ship-every SECONDS]

:func:`_add_arguments` declares the flags and :func:`_comparison_config`
turns them into a :class:`~feedbackgym.training.experiments.compare.ComparisonConfig`;
the baselines load only when the command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedbackgym.cli._helpers import CommandError, make_env, positive_int
from feedbackgym.cli._runs import add_run_arguments, run_settings
from feedbackgym.config import BASE_ARMS

if TYPE_CHECKING:
    from feedbackgym.training.experiments.compare import ComparisonConfig
    from feedbackgym.training.experiments.ray_runs import RayOptions

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
        help=f"comma-separated, from {', '.join(BASE_ARMS)} (+shaping: with subgoal "
        "shaping; explore: no feedback, a count-based exploration bonus), each optionally "
        "followed by +reexplore (restarts from the states reviews flag), +curriculum (tasks "
        "widened as training success rises) and, with a guide, +failure-hints (hints only "
        "after failures) and +critic-hints (hints for the critic alone)",
    )
    compare.add_argument("--seeds", type=positive_int, help="seeds per arm")
    compare.add_argument(
        "--first-seed",
        type=int,
        default=0,
        metavar="S",
        help="the runs' seeds are S, S+1, ... (default 0; fresh seeds confirm a result)",
    )
    compare.add_argument("--steps", type=positive_int, help="env steps per run")
    compare.add_argument(
        "--jobs", type=positive_int, help="runs in parallel (default 1; 2 with --quick)"
    )
    compare.add_argument("--out", default="runs/compare", help="output directory")
    _add_backend_arguments(compare)
    add_run_arguments(compare)
    compare.add_argument("--quick", action="store_true", help="the short comparison (main job)")
    compare.add_argument("--resume", action="store_true", help="continue interrupted runs")


def _add_backend_arguments(compare: argparse.ArgumentParser) -> None:
    ray = compare.add_argument_group("on a Ray cluster (--backend ray; the ray extra)")
    ray.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="local: a process pool of --jobs; ray: every run a Ray task (default local)",
    )
    ray.add_argument(
        "--address",
        metavar="auto|ray://HOST:PORT",
        help="the cluster (auto: the one `ray start` began here; default: start Ray here)",
    )
    ray.add_argument(
        "--cpus-per-run",
        type=float,
        metavar="N",
        help="CPUs each run asks for (default 1, +1 per env worker, +1 with --overlap-update)",
    )
    ray.add_argument(
        "--gpus-per-run",
        type=float,
        metavar="N",
        help="GPUs each run asks for, fractions share one (default 1 with --device cuda, else 0)",
    )
    ray.add_argument(
        "--shared-out",
        action="store_true",
        help="--out is on a filesystem every node mounts: runs write there directly "
        "(default: each run ships its files to --out every --ship-every seconds)",
    )
    ray.add_argument(
        "--ship-every",
        type=float,
        metavar="SECONDS",
        help="seconds a run trains between shipping its files to --out, after a round "
        "(0: every round; a run lost with its node loses about this much and a round; "
        "default 2)",
    )


def _ray_options(args: argparse.Namespace) -> RayOptions | None:
    """The Ray options the flags ask for, or ``None`` for the local process pool.

    Raises:
        CommandError: A Ray flag without ``--backend ray``.
        DependencyNotInstalled: ``--backend ray`` without the ``ray`` extra.
    """
    flags = {
        "--address": args.address,
        "--cpus-per-run": args.cpus_per_run,
        "--gpus-per-run": args.gpus_per_run,
        "--shared-out": args.shared_out or None,
        "--ship-every": args.ship_every,
    }
    if args.backend != "ray":
        given = [flag for flag, value in flags.items() if value is not None]
        if given:
            verb = "needs" if len(given) == 1 else "need"
            raise CommandError(f"{', '.join(given)} {verb} --backend ray")
        return None
    from feedbackgym.training.experiments.ray_runs import RayOptions

    return RayOptions(
        address=args.address,
        cpus_per_run=args.cpus_per_run,
        gpus_per_run=args.gpus_per_run,
        shared=args.shared_out,
        **({} if args.ship_every is None else {"ship_every_s": args.ship_every}),
    )


def _comparison_config(args: argparse.Namespace) -> ComparisonConfig:
    """The comparison the flags ask for (``--quick`` gives defaults that the flags override).

    Raises:
        CommandError: Neither ``--quick`` nor every one of ``--env --arms
            --seeds --steps`` is given, or the env id is unknown.
    """
    from feedbackgym.training.experiments.compare import QUICK, ComparisonConfig

    quick = dict(QUICK) if args.quick else {}
    given: dict[str, Any] = {
        "env_id": args.env_id,
        "arms": args.arms.split(",") if args.arms else None,
        "seeds": args.seeds,
        "steps": args.steps,
    }
    from_quick = {k: quick.pop(k, None) for k in given}  # the rest are run settings
    comparison: dict[str, Any] = {k: from_quick[k] if given[k] is None else given[k] for k in given}
    missing = [k for k, value in comparison.items() if value is None]
    if missing:
        raise CommandError(f"give --{' --'.join(missing).replace('env_id', 'env')} or --quick")
    settings = run_settings(args, quick)  # the flags over --quick's settings
    make_env(comparison["env_id"], settings.get("env_kwargs", {})).close()  # an unknown id
    if args.first_seed < 0:
        raise CommandError(f"--first-seed must be >= 0, got {args.first_seed}")
    return ComparisonConfig(
        out=args.out,
        jobs=args.jobs or (2 if args.quick else 1),
        first_seed=args.first_seed,
        **comparison,
        **settings,
    )


def _cmd_compare(args: argparse.Namespace) -> int:
    from feedbackgym.training.experiments.compare import run_comparison

    ray = _ray_options(args)  # a missing extra or a stray flag before any env is made
    run_comparison(_comparison_config(args), resume=args.resume, ray=ray)
    out = args.out.rstrip("/")
    print((Path(out) / "results.md").read_text())
    print(f"table: {out}/results.csv, curves: {out}/curves.png, runs: {out}/runs/")
    return 0
