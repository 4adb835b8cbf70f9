"""The ``datasets`` commands: make, inspect, verify, prune, gather and export-chat stores.

Usage::

    feedbackgym datasets make ID [--episodes N] [--policy expert|random]
        [--split train|test|validation] [--seed S] [--out PATH] [--kwarg KEY=VALUE ...]
        [--compression none|lzf|gzip]
    feedbackgym datasets inspect PATH
    feedbackgym datasets prune PATH [--config FILE] [--dry-run]
    feedbackgym datasets gather SRC [SRC ...] DEST
    feedbackgym datasets export-chat PATH [--out FILE] [--memory K] [--round NAME]
        [--turns delta|full]

``inspect`` lists the files it cannot read (their episodes left out) and
fails only when it can read no episode at all. h5py loads only when one of
them runs.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from feedbackgym.cli._helpers import (
    add_kwarg_option,
    add_turns_option,
    parse_kwargs,
    positive_int,
    table,
)
from feedbackgym.experts import DATASETS_PATH_ENV, SPLITS, default_dataset_path
from feedbackgym.rollout import POLICIES

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Adds ``datasets make|inspect|verify|prune|gather|export-chat`` to ``commands``."""
    datasets = commands.add_parser(
        "datasets", help="make, inspect, prune and gather trajectory stores"
    )
    sub = datasets.add_subparsers(dest="datasets_command", required=True, metavar="COMMAND")

    make = sub.add_parser("make", help="record a built-in policy (the expert) as a dataset")
    make.add_argument("env_id", metavar="ID", help="a registered id")
    make.add_argument("--episodes", type=positive_int, default=100)
    make.add_argument("--policy", choices=POLICIES, default="expert")
    make.add_argument(
        "--split",
        choices=SPLITS,
        default="train",
        help="train: seeds from --seed on; test (alias validation): the env's held-out "
        "seeds, on its test split when it has one",
    )
    make.add_argument("--seed", type=int, default=0, help="first seed of the train split")
    make.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"store directory (default: ${DATASETS_PATH_ENV}/...)",
    )
    add_kwarg_option(make)
    make.add_argument("--compression", choices=("none", "lzf", "gzip"), default="none")
    make.set_defaults(run=_cmd_make)

    inspect = sub.add_parser("inspect", help="summarise a store (or one of its files)")
    inspect.add_argument("path", type=Path, metavar="PATH")
    inspect.set_defaults(run=_cmd_inspect)

    verify = sub.add_parser(
        "verify", help="read every file of a store in full; exit 1 if one is damaged"
    )
    verify.add_argument("path", type=Path, metavar="PATH")
    verify.add_argument(
        "--quarantine", action="store_true", help="move damaged files to PATH/quarantine/"
    )
    verify.set_defaults(run=_cmd_verify)

    prune = sub.add_parser(
        "prune", help="move rounds past the hot limit to a cold file, delete past the cold limit"
    )
    prune.add_argument("path", type=Path, metavar="PATH")
    prune.add_argument(
        "--config", type=Path, default=None, help="feedback config whose retention limits apply"
    )
    prune.add_argument("--dry-run", action="store_true", help="only say what would happen")
    prune.set_defaults(run=_cmd_prune)

    gather = sub.add_parser(
        "gather",
        help="join stores written on different machines into DEST (each episode once)",
    )
    gather.add_argument("paths", type=Path, nargs="+", metavar="SRC")
    gather.add_argument("dest", type=Path, metavar="DEST")
    gather.set_defaults(run=_cmd_gather)

    chat = sub.add_parser(
        "export-chat",
        help="write an agent's episodes as JSONL chats (hints, reviews) for fine-tuning",
    )
    chat.add_argument("path", type=Path, metavar="PATH")
    chat.add_argument("--out", type=Path, default=None, help="JSONL file (default: stdout)")
    chat.add_argument(
        "--memory", type=int, default=3, help="the agent's --memory, to rebuild its prompts"
    )
    chat.add_argument("--round", default=None, help="only this round's episodes")
    add_turns_option(chat)
    chat.set_defaults(run=_cmd_export_chat)


def _cmd_verify(args: argparse.Namespace) -> int:
    from feedbackgym.datasets.verify import quarantine, verify_store

    damaged = verify_store(args.path)
    for file in damaged:
        print(f"damaged: {file}")
    if damaged and args.quarantine:
        for moved in quarantine(args.path, damaged):
            print(f"moved to {moved}")
    print(f"{args.path}: {len(damaged)} damaged file(s)" if damaged else f"{args.path}: all read")
    return 1 if damaged else 0


def _cmd_make(args: argparse.Namespace) -> int:
    from feedbackgym.experts import make_expert_dataset

    path = args.out or default_dataset_path(args.env_id, args.policy)
    store = make_expert_dataset(
        args.env_id,
        path,
        args.episodes,
        policy=args.policy,
        split=args.split,
        seed=args.seed,
        env_kwargs=parse_kwargs(args.kwarg),
        compression=None if args.compression == "none" else args.compression,
        progress=True,
    )
    made = store.episodes(round=args.split)[-args.episodes :]
    successes = sum(bool(m.success) for m in made)
    print(
        f"{path}: {len(made)} {args.policy} episodes ({args.split}), "
        f"{sum(m.length for m in made)} steps, {successes / len(made):.1%} success"
    )
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    from feedbackgym.datasets.errors import DamagedFileWarning, StoreError
    from feedbackgym.datasets.summary import summarize

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DamagedFileWarning)  # listed below instead
        rounds, files = summarize(args.path)
    damaged = f", {len(files.damaged)} damaged" if files.damaged else ""
    print(
        f"{args.path}: {files.hot} segment(s), {files.cold} cold, {files.logs} log(s){damaged}, "
        f"{_bytes(files.size)}"
    )
    for file in files.damaged:
        print(f"damaged, its episodes left out: {file}")
    if not rounds:
        if files.damaged:
            raise StoreError(
                f"no episode in {args.path} can be read "
                f"({len(files.damaged)} damaged file(s), listed above)"
            )
        print("no episodes")
        return 0
    rows = [["task", "round", "episodes", "steps", "success", "phases", "guide", "review", "size"]]
    for r in rounds:
        success = f"{r.successes / r.judged:.1%}" if r.judged else "-"
        phases = ", ".join(f"{p} {n}" for p, n in sorted(r.phases.items())) or "-"
        rows.append(
            [r.task_id, r.round, str(r.episodes), str(r.steps), success, phases]
            + [str(r.guides), str(r.reviews), _bytes(r.size)]
        )
    print(table(rows))
    return 0


def _cmd_prune(args: argparse.Namespace) -> int:
    from feedbackgym.config import RetentionConfig, load_config
    from feedbackgym.datasets.retention import prune

    retention = load_config(args.config).retention if args.config else RetentionConfig()
    plan = prune(args.path, retention, dry_run=args.dry_run)
    print(plan.describe())
    if plan.cold_file is not None:
        print(f"cold file: {plan.cold_file}")
    return 0


def _cmd_gather(args: argparse.Namespace) -> int:
    from feedbackgym.datasets.gathering import gather

    report = gather(args.paths, args.dest)
    print(f"{args.dest}: {report.describe()}")
    return 0


def _cmd_export_chat(args: argparse.Namespace) -> int:
    from feedbackgym.datasets.errors import StoreError
    from feedbackgym.language.chat_export import export_chat

    if not args.path.exists():
        raise StoreError(f"no store at {args.path}")
    count = export_chat(
        args.path, args.out or sys.stdout, memory=args.memory, round=args.round, turns=args.turns
    )
    print(f"{count} episodes written to {args.out or 'stdout'}", file=sys.stderr)
    return 0


def _bytes(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
