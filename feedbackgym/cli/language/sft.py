"""The ``sft`` command: the supervised warm-up of a language model on the standard answers.

Usage::

    feedbackgym sft --env ID [--demos N | --chats FILE] [--out DIR] [--seed S]
        [--model packaged|FILE.gguf|FOLDER] [--adapter DIR] [--arm ARM] [--memory K]
        [--dropout P] [--dropout-scope episode|step] [--level phase|target|action]
        [--context TOKENS] [--epochs E]
        [--batch B] [--max-steps N] [--learning-rate LR] [--lora-rank R]
        [--save-every N] [--keep-checkpoints K] [--device auto|cpu|cuda] [--cpu-threads N]
        [--kwarg KEY=VALUE ...] [--resume]

LoRA fine-tuning on N expert episodes played by the agent's own loop (or on
``feedbackgym datasets export-chat`` transcripts), each step's prompt what
``feedbackgym agent`` sends, the loss on the replies only, hints withheld
with the arms' dropout (:mod:`feedbackgym.training.llm.sft`). A progress bar
on stderr; the run directory holds TensorBoard, checkpoints (``--resume``)
and the adapter (``DIR/adapter``, a PEFT folder) that ``feedbackgym agent
--adapter`` plays and ``train-llm --adapter`` goes on training.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from feedbackgym.cli._helpers import (
    add_kwarg_option,
    add_turns_option,
    config_fields,
    fraction,
    make_env,
    parse_kwargs,
    positive_int,
)
from feedbackgym.cli._runs import add_level_argument
from feedbackgym.language.agent_arms import AGENT_ARMS, DEFAULT_AGENT_ARM

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Adds ``sft`` (the supervised warm-up) to the top-level subparsers ``commands``."""
    parser = commands.add_parser(
        "sft", help="warm a language model up on expert episodes (LoRA), as the agent prompts it"
    )
    parser.add_argument("--env", dest="env_id", required=True, help="an env with a text mode")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--demos", type=positive_int, default=10, help="expert episodes to train on (default 10)"
    )
    source.add_argument("--chats", metavar="FILE", help="export-chat transcripts to train on")
    parser.add_argument("--out", default="runs/sft", help="the run directory")
    parser.add_argument("--seed", type=int, default=0, help="the first expert seed; data order")
    parser.add_argument(
        "--model",
        default="packaged",
        help="packaged (Gemma 3 270M, the packaged GGUF), a .gguf file or a local model folder",
    )
    parser.add_argument("--adapter", help="a saved PEFT adapter to start from")
    parser.add_argument(
        "--arm",
        choices=tuple(AGENT_ARMS),
        default=DEFAULT_AGENT_ARM,
        help="the agent arm the demos play in",
    )
    parser.add_argument("--memory", type=int, default=3, help="reviews in the system message")
    add_turns_option(parser)
    parser.add_argument(
        "--dropout", type=fraction, default=0.5, help="chance a hint is withheld (default 0.5)"
    )
    parser.add_argument("--dropout-scope", choices=("episode", "step"), default="episode")
    add_level_argument(parser)
    parser.add_argument(
        "--context",
        type=positive_int,
        default=None,
        metavar="TOKENS",
        help="the served model's context the agent sizes prompts to (default: the agent's)",
    )
    parser.add_argument("--epochs", type=positive_int, default=3, help="passes over the examples")
    parser.add_argument("--batch", type=positive_int, default=4, help="sequences per step")
    parser.add_argument("--max-steps", type=positive_int, help="stop after this many steps")
    parser.add_argument("--learning-rate", type=float, default=2e-4)
    parser.add_argument("--lora-rank", type=positive_int, default=8)
    parser.add_argument(
        "--save-every", type=positive_int, default=10, help="steps between checkpoints"
    )
    parser.add_argument("--keep-checkpoints", type=int, default=3)
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cuda or cpu")
    parser.add_argument(
        "--cpu-threads", type=int, default=0, help="torch threads on the CPU (0: one per core)"
    )
    add_kwarg_option(parser)
    parser.add_argument("--resume", action="store_true", help="continue an interrupted warm-up")
    parser.set_defaults(run=_cmd_sft)


def _cmd_sft(args: argparse.Namespace) -> int:
    from feedbackgym.training.llm.sft import SFTConfig, train_sft_run

    env_kwargs = parse_kwargs(args.kwarg)
    make_env(args.env_id, env_kwargs).close()  # a clear error for an unknown id, before the run
    config = SFTConfig(
        **config_fields(
            SFTConfig,
            args,
            out_dir=args.out,
            lora_alpha=2 * args.lora_rank,
            env_kwargs=env_kwargs,
        )
    )
    source = args.chats or f"{args.demos} expert episodes"
    print(f"sft: {config.model} on {config.env_id}, from {source}", flush=True)
    state = train_sft_run(config, resume=args.resume, log=lambda line: print(line, flush=True))
    summary = {key: state.get(key) for key in ("step", "epoch", "loss", "tokens", "seconds")}
    print(json.dumps(summary))
    print(f"run: {args.out} (tensorboard --logdir {args.out}/tb; adapter: {args.out}/adapter)")
    return 0
