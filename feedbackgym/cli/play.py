"""The ``envs``, ``play`` and ``demo`` commands: list the env ids, play the built-in policies.

Usage::

    feedbackgym envs
    feedbackgym play ID [--policy random|expert] [--episodes N] [--seed S] [--kwarg KEY=VALUE ...]
    feedbackgym demo [--episodes N]
"""

from __future__ import annotations

import argparse
from typing import Any

import gymnasium as gym

from feedbackgym.cli._helpers import (
    add_kwarg_option,
    make_env,
    parse_kwargs,
    positive_int,
    progress,
    table,
)
from feedbackgym.registration import ENV_DESCRIPTIONS
from feedbackgym.rollout import POLICIES, EpisodeResult, run_episodes, summarize

__all__ = ["add_commands"]

_SUMMARY_HEADER = ["episodes", "success", "mean return", "mean len", "median len", "subgoals"]


def add_commands(commands: Any) -> None:
    """Adds ``envs``, ``play`` and ``demo`` to the top-level subparsers ``commands``."""
    envs = commands.add_parser("envs", help="list the registered env ids")
    envs.set_defaults(run=_cmd_envs)

    play = commands.add_parser("play", help="play episodes with a built-in policy")
    play.add_argument(
        "env_id", metavar="ID", help="a registered id, e.g. feedbackgym/OpsIncident-v1"
    )
    play.add_argument("--policy", choices=POLICIES, default="random")
    play.add_argument("--episodes", type=positive_int, default=10)
    play.add_argument("--seed", type=int, default=0, help="seed of the first episode")
    add_kwarg_option(play)
    play.set_defaults(run=_cmd_play)

    demo = commands.add_parser(
        "demo", help="expert vs random on every ops difficulty, over the validation seeds"
    )
    demo.add_argument("--episodes", type=positive_int, default=100)
    demo.set_defaults(run=_cmd_demo)


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
    env = make_env(args.env_id, parse_kwargs(args.kwarg))
    results: list[EpisodeResult] = []
    try:
        bar = progress(args.episodes, args.policy)
        for r in run_episodes(env, args.policy, args.episodes, args.seed, progress=bar):
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
    print(table([["policy", *_SUMMARY_HEADER], [args.policy, *_summary_cells(results)]]))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from feedbackgym.envs.ops import DIFFICULTIES, VALIDATION_SEEDS

    rows = [["env", "policy", *_SUMMARY_HEADER]]
    for difficulty in DIFFICULTIES:
        env_id = f"feedbackgym/OpsIncident{difficulty.title()}-v0"
        env = make_env(env_id, {})
        seeds = VALIDATION_SEEDS[difficulty]
        try:
            for policy in POLICIES:
                bar = progress(args.episodes, f"{difficulty} {policy}")
                results = list(
                    run_episodes(
                        env, policy, min(args.episodes, len(seeds)), seeds[0], progress=bar
                    )
                )
                rows.append([env_id, policy, *_summary_cells(results)])
        finally:
            env.close()
    print(table(rows))
    return 0
