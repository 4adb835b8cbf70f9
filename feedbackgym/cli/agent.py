"""The ``agent`` command: a chat model plays text episodes, with hints and reviews in its prompt.

Usage::

    feedbackgym agent --env ID --base-url URL --model NAME [--episodes N] [--seed S]
        [--out PATH] [--round NAME] [--feedback builtin|llm] [--memory K] [--retries R]
        [--timeout SECONDS] [--kwarg KEY=VALUE ...]

Episodes go to a trajectory store (``--out``, default
``$FEEDBACKGYM_DATASETS_PATH/<id>-agent``); ``feedbackgym datasets
export-chat`` writes them as chats. ``--feedback llm`` asks the same server
and model for the hints and reviews (:mod:`feedbackgym.feedback.llm`).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from feedbackgym.cli._helpers import add_kwarg_option, parse_kwargs, positive_int
from feedbackgym.experts import default_dataset_path

__all__ = ["add_commands"]

LLM_GENERATORS = ("feedbackgym.feedback.llm:LLMGuide", "feedbackgym.feedback.llm:LLMReviewer")
"""``--feedback llm``: named, so the recorded env spec says which generators spoke."""


def add_commands(commands: Any) -> None:
    """Adds ``agent`` to the top-level subparsers ``commands``."""
    agent = commands.add_parser(
        "agent", help="play text episodes with a chat model (OpenAI-compatible API)"
    )
    agent.add_argument("--env", required=True, metavar="ID", help="e.g. feedbackgym/OpsIncident-v0")
    agent.add_argument(
        "--base-url", required=True, metavar="URL", help="e.g. http://127.0.0.1:8000/v1"
    )
    agent.add_argument("--model", required=True, metavar="NAME")
    agent.add_argument("--episodes", type=positive_int, default=5)
    agent.add_argument("--seed", type=int, default=0, help="seed of the first episode")
    agent.add_argument(
        "--out",
        type=Path,
        default=None,
        help="trajectory store (default: $FEEDBACKGYM_DATASETS_PATH/<id>-agent)",
    )
    agent.add_argument("--round", default="agent", help="the store round the episodes go to")
    agent.add_argument(
        "--feedback",
        choices=("builtin", "llm"),
        default="builtin",
        help="builtin: the subgoal guide and trajectory reviewer; llm: ask the model",
    )
    agent.add_argument(
        "--memory", type=int, default=3, help="reviews of earlier episodes in the prompt"
    )
    agent.add_argument(
        "--retries", type=int, default=1, help="asks again after a reply that names no action"
    )
    agent.add_argument("--timeout", type=float, default=30.0, help="seconds a model call waits")
    add_kwarg_option(agent)
    agent.set_defaults(run=_cmd_agent)


def _cmd_agent(args: argparse.Namespace) -> int:
    from feedbackgym.cli._helpers import make_env
    from feedbackgym.feedback.llm import BASE_URL_ENV, MODEL_ENV, ChatClient
    from feedbackgym.language.agent_loop import run_agent

    make_env(args.env, {}).close()  # an unknown id: one line, with close ids
    client = ChatClient(args.base_url, args.model, timeout_s=args.timeout)
    client.models()  # a server that does not answer fails here, not on every step
    guide = reviewer = None
    if args.feedback == "llm":
        os.environ[BASE_URL_ENV], os.environ[MODEL_ENV] = client.base_url, client.model
        guide, reviewer = LLM_GENERATORS
    out = args.out or default_dataset_path(args.env, "agent")
    successes = episodes = 0
    for r in run_agent(
        args.env,
        client,
        episodes=args.episodes,
        seed=args.seed,
        store=out,
        round=args.round,
        env_kwargs=parse_kwargs(args.kwarg),
        guide=guide,
        reviewer=reviewer,
        deadline_ms=args.timeout * 1000,
        memory=args.memory,
        retries=args.retries,
    ):
        episodes, successes = episodes + 1, successes + r.success
        review = f"{r.review['score']:.2f}" if r.review else "none"
        print(
            f"seed {r.seed}: {'success' if r.success else 'failure'} ({r.outcome}) "
            f"return {r.episode_return:.2f} length {r.length} hints {r.hints} "
            f"review {review} invalid replies {r.invalid_replies} "
            f"model errors {r.model_errors} fallbacks {r.fallbacks}"
        )
    print(f"{episodes} episodes, {successes / episodes:.1%} success; stored in {out}")
    return 0
