"""The ``demo`` command: the expert against random actions on every OpsIncident-v1 preset.

Usage::

    feedbackgym demo [--episodes N]

Each preset is played on its test split, from the first of its held-out seeds.
"""

from __future__ import annotations

import argparse
from typing import Any

from feedbackgym.cli._helpers import (
    SUMMARY_HEADER,
    make_env,
    positive_int,
    progress,
    summary_cells,
    table,
)
from feedbackgym.registration import evaluation_kwargs
from feedbackgym.rollout import POLICIES, run_episodes

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Adds ``demo`` to the top-level subparsers ``commands``."""
    demo = commands.add_parser(
        "demo", help="expert vs random on every OpsIncident-v1 preset, on its test split"
    )
    demo.add_argument("--episodes", type=positive_int, default=100)
    demo.set_defaults(run=_cmd_demo)


def _cmd_demo(args: argparse.Namespace) -> int:
    from feedbackgym.envs.incident import DIFFICULTIES

    rows = [["env", "policy", *SUMMARY_HEADER]]
    for difficulty in DIFFICULTIES:
        env_id = f"feedbackgym/OpsIncident{difficulty.title()}-v1"
        env = make_env(env_id, evaluation_kwargs(env_id, {}))
        seeds = env.unwrapped.validation_seeds  # type: ignore[attr-defined]
        try:
            for policy in POLICIES:
                bar = progress(args.episodes, f"{difficulty} {policy}")
                episodes = min(args.episodes, len(seeds))
                results = list(run_episodes(env, policy, episodes, seeds[0], progress=bar))
                rows.append([env_id, policy, *summary_cells(results)])
        finally:
            env.close()
    print(table(rows))
    return 0
