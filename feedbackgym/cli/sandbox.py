"""The ``sandbox`` commands: manage the code suite's Docker sandbox.

Usage::

    feedbackgym sandbox build [--force]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Adds ``sandbox build`` to the top-level subparsers ``commands``."""
    sandbox = commands.add_parser("sandbox", help="manage the code suite's Docker sandbox")
    sandbox_commands = sandbox.add_subparsers(dest="sandbox_command", required=True)
    build = sandbox_commands.add_parser(
        "build", help="build the sandbox image (debootstrap + docker import; cached by tag)"
    )
    build.add_argument("--force", action="store_true", help="rebuild even if the tag exists")
    build.set_defaults(run=_cmd_sandbox_build)


def _cmd_sandbox_build(args: argparse.Namespace) -> int:
    from feedbackgym.envs.code.sandbox.image import build_with_engine

    print(build_with_engine(force=args.force, log=lambda line: print(line, file=sys.stderr)))
    return 0
