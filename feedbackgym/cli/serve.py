"""The ``serve-feedback`` command: the guide and review generators as a ZeroMQ service.

Usage::

    feedbackgym serve-feedback [--address tcp://127.0.0.1:5557] [--delay-ms MS]
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Adds ``serve-feedback`` to the top-level subparsers ``commands``."""
    serve = commands.add_parser(
        "serve-feedback", help="run the guide and review generators as a service (ZeroMQ)"
    )
    serve.add_argument("--address", default="tcp://127.0.0.1:5557", help="address to bind")
    serve.add_argument(
        "--delay-ms", type=float, default=0.0, help="extra delay per answer, to test deadlines"
    )
    serve.set_defaults(run=_cmd_serve_feedback)


def _cmd_serve_feedback(args: argparse.Namespace) -> int:
    import logging

    from feedbackgym.feedback.remote import serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        serve(args.address, delay_ms=args.delay_ms)
    except KeyboardInterrupt:
        pass
    return 0
