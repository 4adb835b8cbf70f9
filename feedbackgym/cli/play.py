"""The ``play`` command: play episodes of an env with a built-in policy.

Usage::

    feedbackgym play ID [--policy random|expert] [--episodes N] [--seed S] [--kwarg KEY=VALUE ...]
    feedbackgym play ID --checkpoint RUN/checkpoints/best.pt [--episodes N]

With ``--checkpoint`` it plays a torch run's checkpoint (either policy) on the
env's validation seeds, on its test split where it has one, hints masked, in
the run's feedback stack: what the run's validation does, on any env whose
observation the policy reads (an entity policy trained on easy plays medium).
"""

from __future__ import annotations

import argparse
from typing import Any

from feedbackgym.cli._helpers import (
    SUMMARY_HEADER,
    CommandError,
    add_kwarg_option,
    make_env,
    parse_kwargs,
    positive_int,
    progress,
    summary_cells,
    table,
)
from feedbackgym.rollout import POLICIES, EpisodeResult, run_episodes

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Adds ``play`` to the top-level subparsers ``commands``."""
    play = commands.add_parser("play", help="play episodes with a built-in policy")
    play.add_argument(
        "env_id", metavar="ID", help="a registered id, e.g. feedbackgym/OpsIncident-v1"
    )
    play.add_argument("--policy", choices=POLICIES, default="random")
    play.add_argument(
        "--checkpoint",
        metavar="PATH",
        help="play a torch run's checkpoint (RUN/checkpoints/best.pt) on the env's validation "
        "seeds, test split, hints masked, instead of --policy",
    )
    play.add_argument("--episodes", type=positive_int, default=10)
    play.add_argument("--seed", type=int, default=0, help="seed of the first episode")
    add_kwarg_option(play)
    play.set_defaults(run=_cmd_play)


def _cmd_play(args: argparse.Namespace) -> int:
    if args.checkpoint:
        return _play_checkpoint(args)
    env = make_env(args.env_id, parse_kwargs(args.kwarg))
    results: list[EpisodeResult] = []
    try:
        bar = progress(args.episodes, args.policy)
        for r in run_episodes(env, args.policy, args.episodes, args.seed, progress=bar):
            results.append(r)
            print(
                f"seed {r.seed}: {'success' if r.success else 'failure'} ({r.outcome}) "
                f"return {r.episode_return:.2f} length {r.length} "
                f"subgoals {len(r.subgoals_done)}/{r.subgoals_total}"
                + (f" [{', '.join(r.subgoals_done)}]" if r.subgoals_done else "")
            )
    finally:
        env.close()
    print()
    print(table([["policy", *SUMMARY_HEADER], [args.policy, *summary_cells(results)]]))
    return 0


def _play_checkpoint(args: argparse.Namespace) -> int:
    """``--checkpoint``: the checkpoint's success on the env's validation seeds, hints masked."""
    if args.kwarg:
        raise CommandError("--checkpoint plays the run's env keyword arguments; drop --kwarg")
    make_env(args.env_id, {}).close()  # an unknown id fails here, with suggestions
    from feedbackgym.training.common.entity_network import PolicyMismatchError
    from feedbackgym.training.torch_ppo.run_torch import play_checkpoint

    try:
        evaluation, config = play_checkpoint(args.checkpoint, args.env_id, args.episodes)
    except (FileNotFoundError, PolicyMismatchError) as error:
        raise CommandError(str(error)) from error
    print(
        table(
            [
                ["env", "policy", "arm", "episodes", "success (hints masked)", "return", "length"],
                [
                    config.env_id,
                    str(config.policy),
                    config.arm,
                    str(args.episodes),
                    f"{evaluation.success:.1%}",
                    f"{evaluation.mean_return:.2f}",
                    f"{evaluation.mean_length:.1f}",
                ],
            ]
        )
    )
    return 0
