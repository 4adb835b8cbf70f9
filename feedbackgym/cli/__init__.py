"""The ``feedbackgym`` command.

Usage::

    feedbackgym envs
    feedbackgym play ID [--policy random|expert] [--episodes N] [--seed S] [--kwarg KEY=VALUE ...]
    feedbackgym demo [--episodes N]
    feedbackgym compare --env ID --arms A,B --seeds N --steps N [--jobs J] [--out DIR] [--quick]
        [--backend local|ray] [--address auto|ray://HOST:PORT]
    feedbackgym report --out DIR SRC [SRC ...]
    feedbackgym train --env ID --steps N [--arm ARM] [--trainer sb3|torch] [--out DIR]
    feedbackgym train-llm --env ID --rounds N [--arm ARM] [--model packaged|PATH] [--out DIR]
    feedbackgym sft --env ID [--demos N | --chats FILE] [--model packaged|PATH] [--out DIR]
    feedbackgym versions RUN_DIR [--promote N | --canary N --share S | --rollback [N]]
    feedbackgym serve-feedback [--address tcp://127.0.0.1:5557]
    feedbackgym serve-env --env ID [--arm ARM] [--max-sessions N] [--idle-timeout S] [--port 8000]
    feedbackgym agent --env ID [--model-file PATH | --base-url URL [--model NAME]] [--episodes N]
        [--feedback builtin|llm]
    feedbackgym serve-model [--model-file PATH] [--host 127.0.0.1] [--port 8000]
    feedbackgym sandbox build [--force]
    feedbackgym doctor [--json]
    feedbackgym datasets make|inspect|verify|prune|gather|export-chat ...

One module per command, named after it (``serve-feedback`` in ``serve_feedback``),
adds it; the language-model commands sit in :mod:`feedbackgym.cli.language`;
``_helpers`` and ``_runs`` hold what they share.
Each command loads what it runs (the baselines, h5py, ZeroMQ) only when it runs.

Errors (an unknown id, a bad option, a policy the env lacks) print one line to
stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

import gymnasium as gym

from feedbackgym.cli import (
    compare,
    datasets,
    demo,
    doctor,
    envs,
    play,
    report,
    sandbox,
    serve_env,
    serve_feedback,
    train,
)
from feedbackgym.cli.language import agent, serve_model, sft, train_llm, versions
from feedbackgym.errors import FeedbackGymError

__all__ = ["COMMANDS", "main"]

COMMANDS = (
    envs,
    play,
    demo,
    compare,
    report,
    train,
    train_llm,
    sft,
    versions,
    serve_feedback,
    serve_env,
    agent,
    serve_model,
    sandbox,
    datasets,
    doctor,
)
"""The command modules, in ``--help`` order; each adds the command it is named after."""


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status.

    Example:
        >>> main(["play", "feedbackgym/NoSuchEnv-v0"])
        2
    """
    # v0 ids stay registered for published results: Gymnasium's "v1 exists" warning on
    # every make of one would break the command's one-line errors and tables.
    warnings.filterwarnings("ignore", message=r".*is out of date\. You should consider upgrading")
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
    for command in COMMANDS:
        command.add_commands(commands)
    return parser
