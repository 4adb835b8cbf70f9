"""The ``feedbackgym`` command.

Usage::

    feedbackgym envs
    feedbackgym play ID [--policy random|expert] [--episodes N] [--seed S] [--kwarg KEY=VALUE ...]
    feedbackgym demo [--episodes N]
    feedbackgym compare --env ID --arms A,B --seeds N --steps N [--jobs J] [--out DIR] [--quick]
    feedbackgym serve-feedback [--address tcp://127.0.0.1:5557]
    feedbackgym sandbox build [--force]
    feedbackgym datasets make|inspect|prune ...

Errors (an unknown id, a bad option, a policy the env lacks) print one line to
stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from feedbackgym.errors import FeedbackGymError
from feedbackgym.registration import ENV_DESCRIPTIONS
from feedbackgym.rollout import POLICIES, EpisodeResult, run_episodes, summarize
from feedbackgym.schedules import ARMS as _ARMS
from feedbackgym.schedules import DEFAULT_MIN_SUCCESS
from feedbackgym.wrappers.shaping import TERMINAL_MODES

__all__ = ["main"]

PROGRESS_MIN_EPISODES = 20
"""Runs with at least this many episodes show a progress bar on stderr."""


class CommandError(FeedbackGymError):
    """A command-line mistake: reported in one line, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except (FeedbackGymError, ValueError, gym.error.Error) as error:
        print(f"feedbackgym {args.command}: error: {error}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="feedbackgym", description="Long-horizon Gymnasium tasks with guide/review feedback."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    envs = commands.add_parser("envs", help="list the registered env ids")
    envs.set_defaults(run=_cmd_envs)

    play = commands.add_parser("play", help="play episodes with a built-in policy")
    play.add_argument(
        "env_id", metavar="ID", help="a registered id, e.g. feedbackgym/OpsIncident-v0"
    )
    play.add_argument("--policy", choices=POLICIES, default="random")
    play.add_argument("--episodes", type=_positive_int, default=10)
    play.add_argument("--seed", type=int, default=0, help="seed of the first episode")
    play.add_argument(
        "--kwarg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env keyword argument (VALUE parsed as JSON when it can be), repeatable",
    )
    play.set_defaults(run=_cmd_play)

    demo = commands.add_parser(
        "demo", help="expert vs random on every ops difficulty, over the validation seeds"
    )
    demo.add_argument("--episodes", type=_positive_int, default=100)
    demo.set_defaults(run=_cmd_demo)

    compare = commands.add_parser(
        "compare", help="train every arm x seed, then write a results table and curves"
    )
    compare.add_argument(
        "--env", dest="env_id", help="env id (default with --quick: OpsIncidentEasy)"
    )
    compare.add_argument("--arms", help=f"comma-separated, from {','.join(_ARMS)}")
    compare.add_argument("--seeds", type=_positive_int, help="seeds per arm")
    compare.add_argument("--steps", type=_positive_int, help="env steps per run")
    compare.add_argument(
        "--jobs", type=_positive_int, help="runs in parallel (default 1; 2 with --quick)"
    )
    compare.add_argument("--out", default="runs/compare", help="output directory")
    compare.add_argument("--bc-episodes", type=int, default=0, help="behaviour-cloning warm-up")
    compare.add_argument("--kwarg", action="append", default=[], metavar="KEY=VALUE")
    compare.add_argument(
        "--fixed-switch", action="store_true", help="no adaptive switch (default: return trend)"
    )
    compare.add_argument(
        "--min-success",
        type=_fraction,
        default=DEFAULT_MIN_SUCCESS,
        help="hold the guide while training success is under this (default %(default)s; 0: off)",
    )
    compare.add_argument(
        "--record", action="store_true", help="record every training episode (HDF5 store)"
    )
    compare.add_argument(
        "--switch-at", type=_fraction, help="where the fade starts, as a fraction (default 0.4)"
    )
    compare.add_argument("--fade", type=float, help="fade length in rounds (default: 10%%)")
    compare.add_argument("--dropout", type=_fraction, help="hint dropout (default 0.5)")
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
    compare.set_defaults(run=_cmd_compare)

    serve = commands.add_parser(
        "serve-feedback", help="run the guide and review generators as a service (ZeroMQ)"
    )
    serve.add_argument("--address", default="tcp://127.0.0.1:5557", help="address to bind")
    serve.add_argument(
        "--delay-ms", type=float, default=0.0, help="extra delay per answer, to test deadlines"
    )
    serve.set_defaults(run=_cmd_serve_feedback)

    sandbox = commands.add_parser("sandbox", help="manage the code suite's Docker sandbox")
    sandbox_commands = sandbox.add_subparsers(dest="sandbox_command", required=True)
    build = sandbox_commands.add_parser(
        "build", help="build the sandbox image (debootstrap + docker import; cached by tag)"
    )
    build.add_argument("--force", action="store_true", help="rebuild even if the tag exists")
    build.set_defaults(run=_cmd_sandbox_build)

    from feedbackgym.datasets.cli import add_dataset_commands

    add_dataset_commands(commands)
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {value}")
    return value


def _parse_kwargs(pairs: Iterable[str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CommandError(f"--kwarg expects KEY=VALUE, got {pair!r}")
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    return kwargs


def _make(env_id: str, kwargs: dict[str, Any]) -> gym.Env[Any, Any]:
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise CommandError(f"unknown env id {env_id!r}{hint} (`feedbackgym envs` lists them)")
    try:
        return gym.make(env_id, **kwargs)
    except TypeError as error:
        raise CommandError(f"bad keyword argument for {env_id}: {error}") from error


def _progress(total: int, desc: str) -> Any:
    """Returns a wrapper that shows a progress bar for long runs when tqdm is installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        return iter
    disable = total < PROGRESS_MIN_EPISODES
    return lambda it: tqdm(it, total=total, desc=desc, file=sys.stderr, disable=disable)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in rows
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


_SUMMARY_HEADER = ["episodes", "success", "mean return", "mean len", "median len", "subgoals"]


def _summary_cells(results: list[EpisodeResult]) -> list[str]:
    s = summarize(results)
    return [
        f"{s['episodes']:.0f}",
        f"{s['success_rate']:.1%}",
        f"{s['mean_return']:.2f}",
        f"{s['mean_length']:.1f}",
        f"{s['median_length']:.1f}",
        f"{s['subgoal_fraction']:.1%}",
    ]


def _cmd_envs(args: argparse.Namespace) -> int:
    ids = sorted(i for i in gym.registry if i.startswith("feedbackgym/"))
    width = max(len(i) for i in ids)
    for env_id in ids:
        print(f"{env_id:<{width}}  {ENV_DESCRIPTIONS.get(env_id, '')}")
    return 0


def _cmd_play(args: argparse.Namespace) -> int:
    env = _make(args.env_id, _parse_kwargs(args.kwarg))
    results: list[EpisodeResult] = []
    try:
        progress = _progress(args.episodes, args.policy)
        for r in run_episodes(env, args.policy, args.episodes, args.seed, progress=progress):
            results.append(r)
            print(
                f"seed {r.seed}: {'success' if r.success else 'failure'} ({r.outcome}) "
                f"return {r.episode_return:.2f} length {r.length} "
                f"subgoals {len(r.subgoals_done)}/{r.subgoals_total}"
                + (f" [{', '.join(r.subgoals_done)}]" if r.subgoals_done else "")
            )
    finally:
        env.close()
    print()
    print(_table([["policy", *_SUMMARY_HEADER], [args.policy, *_summary_cells(results)]]))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from feedbackgym.envs.ops import DIFFICULTIES, VALIDATION_SEEDS

    rows = [["env", "policy", *_SUMMARY_HEADER]]
    for difficulty in DIFFICULTIES:
        env_id = f"feedbackgym/OpsIncident{difficulty.title()}-v0"
        env = _make(env_id, {})
        seeds = VALIDATION_SEEDS[difficulty]
        try:
            for policy in POLICIES:
                progress = _progress(args.episodes, f"{difficulty} {policy}")
                results = list(
                    run_episodes(
                        env, policy, min(args.episodes, len(seeds)), seeds[0], progress=progress
                    )
                )
                rows.append([env_id, policy, *_summary_cells(results)])
        finally:
            env.close()
    print(_table(rows))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from feedbackgym.baselines.compare import QUICK, ComparisonConfig, run_comparison

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
    _make(settings["env_id"], {}).close()  # a clear error for an unknown id, before any run
    config = ComparisonConfig(
        out=args.out,
        jobs=args.jobs or (2 if args.quick else 1),
        bc_episodes=args.bc_episodes,
        env_kwargs=_parse_kwargs(args.kwarg),
        adaptive=None
        if args.fixed_switch
        else {"metric": "return", "min_success": args.min_success},
        record=args.record,
        anneal_lr=args.anneal_lr,
        time_limit_terminal=args.time_limit_terminal,
        **settings,
        **{
            name: value
            for name, value in (
                ("switch_at", args.switch_at),
                ("fade", args.fade),
                ("dropout", args.dropout),
                ("dropout_scope", args.dropout_scope),
                ("shaping_terminal", args.shaping_terminal),
                ("gamma", args.gamma),
                ("keep_checkpoints", args.keep_checkpoints),
            )
            if value is not None
        },
    )
    run_comparison(config, resume=args.resume)
    out = args.out.rstrip("/")
    print((Path(out) / "results.md").read_text())
    print(f"table: {out}/results.csv, curves: {out}/curves.png, runs: {out}/runs/")
    return 0


def _cmd_serve_feedback(args: argparse.Namespace) -> int:
    import logging

    from feedbackgym.feedback.remote import serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        serve(args.address, delay_ms=args.delay_ms)
    except KeyboardInterrupt:
        pass
    return 0


def _cmd_sandbox_build(args: argparse.Namespace) -> int:
    from feedbackgym.envs.code.sandbox.image import build_with_engine

    print(build_with_engine(force=args.force, log=lambda line: print(line, file=sys.stderr)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
