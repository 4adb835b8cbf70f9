"""The ``serve-feedback`` command: feedback generators as a ZeroMQ service.

Usage::

    feedbackgym serve-feedback [--address tcp://127.0.0.1:5557] [--generator module:Class ...]
                               [--workers N] [--max-bytes B] [--curve-keys DIR] [--delay-ms MS]
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Adds ``serve-feedback`` to the top-level subparsers ``commands``."""
    serve = commands.add_parser(
        "serve-feedback", help="run feedback generators as a service for many envs (ZeroMQ)"
    )
    serve.add_argument("--address", default="tcp://127.0.0.1:5557", help="address to bind")
    serve.add_argument(
        "--generator",
        action="append",
        default=[],
        metavar="MODULE:CLASS",
        help="a guide and/or reviewer class (one instance per task family); repeat for "
        "several; the built-in ones answer the kinds no generator given answers",
    )
    serve.add_argument(
        "--workers", type=int, default=1, help="worker threads; task families are sharded over them"
    )
    serve.add_argument("--max-bytes", type=int, help="largest message answered (default 1 MiB)")
    serve.add_argument(
        "--curve-keys",
        metavar="DIR",
        help="CURVE keys: DIR/server.key_secret, and the accepted clients' keys in DIR/clients",
    )
    serve.add_argument(
        "--delay-ms", type=float, default=0.0, help="extra delay per answer, to test deadlines"
    )
    serve.set_defaults(run=_cmd_serve_feedback)


def _cmd_serve_feedback(args: argparse.Namespace) -> int:
    import logging
    import signal

    from feedbackgym.feedback.service import FeedbackService

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    service = FeedbackService(
        args.address,
        generators=args.generator,
        workers=args.workers,
        **({} if args.max_bytes is None else {"max_bytes": args.max_bytes}),
        delay_ms=args.delay_ms,
        curve_keys=args.curve_keys,
    )
    signal.signal(signal.SIGTERM, lambda signum, frame: service.stop())
    try:
        service.serve()
    except KeyboardInterrupt:
        pass
    return 0
