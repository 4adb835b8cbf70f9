"""The ``agent`` command: a chat model plays text episodes, with hints and reviews in its prompt.

Usage::

    feedbackgym agent --env ID | --env-url URL [--model-file PATH | --base-url URL [--model NAME]]
        [--adapter PATH | --versions RUN_DIR [--version N|current] | --base-model]
        [--episodes N] [--attempts K] [--arm ARM] [--seed S] [--out PATH] [--round NAME]
        [--feedback builtin|llm] [--memory K] [--turns delta|full] [--retries R]
        [--timeout SECONDS] [--context TOKENS] [--threads N] [--constrain grammar|json|none]
        [--max-errors N] [--level phase|target|action] [--kwarg KEY=VALUE ...]

Without ``--base-url`` it starts a local llama.cpp server on loopback for the
packaged model (or ``--model-file``) and stops it when it ends
(:class:`~feedbackgym.language.model_server.ModelServer`). Its first line
names the model, the adapter, the split and the hint level. Where the package
ships a trained adapter for the env (:mod:`feedbackgym.language.adapters`:
OpsIncidentEasy-v1's), the packaged model plays with it unless another model,
adapter or server is given, or ``--base-model``. ``--adapter`` applies a LoRA
adapter to the local model: a PEFT folder (``feedbackgym sft``'s ``RUN/adapter``,
converted to llama.cpp's GGUF form on first use and kept beside it) or a
``.gguf`` LoRA file.
``--versions RUN_DIR`` serves a run's version registry
(:mod:`~feedbackgym.language.served_versions`) and ``--version`` plays one of its
versions: a number, or ``current`` (the promoted one, or the canary for its
share of requests); the first line names it.
Episodes go to a trajectory store (``--out``, default
``$FEEDBACKGYM_DATASETS_PATH/<id>-agent``); ``feedbackgym datasets
export-chat`` writes them as chats. ``--feedback llm`` asks the same server
and model for the hints and reviews (:mod:`feedbackgym.feedback.llm`), with
the command's ``--timeout`` and ``--constrain``. ``--arm`` and ``--attempts``
play each seed K times in a feedback arm (:mod:`feedbackgym.language.agent_arms`);
each episode's line and its record name its arm and attempt. An env with
splits (OpsIncident-v1) plays its test split unless ``--kwarg split=train``.
``--env-url URL`` plays a ``feedbackgym serve-env`` server's env instead of
``--env`` (:mod:`feedbackgym.serving.remote_agent`): its hints and reviews
are the server's, and the episodes are not recorded here.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from feedbackgym.cli._helpers import (
    CommandError,
    add_kwarg_option,
    add_turns_option,
    parse_kwargs,
    positive_int,
)
from feedbackgym.core import DEFAULT_HINT_LEVEL, HINT_LEVELS
from feedbackgym.experts import default_dataset_path
from feedbackgym.language.agent_arms import AGENT_ARMS, DEFAULT_AGENT_ARM
from feedbackgym.registration import evaluation_kwargs

if TYPE_CHECKING:
    from collections.abc import Iterator

    from feedbackgym.chat import ChatClient
    from feedbackgym.language.adapters import TrainedAdapter
    from feedbackgym.language.agent_loop import AgentResult
    from feedbackgym.language.model_server import ModelServer

__all__ = ["add_commands", "add_model_server_options"]

LLM_GENERATORS = ("feedbackgym.feedback.llm:LLMGuide", "feedbackgym.feedback.llm:LLMReviewer")
"""``--feedback llm``: named, so the recorded env spec says which generators spoke."""


def add_commands(commands: Any) -> None:
    """Adds ``agent`` to the top-level subparsers ``commands``."""
    agent = commands.add_parser(
        "agent",
        help="play text episodes with a language model (the packaged one, or any "
        "OpenAI-compatible server)",
    )
    env = agent.add_mutually_exclusive_group(required=True)
    env.add_argument("--env", metavar="ID", help="e.g. feedbackgym/OpsIncident-v0")
    env.add_argument(
        "--env-url",
        metavar="URL",
        help="a feedbackgym serve-env server to play instead (e.g. http://127.0.0.1:8000)",
    )
    where = agent.add_mutually_exclusive_group()
    where.add_argument(
        "--model-file",
        type=Path,
        metavar="PATH",
        help="a GGUF file to serve locally instead of the packaged model",
    )
    where.add_argument(
        "--base-url",
        metavar="URL",
        help="an OpenAI-compatible server to use instead of a local one, "
        "e.g. http://127.0.0.1:8000/v1",
    )
    agent.add_argument(
        "--model", metavar="NAME", help="the model name (default: the server's first model)"
    )
    agent.add_argument(
        "--adapter",
        type=Path,
        metavar="PATH",
        help="a LoRA adapter for the local model: a PEFT folder (feedbackgym sft's RUN/adapter, "
        "converted on first use) or a .gguf LoRA file",
    )
    agent.add_argument(
        "--base-model",
        action="store_true",
        help="play the packaged base model even where the package ships a trained adapter for "
        "the env (OpsIncidentEasy-v1's is the default there)",
    )
    agent.add_argument(
        "--versions",
        type=Path,
        metavar="RUN_DIR",
        help="serve a run's versions (its versions/registry.json, or the registry's folder)",
    )
    agent.add_argument(
        "--version",
        type=_version,
        default=None,
        metavar="N|current",
        help="with --versions: the version to play (default: current)",
    )
    agent.add_argument("--episodes", type=positive_int, default=5, help="seeds to play")
    agent.add_argument(
        "--attempts",
        type=positive_int,
        default=1,
        metavar="K",
        help="episodes at each seed, in a row (attempt 1..K)",
    )
    agent.add_argument(
        "--arm",
        choices=tuple(AGENT_ARMS),
        default=DEFAULT_AGENT_ARM,
        help="who speaks on which attempt: "
        + "; ".join(f"{arm.name}: {arm.description}" for arm in AGENT_ARMS.values())
        + f" (default {DEFAULT_AGENT_ARM})",
    )
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
        "--memory",
        type=int,
        default=3,
        help="reviews of earlier episodes (attempts, in the review arms) in the prompt",
    )
    add_turns_option(agent)
    agent.add_argument(
        "--retries", type=int, default=1, help="asks again after a reply that names no action"
    )
    agent.add_argument("--timeout", type=float, default=30.0, help="seconds a model call waits")
    add_model_server_options(
        agent,
        context_help="prompts keep within it; with --base-url, no default: the whole chat is "
        "sent unless you give the server's context",
    )
    agent.add_argument(
        "--constrain",
        choices=("grammar", "json", "none"),
        default="grammar",
        help="how replies are held to the env's actions: a llama.cpp grammar, a JSON schema "
        "(response_format json_object), or not at all (replies are parsed)",
    )
    agent.add_argument(
        "--max-errors",
        type=positive_int,
        default=3,
        help="failed model calls in a row that stop the run (the episode is cut short, recorded)",
    )
    agent.add_argument(
        "--level",
        choices=HINT_LEVELS,
        default=DEFAULT_HINT_LEVEL,
        help="what hints and reviews disclose: phase (default), target or action",
    )
    add_kwarg_option(agent)
    agent.set_defaults(run=_cmd_agent)


def add_model_server_options(parser: argparse.ArgumentParser, *, context_help: str) -> None:
    """Adds ``--context`` and ``--threads``, the local model server's options."""
    from feedbackgym.language.model_server import DEFAULT_CONTEXT

    parser.add_argument(
        "--context",
        type=positive_int,
        default=None,
        metavar="TOKENS",
        help=f"the model's context in tokens (default: {DEFAULT_CONTEXT}; {context_help})",
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="CPU threads of the local model server (default: half the cores, at least 1)",
    )


def _cmd_agent(args: argparse.Namespace) -> int:
    from feedbackgym.cli._helpers import make_env
    from feedbackgym.language.model_server import (
        DEFAULT_CONTEXT,
        ModelServer,
        served_adapter,
        sigterm_as_interrupt,
    )
    from feedbackgym.language.versions import CURRENT

    if args.env_url is not None:
        from feedbackgym.serving.remote_env import server_settings

        args.env = server_settings(args.env_url)["env_id"]  # no server there: one line
    else:
        make_env(args.env, {}).close()  # an unknown id: one line, with close ids
    if args.version is not None and args.versions is None:
        raise CommandError("--version plays a version of --versions RUN_DIR: give it too")
    shipped = _shipped_adapter(args)
    if args.base_url is not None:
        if args.adapter is not None or args.versions is not None:
            raise CommandError(
                "--adapter and --versions apply to the local model server, not to --base-url "
                "(a server with versions serves version N as --model NAME@vN)"
            )
        return _play(args, None, args.base_url, args.context)
    if shipped is not None:
        args.adapter = shipped.path
    if args.adapter is not None and args.versions is not None:
        raise CommandError("--adapter or --versions, not both: each version is an adapter")
    context = args.context or DEFAULT_CONTEXT
    lora = served_adapter(args.adapter) if args.adapter is not None else None
    server = ModelServer(
        args.model_file, context=context, threads=args.threads, lora=lora, versions=args.versions
    )
    version = None
    if args.versions is not None:
        version = CURRENT if args.version is None else args.version
        args.model = server.served_name(version)  # an unknown version: before the server starts
    try:
        with sigterm_as_interrupt(), server:  # stopped on an error and Ctrl-C too
            adapter = ""
            if shipped is not None:
                adapter = (
                    f"; adapter {shipped.name}, trained for {shipped.env_id} ({shipped.recipe}; "
                    "--base-model plays the base model)"
                )
            print(server.describe(version) + adapter + _playing(args), flush=True)
            return _play(args, server, server.base_url, context)
    except KeyboardInterrupt:  # while the server started
        print("interrupted", file=sys.stderr)
        return 130


def _shipped_adapter(args: argparse.Namespace) -> TrainedAdapter | None:
    """The adapter the package ships for the env, when the command plays the packaged model.

    Raises:
        CommandError: ``--base-model`` with another model, adapter or server.
    """
    from feedbackgym.language.adapters import trained_adapter

    chosen = [
        flag
        for flag, value in (
            ("--adapter", args.adapter),
            ("--versions", args.versions),
            ("--model-file", args.model_file),
            ("--base-url", args.base_url),
        )
        if value is not None
    ]
    if args.base_model:
        if chosen:
            raise CommandError(f"--base-model plays the packaged base model: not with {chosen[0]}")
        return None
    return None if chosen else trained_adapter(args.env)


def _playing(args: argparse.Namespace) -> str:
    """What the episodes are, for the first line: the split, the arm, the hint level."""
    kwargs = evaluation_kwargs(args.env, parse_kwargs(args.kwarg))
    split = f"; {kwargs['split']} split" if "split" in kwargs else ""
    return f"{split}; arm {args.arm}, hints at the {args.level} level"


def _play(
    args: argparse.Namespace, server: ModelServer | None, base_url: str, context: int | None
) -> int:
    from feedbackgym.chat import ChatClient
    from feedbackgym.errors import ChatError
    from feedbackgym.language.model_server import ModelServerError

    probe = ChatClient(base_url, args.model or "any", timeout_s=args.timeout)
    served = probe.models()  # a server that does not answer fails here, not on every step
    model = args.model or (served[0] if served else None)
    if model is None:
        raise CommandError(f"{base_url} lists no model: pass --model")
    if server is None:
        print(f"model: {model} at {base_url}{_playing(args)}", flush=True)
    client = ChatClient(base_url, model, timeout_s=args.timeout, constrain=args.constrain)
    guide = reviewer = None
    if args.feedback == "llm":
        _settings_for_llm_generators(client, args)
        guide, reviewer = LLM_GENERATORS
    out = args.out or default_dataset_path(args.env, "agent")
    kept = f"recorded in {out}" if args.env_url is None else f"played on {args.env_url}"
    successes = episodes = 0
    by_attempt: dict[int, list[bool]] = {}
    try:
        for r in _results(args, client, context, guide, reviewer, out):
            episodes, successes = episodes + 1, successes + r.success
            by_attempt.setdefault(r.attempt, []).append(r.success)
            review = f"{r.review['score']:.2f}" if r.review else "none"
            print(
                f"seed {r.seed}: arm {r.arm} attempt {r.attempt}/{args.attempts}: "
                f"{'success' if r.success else 'failure'} ({r.outcome}) "
                f"return {r.episode_return:.2f} length {r.length} hints {r.hints} "
                f"review {review} invalid replies {r.invalid_replies} "
                f"model errors {r.model_errors} fallbacks {r.fallbacks}",
                flush=True,
            )
    except ChatError as error:
        recorded = f"{episodes} episodes {kept}"
        if server is not None and not server.running:
            raise ModelServerError(
                f"the model server (pid {server.pid}) {server.exit_reason()}: {error}; {recorded}"
            ) from None
        raise ChatError(f"{error}; {recorded}") from None
    except KeyboardInterrupt:
        print(f"interrupted; {episodes} episodes {kept}", file=sys.stderr)
        return 130
    per_attempt = ""
    if args.attempts > 1:
        per_attempt = (
            " (by attempt: "
            + ", ".join(f"{a}: {sum(s) / len(s):.0%}" for a, s in sorted(by_attempt.items()))
            + ")"
        )
    print(f"{episodes} episodes, {successes / episodes:.1%} success{per_attempt}; {kept}")
    return 0


def _results(
    args: argparse.Namespace,
    client: ChatClient,
    context: int | None,
    guide: str | None,
    reviewer: str | None,
    out: Path,
) -> Iterator[AgentResult]:
    """The episodes the command plays: on ``--env`` here, or on the ``--env-url`` server."""
    from feedbackgym.language.agent_loop import run_agent

    options: dict[str, Any] = {
        "episodes": args.episodes,
        "attempts": args.attempts,
        "arm": args.arm,
        "seed": args.seed,
        "memory": args.memory,
        "retries": args.retries,
        "context": context,
        "max_errors": args.max_errors,
        "turns": args.turns,
    }
    if args.env_url is not None:
        from feedbackgym.serving.remote_agent import run_remote_agent

        return run_remote_agent(args.env_url, client, **options)
    return run_agent(
        args.env,
        client,
        store=out,
        round=args.round,
        env_kwargs=evaluation_kwargs(args.env, parse_kwargs(args.kwarg)),
        guide=guide,
        reviewer=reviewer,
        level=args.level,
        deadline_ms=args.timeout * 1000,
        **options,
    )


def _version(text: str) -> int | str:
    """An argparse type: a version's number (at least 1), or ``current``.

    Example:
        >>> _version("2"), _version("current")
        (2, 'current')
    """
    from feedbackgym.language.versions import CURRENT

    return text if text == CURRENT else positive_int(text)


def _settings_for_llm_generators(client: ChatClient, args: argparse.Namespace) -> None:
    """Gives ``--feedback llm``'s generators the server, model, ``--timeout`` and ``--constrain``.

    They are named (``"module:Class"``, so the recorded env spec says which
    spoke) and made with no arguments, from these variables (see
    :mod:`feedbackgym.feedback.llm`).
    """
    from feedbackgym.chat import BASE_URL_ENV, CONSTRAIN_ENV, MODEL_ENV, TIMEOUT_ENV

    os.environ[BASE_URL_ENV], os.environ[MODEL_ENV] = client.base_url, client.model
    os.environ[TIMEOUT_ENV] = f"{args.timeout:g}"
    os.environ[CONSTRAIN_ENV] = args.constrain
