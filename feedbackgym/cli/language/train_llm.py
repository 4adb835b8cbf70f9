"""The ``train-llm`` command: RL of a language model by GRPO, the feedback in its prompt.

Usage::

    feedbackgym train-llm --env ID | --env-url URL --rounds N [--arm ARM] [--seed S] [--out DIR]
        [--model packaged|FILE.gguf|FOLDER] [--adapter DIR] [--groups K] [--group-size G]
        [--max-turns N] [--eval-every N] [--eval-episodes N] [--config FILE] [--record] [--resume]

Each round plays K groups of G episodes (a group on one seed) with the model
and takes one GRPO step on its LoRA adapter (TRL's ``GRPOTrainer``). The run
directory is the other trainers' (TensorBoard, ``curve.csv``, checkpoints,
``state.json``) with ``chats.jsonl`` and the adapter's versions
(``feedbackgym versions``). Needs the ``llm-train`` extra. ``--env-url URL``
trains on a ``feedbackgym serve-env`` server's env instead of ``--env``: its
sessions play the episodes, and the run's controller drives their feedback
(the ``server`` extra too).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from feedbackgym.cli._helpers import (
    add_kwarg_option,
    add_turns_option,
    arm_type,
    config_fields,
    fraction,
    make_env,
    parse_kwargs,
    positive_int,
)
from feedbackgym.cli._runs import add_level_argument, given_sections
from feedbackgym.config import (
    ARM_SUFFIX_HELP,
    BASE_ARMS,
    DISTILL_SUFFIX,
    FAILURE_HINTS_SUFFIX,
    REEXPLORE_SUFFIX,
)
from feedbackgym.schedules import LLM_ARMS
from feedbackgym.training.llm.llm_settings import DEFAULT_TRAINING_ARM

__all__ = ["add_commands", "llm_feedback_overrides"]


def add_commands(commands: Any) -> None:
    """Adds ``train-llm`` to the top-level subparsers ``commands``."""
    parser = commands.add_parser(
        "train-llm", help="train a language model by GRPO (LoRA), hints and reviews in its prompt"
    )
    env = parser.add_mutually_exclusive_group(required=True)
    env.add_argument("--env", dest="env_id", help="an env with a text mode")
    env.add_argument(
        "--env-url", metavar="URL", help="a feedbackgym serve-env server to train on instead"
    )
    parser.add_argument("--rounds", type=positive_int, required=True, help="GRPO steps")
    parser.add_argument(
        "--arm",
        default=DEFAULT_TRAINING_ARM,
        type=arm_type(LLM_ARMS),
        metavar="ARM",
        help=f"who speaks when: {', '.join(BASE_ARMS)}, {ARM_SUFFIX_HELP}: {FAILURE_HINTS_SUFFIX} "
        "replays groups that failed with hints and trains without them, "
        f"{DISTILL_SUFFIX} distils the model reading hints and reviews into the model "
        f"without them, {REEXPLORE_SUFFIX} starts groups at reviewed steps "
        f"(default {DEFAULT_TRAINING_ARM})",
    )
    parser.add_argument("--seed", type=int, default=0, help="the run's seed")
    parser.add_argument("--out", default="runs/train-llm", help="the run directory")
    parser.add_argument(
        "--model",
        default="packaged",
        help="packaged (Gemma 3 270M, the packaged GGUF), a .gguf file or a local model folder",
    )
    parser.add_argument("--adapter", help="a saved PEFT adapter to start from (e.g. the warm-up)")
    parser.add_argument("--groups", type=positive_int, default=2, help="seeds per round")
    parser.add_argument("--group-size", type=int, default=4, help="episodes per seed (>= 2)")
    parser.add_argument("--seed-pool", type=positive_int, default=16, help="training seeds cycled")
    parser.add_argument(
        "--max-turns", type=positive_int, default=20, help="steps an episode may take"
    )
    parser.add_argument(
        "--max-tokens", type=positive_int, default=2048, help="longest episode sequence"
    )
    add_turns_option(parser)
    parser.add_argument("--memory", type=int, default=3, help="reviews of earlier attempts shown")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--beta", type=float, default=0.0, help="KL coefficient (default 0)")
    parser.add_argument("--lora-rank", type=positive_int, default=8)
    parser.add_argument(
        "--eval-every", type=positive_int, default=4, help="rounds between validations"
    )
    parser.add_argument(
        "--eval-episodes",
        type=positive_int,
        help="held-out (test-split) seeds a validation plays (default 16)",
    )
    parser.add_argument(
        "--eval-temperature", type=float, help="validations' temperature (default 0: greedy)"
    )
    parser.add_argument(
        "--promote-above",
        type=fraction,
        default=0.0,
        help="validation success with hints masked a version needs to be promoted",
    )
    parser.add_argument(
        "--rollback-drop",
        type=fraction,
        help="go back to the promoted version's adapter when a validation falls more than "
        "this below it (default: never)",
    )
    parser.add_argument(
        "--hint-weight-cap",
        type=float,
        help=f"{FAILURE_HINTS_SUFFIX}: largest importance weight of a replayed choice (default 2)",
    )
    parser.add_argument(
        "--distill-coef", type=float, help=f"{DISTILL_SUFFIX}: the divergence's weight (default 1)"
    )
    parser.add_argument(
        "--distill-alpha",
        type=fraction,
        help=f"{DISTILL_SUFFIX}: 1 reverse KL (default), 0 forward KL, between: JSD",
    )
    parser.add_argument(
        "--distill-steps",
        choices=("all", "flagged"),
        help=f"{DISTILL_SUFFIX}: every choice of a failed episode (default) or the review's steps",
    )
    parser.add_argument(
        "--rollouts",
        choices=("auto", "server", "torch"),
        default="auto",
        help="who plays the episodes: the model server with the adapter published each round "
        "(server), the model in this process (torch); auto: the server for a GGUF model",
    )
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cuda or cpu")
    parser.add_argument(
        "--cpu-threads", type=int, default=0, help="torch threads on the CPU (0: one per core)"
    )
    parser.add_argument("--config", metavar="FILE", help="feedback config file to follow")
    parser.add_argument("--switch-at", type=fraction, help="where the fade starts (default 0.4)")
    parser.add_argument("--fade", type=float, help="fade length in rounds")
    parser.add_argument("--dropout", type=fraction, help="hint dropout (default 0.5)")
    parser.add_argument("--dropout-scope", choices=("step", "episode"))
    add_level_argument(parser)
    parser.add_argument("--fixed-switch", action="store_true", help="no adaptive switch")
    parser.add_argument(
        "--reliance-rule", action="store_true", help="validations' hint reliance moves the dropout"
    )
    parser.add_argument(
        "--record", action="store_true", help="record every training episode (HDF5 store)"
    )
    parser.add_argument("--keep-checkpoints", type=int, default=5)
    add_kwarg_option(parser)
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run")
    parser.set_defaults(run=_cmd_train_llm)


def llm_feedback_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The feedback config sections the flags set (they override a ``--config`` file).

    Example:
        >>> args = argparse.Namespace(switch_at=0.5, fade=None, dropout=0.0, dropout_scope=None,
        ...                           level=None, fixed_switch=True, reliance_rule=False)
        >>> llm_feedback_overrides(args)
        {'guide': {'dropout': 0.0}, 'schedule': {'switch_at': 0.5, 'adaptive': None}}
    """
    flags = {
        "guide": {
            "dropout": args.dropout,
            "dropout_scope": args.dropout_scope,
            "level": args.level,
        },
        "review": {"level": args.level},
        "schedule": {"switch_at": args.switch_at, "fade": args.fade},
    }
    overrides = given_sections(flags)
    if args.fixed_switch:
        overrides.setdefault("schedule", {})["adaptive"] = None
    if args.reliance_rule:
        overrides["reliance"] = {}
    return overrides


def _cmd_train_llm(args: argparse.Namespace) -> int:
    from feedbackgym.training.llm.llm_settings import LLMRunConfig
    from feedbackgym.training.llm.run_llm import train_llm_run

    env_kwargs = parse_kwargs(args.kwarg)
    if args.env_url is not None:
        from feedbackgym.serving.remote_env import server_settings

        served = server_settings(args.env_url)  # no server there: one line, before the run
        args.env_id, env_kwargs = served["env_id"], {**served["env_kwargs"], **env_kwargs}
    else:
        make_env(args.env_id, env_kwargs).close()  # an unknown id: one line, before the run
    config = LLMRunConfig(
        **config_fields(
            LLMRunConfig,
            args,
            env_id=args.env_id,
            total_rounds=args.rounds,
            out_dir=args.out,
            lora_alpha=2 * args.lora_rank,
            feedback_file=args.config,
            feedback_overrides=llm_feedback_overrides(args),
            env_kwargs=env_kwargs,
        )
    )
    where = "the model server" if config.served_rollouts else "torch"
    print(
        f"train-llm: {config.model} on {config.env_id}, arm {config.arm}, rollouts on {where}",
        flush=True,
    )
    state = train_llm_run(
        config,
        resume=args.resume,
        progress=lambda steps: print(f"round done: {steps} env steps", flush=True),
    )
    summary = {key: state.get(key) for key in ("round", "timesteps", "best_success", "alerts")}
    print(json.dumps(summary))
    print(f"run: {args.out} (tensorboard --logdir {args.out}/tb; versions: {args.out}/versions)")
    return 0
