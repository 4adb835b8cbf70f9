"""The ``serve-model`` command: the local model server, for other clients, until interrupted.

Usage::

    feedbackgym serve-model [--model-file PATH] [--host 127.0.0.1] [--port 8000]
        [--context TOKENS] [--threads N] [--versions RUN_DIR]

It serves the packaged model (or ``--model-file``) over an OpenAI-compatible
API with llama.cpp, the same server ``feedbackgym agent`` starts by itself
(:class:`~feedbackgym.language.model_server.ModelServer`). Its first line
names the model and the base URL. ``--versions RUN_DIR`` serves a run's
versions too (``NAME@vN``, ``NAME@current``), following its promotions,
canaries and rollbacks without a restart
(:mod:`~feedbackgym.language.served_versions`). It serves until Ctrl-C or
SIGTERM, then stops the server. A server that dies ends the command with status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from feedbackgym.cli.language.agent import add_model_server_options

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Adds ``serve-model`` to the top-level subparsers ``commands``."""
    serve = commands.add_parser(
        "serve-model",
        help="serve the packaged language model (or a GGUF file) over an OpenAI-compatible API",
    )
    serve.add_argument(
        "--model-file", type=Path, metavar="PATH", help="a GGUF file instead of the packaged model"
    )
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="the port (0: a free one)")
    add_model_server_options(serve, context_help="prompt and reply together")
    serve.add_argument(
        "--versions",
        type=Path,
        metavar="RUN_DIR",
        help="serve a run's versions too (its versions/registry.json, or the registry's folder)",
    )
    serve.set_defaults(run=_cmd_serve_model)


def _cmd_serve_model(args: argparse.Namespace) -> int:
    from feedbackgym.language.model_server import (
        DEFAULT_CONTEXT,
        ModelServer,
        sigterm_as_interrupt,
    )

    server = ModelServer(
        args.model_file,
        host=args.host,
        port=args.port,
        context=args.context or DEFAULT_CONTEXT,
        threads=args.threads,
        versions=args.versions,
    )
    try:
        with sigterm_as_interrupt(), server:
            print(server.describe(), flush=True)
            print("serving until Ctrl-C or SIGTERM", flush=True)
            server.wait()
            server.check()  # it died: an error, exit status 2
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    return 0
