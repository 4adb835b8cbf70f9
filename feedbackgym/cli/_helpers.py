"""What the command modules share: argument types, ``--kwarg`` parsing, env lookup, output."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import sys
from collections.abc import Callable, Iterable
from typing import Any

import gymnasium as gym

from feedbackgym.errors import FeedbackGymError
from feedbackgym.rollout import EpisodeResult, summarize

__all__ = [
    "PROGRESS_MIN_EPISODES",
    "SUMMARY_HEADER",
    "CommandError",
    "add_kwarg_option",
    "config_fields",
    "fraction",
    "make_env",
    "parse_kwargs",
    "positive_int",
    "progress",
    "summary_cells",
    "table",
]

SUMMARY_HEADER = ["episodes", "success", "mean return", "mean len", "median len", "subgoals"]
"""The columns :func:`summary_cells` fills (``play`` and ``demo`` print them)."""

PROGRESS_MIN_EPISODES = 20
"""Runs with at least this many episodes show a progress bar on stderr."""


class CommandError(FeedbackGymError):
    """A command-line mistake: reported in one line, exit status 2."""


def arm_type(arms: tuple[str, ...]) -> Callable[[str], str]:
    """An argparse type: an arm name among ``arms``; else one line naming the arm grammar.

    Example:
        >>> arm_type(("shaping",))("shaping")
        'shaping'
    """

    def arm(text: str) -> str:
        from feedbackgym.config import checked_arm
        from feedbackgym.errors import ConfigError

        try:
            return checked_arm(text, arms)
        except ConfigError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return arm


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1.

    Raises:
        argparse.ArgumentTypeError: It is under 1.
    """
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def fraction(text: str) -> float:
    """An argparse type: a number in ``[0, 1]``.

    Raises:
        argparse.ArgumentTypeError: It is outside ``[0, 1]``.
    """
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {value}")
    return value


def config_fields(config_type: type, args: argparse.Namespace, **given: Any) -> dict[str, Any]:
    """The fields of the dataclass ``config_type`` that the flags give by name, ``given`` over them.

    A flag whose destination is named as a field sets it, unless left unset
    (``None``: the config's default stays); ``given`` sets the fields whose flags
    are named otherwise, or computed.

    Example:
        >>> @dataclasses.dataclass
        ... class Settings:
        ...     seed: int = 0
        ...     epochs: int = 3
        ...     out_dir: str = "runs/x"
        >>> args = argparse.Namespace(seed=4, epochs=None, out="runs/y", verbose=True)
        >>> Settings(**config_fields(Settings, args, out_dir=args.out))
        Settings(seed=4, epochs=3, out_dir='runs/y')
    """
    named = {field.name for field in dataclasses.fields(config_type)}
    values = {name: value for name, value in vars(args).items() if name in named}
    return {**{k: v for k, v in values.items() if v is not None}, **given}


def add_kwarg_option(parser: argparse.ArgumentParser) -> None:
    """Adds the repeatable ``--kwarg KEY=VALUE``: env keyword arguments for :func:`parse_kwargs`."""
    parser.add_argument(
        "--kwarg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env keyword argument (VALUE parsed as JSON when it can be), repeatable",
    )


def add_turns_option(parser: argparse.ArgumentParser) -> None:
    """Adds ``--turns delta|full``: what a later user turn of an episode's chat carries."""
    parser.add_argument(
        "--turns",
        choices=("delta", "full"),
        default="delta",
        help="later user turns: the observation's new lines (delta, default) or all of it",
    )


def parse_kwargs(pairs: Iterable[str]) -> dict[str, Any]:
    """Turns ``--kwarg KEY=VALUE`` arguments into keyword arguments.

    Example:
        >>> parse_kwargs(["difficulty=hard", "max_steps=40", 'tags=["a"]'])
        {'difficulty': 'hard', 'max_steps': 40, 'tags': ['a']}

    Raises:
        CommandError: A pair lacks ``=`` or a key.
    """
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CommandError(f"--kwarg expects KEY=VALUE, got {pair!r}")
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    return kwargs


def make_env(env_id: str, kwargs: dict[str, Any]) -> gym.Env[Any, Any]:
    """``gym.make(env_id, **kwargs)``, with the mistakes a user makes as one-line errors.

    Raises:
        CommandError: The id is not registered (close ids are suggested), or
            the env takes no such keyword argument.
    """
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise CommandError(f"unknown env id {env_id!r}{hint} (`feedbackgym envs` lists them)")
    try:
        return gym.make(env_id, **kwargs)
    except TypeError as error:
        raise CommandError(f"bad keyword argument for {env_id}: {error}") from error


def progress(total: int, desc: str) -> Any:
    """Returns a wrapper that shows a progress bar for long runs when tqdm is installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        return iter
    disable = total < PROGRESS_MIN_EPISODES
    return lambda it: tqdm(it, total=total, desc=desc, file=sys.stderr, disable=disable)


def summary_cells(results: list[EpisodeResult]) -> list[str]:
    """A policy's episodes as the cells under :data:`SUMMARY_HEADER`."""
    s = summarize(results)
    return [
        f"{s['episodes']:.0f}",
        f"{s['success_rate']:.1%}",
        f"{s['mean_return']:.2f}",
        f"{s['mean_length']:.1f}",
        f"{s['median_length']:.1f}",
        f"{s['subgoal_fraction']:.1%}",
    ]


def table(rows: list[list[str]]) -> str:
    """A Markdown table; the first row is the header.

    Example:
        >>> print(table([["env", "success"], ["ops", "100.0%"]]))
        | env | success |
        |-----|---------|
        | ops | 100.0%  |
    """
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in rows
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)
