"""The ``envs`` command: list the registered env ids.

Usage::

    feedbackgym envs
"""

from __future__ import annotations

import argparse
from typing import Any

import gymnasium as gym

from feedbackgym.registration import ENV_DESCRIPTIONS

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Adds ``envs`` to the top-level subparsers ``commands``."""
    envs = commands.add_parser("envs", help="list the registered env ids")
    envs.set_defaults(run=_cmd_envs)


def _cmd_envs(args: argparse.Namespace) -> int:
    ids = sorted(i for i in gym.registry if i.startswith("feedbackgym/"))
    width = max(len(i) for i in ids)
    for env_id in ids:
        print(f"{env_id:<{width}}  {ENV_DESCRIPTIONS.get(env_id, '')}")
    return 0
