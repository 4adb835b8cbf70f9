"""The ``serve-env`` command: any env and its feedback over the OpenEnv protocol.

Usage::

    feedbackgym serve-env --env ID [--arm ARM] [--level phase|target|action]
        [--kwarg KEY=VALUE ...] [--max-sessions N] [--idle-timeout SECONDS]
        [--rounds N] [--round-episodes K] [--host 127.0.0.1] [--port 8000]

One env with the arm's feedback stack per WebSocket session
(:mod:`feedbackgym.serving`), served by the ``openenv`` package's server. It
prints ``listening on http://HOST:PORT`` and serves until SIGTERM or Ctrl-C.
Needs the ``server`` extra. Task ids (OpsIncident-v2's ``info["task_id"]``)
are keyed by a random secret of the server's unless ``FEEDBACKGYM_TASK_ID_KEY``
is set, so no client can test guesses of a task's structure against its id.
"""

from __future__ import annotations

import argparse
import os
import secrets
from typing import Any

from feedbackgym.cli._helpers import (
    add_kwarg_option,
    arm_type,
    make_env,
    parse_kwargs,
    positive_int,
)
from feedbackgym.core import DEFAULT_HINT_LEVEL, HINT_LEVELS
from feedbackgym.protocol import TASK_ID_KEY_VARIABLE
from feedbackgym.schedules import ARMS, LLM_ARMS
from feedbackgym.serving.settings import DEFAULT_SERVE_ARM

__all__ = ["SERVED_ARMS", "add_commands"]

SERVED_ARMS = tuple(arm for arm in ARMS if arm in LLM_ARMS)
"""The arms a served env takes: every trainer's (a server's own controller hears no training
success to widen a curriculum by, and its clients read no critic-only fields)."""


def add_commands(commands: Any) -> None:
    """Adds ``serve-env`` to the top-level subparsers ``commands``."""
    serve = commands.add_parser(
        "serve-env",
        help="serve an env and its feedback over the OpenEnv protocol (TRL, verifiers, agents)",
    )
    serve.add_argument("--env", required=True, metavar="ID", help="a registered env with text")
    serve.add_argument(
        "--arm",
        type=arm_type(SERVED_ARMS),
        metavar="ARM",
        default=DEFAULT_SERVE_ARM,
        help=f"who speaks when (default {DEFAULT_SERVE_ARM})",
    )
    serve.add_argument(
        "--level",
        choices=HINT_LEVELS,
        default=DEFAULT_HINT_LEVEL,
        help="what hints and reviews disclose (default phase)",
    )
    add_kwarg_option(serve)
    serve.add_argument(
        "--max-sessions",
        type=positive_int,
        default=64,
        help="concurrent sessions; one more is refused with CAPACITY_REACHED (default 64)",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="a session silent this long is closed with everything it started; 0: never "
        "(default 300)",
    )
    serve.add_argument(
        "--rounds", type=positive_int, default=100, help="the arm's schedule length in rounds"
    )
    serve.add_argument(
        "--round-episodes",
        type=positive_int,
        default=8,
        help="finished episodes of a session per round of its own controller (default 8)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind")
    serve.add_argument("--port", type=int, default=8000, help="port (0: a free one)")
    serve.set_defaults(run=_cmd_serve_env)


def _cmd_serve_env(args: argparse.Namespace) -> int:
    from feedbackgym.serving.app import serve
    from feedbackgym.serving.settings import ServeSettings

    kwargs = parse_kwargs(args.kwarg)
    # task ids keyed by a secret of this server's: no client can test guesses of a task's key
    os.environ.setdefault(TASK_ID_KEY_VARIABLE, secrets.token_hex(16))
    make_env(args.env, {"obs_mode": "text", **kwargs}).close()  # a bad id or keyword: one line
    settings = ServeSettings(
        args.env,
        arm=args.arm,
        level=args.level,
        env_kwargs=kwargs,
        max_sessions=args.max_sessions,
        idle_timeout_s=args.idle_timeout or None,
        rounds=args.rounds,
        round_episodes=args.round_episodes,
    )
    try:
        serve(settings, host=args.host, port=args.port)
    except KeyboardInterrupt:
        pass
    return 0
