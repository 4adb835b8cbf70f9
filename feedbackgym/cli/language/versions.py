"""The ``versions`` command: a run's adapter versions, promote, canary, roll back.

Usage::

    feedbackgym versions RUN_DIR                      # list them, and what serves
    feedbackgym versions RUN_DIR --promote N
    feedbackgym versions RUN_DIR --canary N --share 0.1
    feedbackgym versions RUN_DIR --end-canary
    feedbackgym versions RUN_DIR --rollback [N]       # the one promoted before, or N

A version that failed its validation is never promoted.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from feedbackgym.cli._helpers import fraction, table

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Adds ``versions`` to the top-level subparsers ``commands``."""
    parser = commands.add_parser("versions", help="list, promote, canary or roll back versions")
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--promote", type=int, metavar="N")
    action.add_argument("--canary", type=int, metavar="N")
    action.add_argument("--end-canary", action="store_true")
    action.add_argument("--rollback", type=int, nargs="?", const=0, metavar="N")
    parser.add_argument("--share", type=fraction, default=0.1, help="the canary's share")
    parser.set_defaults(run=_cmd_versions)


def _cmd_versions(args: argparse.Namespace) -> int:
    from feedbackgym.language.versions import open_registry

    registry = open_registry(args.run_dir)
    if args.promote is not None:
        registry.promote(args.promote)
    elif args.canary is not None:
        registry.start_canary(args.canary, args.share)
    elif args.end_canary:
        registry.end_canary()
    elif args.rollback is not None:
        registry.rollback(args.rollback or None)
    state = registry.state
    rows = [["version", "round", "passed", "success", "success masked", "serving"]]
    canary = state.canary or {}
    for v in state.versions:
        serving = "current" if v.number == state.current else ""
        if v.number == canary.get("version"):
            serving = f"canary {canary['share']:.0%}"
        rows.append(
            [
                str(v.number),
                str(v.round),
                "yes" if v.passed else "no",
                f"{v.validation.get('success', 0.0):.0%}",
                f"{v.validation.get('success_unguided', 0.0):.0%}",
                serving,
            ]
        )
    print(table(rows))
    return 0
