"""The flags every training command shares (``compare``, ``train``), and what they override."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from feedbackgym.cli._helpers import fraction, parse_kwargs, positive_int
from feedbackgym.config import ExploreConfig, RelianceConfig
from feedbackgym.core import HINT_LEVELS
from feedbackgym.training.common.trainer_names import DEFAULT_TRAINER, POLICIES, TRAINERS
from feedbackgym.training.common.update_presets import (
    DEFAULT_PRESET,
    UPDATE_PRESETS,
    preset_settings,
)
from feedbackgym.training.workers.env_groups import ENV_BACKENDS
from feedbackgym.wrappers.shaping import TERMINAL_MODES

__all__ = ["add_run_arguments", "feedback_overrides", "given_sections", "run_settings"]

_RELIANCE = RelianceConfig()
"""The reliance rule's defaults live in the config, for the help text."""
_EXPLORE = ExploreConfig()
"""The exploration bonus's defaults live in the config, for the help text."""


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the run flags: trainer, device, feedback config and its overrides, recording."""
    parser.add_argument(
        "--trainer",
        choices=TRAINERS,
        help=f"the torch trainer or SB3's PPO (default {DEFAULT_TRAINER})",
    )
    parser.add_argument(
        "--policy",
        choices=POLICIES,
        help="entity: attention over the env's entities, a pointer head and action masks (SB3: "
        "MaskablePPO); mlp: an MLP over the flat observation (default: entity where the env "
        "declares an entity view, as OpsIncident-v1 and v2 do; else mlp)",
    )
    parser.add_argument("--device", help="auto (CUDA when present), cuda or cpu (default auto)")
    parser.add_argument(
        "--env-workers",
        type=int,
        metavar="N",
        help="torch trainer: worker processes that step the envs while the learner acts "
        "(default 0: in the learner's process, or for web and code envs one per env up to 4; "
        "1 is fastest on 2 cores for one ops run)",
    )
    parser.add_argument(
        "--env-backend",
        choices=ENV_BACKENDS,
        help="where the training envs live: on this machine (default) or in Ray actors spread "
        "over the cluster's nodes, --env-workers of them (default 2, 4 for web and code envs; "
        "needs the ray extra)",
    )
    parser.add_argument(
        "--env-actor-cpus",
        type=float,
        metavar="N",
        help="CPUs each env actor asks for with --env-backend ray (default 1)",
    )
    parser.add_argument(
        "--overlap-update",
        action="store_true",
        default=None,
        help="torch trainer: train each round in a worker process while the next is "
        "collected with the weights before that update (one update stale)",
    )
    parser.add_argument(
        "--preset",
        choices=sorted(UPDATE_PRESETS),
        help=f"rollout and update settings (default {DEFAULT_PRESET}: "
        f"{_preset_text(DEFAULT_PRESET)}; sb3: {_preset_text('sb3')}, SB3's update, for "
        "trainer-against-trainer comparisons); the five flags below override it",
    )
    parser.add_argument("--n-envs", type=positive_int, metavar="N", help="parallel envs per run")
    parser.add_argument("--n-steps", type=positive_int, metavar="N", help="steps per env per round")
    parser.add_argument(
        "--epochs", type=positive_int, metavar="N", help="passes over each round's rollout"
    )
    parser.add_argument(
        "--batch-size", type=positive_int, metavar="N", help="samples per minibatch"
    )
    parser.add_argument("--learning-rate", type=float, metavar="LR", help="Adam's step size")
    parser.add_argument(
        "--ent-coef",
        type=float,
        metavar="C",
        help="PPO's entropy coefficient (default: the policy's, 0.03 entity, 0.01 mlp)",
    )
    parser.add_argument(
        "--bc-episodes", type=int, metavar="N", help="behaviour-cloning warm-up (default 0)"
    )
    parser.add_argument(
        "--restart-demos",
        type=int,
        metavar="N",
        help="restart training episodes backwards along N expert episodes (the ones "
        "--bc-episodes clones), moving each start back as success from it rises",
    )
    parser.add_argument(
        "--eval-every",
        type=positive_int,
        metavar="ROUNDS",
        help="rounds between validations (default: about 15 a run for compare, 4 for train; "
        "a run's last round is always validated)",
    )
    parser.add_argument(
        "--eval-episodes",
        type=positive_int,
        metavar="N",
        help="held-out seeds each validation plays (default 30; 16 with compare --quick): "
        "fewer for slow envs, whose validations can cost more steps than the training",
    )
    parser.add_argument("--kwarg", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="feedback config (YAML or TOML) the run(s) follow: edits apply at the next round; "
        "the flags below override it",
    )
    parser.add_argument(
        "--fixed-switch", action="store_true", help="no adaptive switch (default: return trend)"
    )
    parser.add_argument(
        "--min-success",
        type=fraction,
        help="hold the guide while training success is under this (default 0.3; 0: off)",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        default=None,
        help="record every training episode (HDF5 store)",
    )
    parser.add_argument(
        "--switch-at", type=fraction, help="where the fade starts, as a fraction (default 0.4)"
    )
    parser.add_argument("--fade", type=float, help="fade length in rounds (default: 10%%)")
    parser.add_argument("--dropout", type=fraction, help="hint dropout (default 0.5)")
    parser.add_argument(
        "--dropout-scope", choices=("step", "episode"), help="what dropout withholds"
    )
    add_level_argument(parser)
    parser.add_argument(
        "--reliance-rule",
        action="store_true",
        help="let each validation's hint reliance move the dropout (up over "
        f"{_RELIANCE.raise_above}, down under {_RELIANCE.lower_below}, by {_RELIANCE.step}, "
        f"within [{_RELIANCE.min_dropout}, {_RELIANCE.max_dropout}]; a --config file's "
        "reliance section sets these) (default: fixed dropout)",
    )
    parser.add_argument(
        "--shaping-terminal",
        choices=TERMINAL_MODES,
        help="potential of a terminal state (default keep; see ShapeWithSubgoals)",
    )
    parser.add_argument(
        "--gamma",
        type=float,
        help="discount of the learner and of the shaping term (default 0.99)",
    )
    parser.add_argument(
        "--explore-scale",
        type=float,
        metavar="BETA",
        help="the explore arms' count-based exploration bonus β, paid as β/√n on the n-th "
        f"visit of a state's hash code (default {_EXPLORE.scale}; other arms have none)",
    )
    parser.add_argument(
        "--keep-checkpoints",
        type=int,
        help="newest round checkpoints kept per run (default 5; 0: every one)",
    )
    parser.add_argument(
        "--anneal-lr",
        action="store_true",
        default=None,
        help="decay PPO's learning rate linearly to 0 over each run (default: constant)",
    )
    parser.add_argument(
        "--review-credit",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="review arms: add the reviews' per-step credit to the rewards the learner trains "
        "on (default: off; it changes the objective at the switch to reviews)",
    )
    parser.add_argument(
        "--time-limit-terminal",
        action="store_true",
        default=None,
        help="treat episodes cut off by the time limit as ended, not bootstrapped (default: "
        "bootstrapped, SB3's way)",
    )


def _preset_text(name: str) -> str:
    """A preset's settings in a few words, for the help text."""
    p = UPDATE_PRESETS[name]
    return (
        f"{p.n_envs} envs x {p.n_steps} steps, {p.n_epochs} epochs of {p.batch_size}, "
        f"lr {p.learning_rate:g}"
    )


def run_settings(
    args: argparse.Namespace, defaults: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The run config's fields that the run flags give, over ``defaults``.

    The one mapping from ``compare``'s and ``train``'s flags to
    :class:`~feedbackgym.training.common.run_settings.RunConfig`'s fields. A flag
    not given leaves the field to ``defaults`` (``compare --quick``'s), else to the
    config's default. A ``--preset`` gives its five settings; their own flags go over
    it. ``--kwarg`` and the feedback flags go over the defaults' ``env_kwargs`` and
    ``feedback_overrides`` key by key.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_run_arguments(parser)
        >>> run_settings(parser.parse_args(["--eval-episodes", "5", "--record"]))
        {'eval_episodes': 5, 'record': True}
        >>> run_settings(parser.parse_args(["--preset", "sb3", "--epochs", "3"]))["n_epochs"]
        3
        >>> quick = {"time_limit_terminal": True, "feedback_overrides": {"guide": {"every": 4}}}
        >>> run_settings(parser.parse_args(["--gamma", "0.9"]), quick)
        {'time_limit_terminal': True, 'feedback_overrides': {'guide': {'every': 4}, \
'shaping': {'gamma': 0.9}}}
    """
    settings = dict(defaults or {})
    settings.update(preset_settings(args.preset) if args.preset else {})
    flags = {
        "n_envs": args.n_envs,
        "n_steps": args.n_steps,
        "n_epochs": args.epochs,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "ent_coef": args.ent_coef,
        "keep_checkpoints": args.keep_checkpoints,
        "eval_every": args.eval_every,
        "eval_episodes": args.eval_episodes,
        "bc_episodes": args.bc_episodes,
        "restart_demos": args.restart_demos,
        "feedback_file": args.config,
        "record": args.record,
        "anneal_lr": args.anneal_lr,
        "time_limit_terminal": args.time_limit_terminal,
        "review_credit": args.review_credit,
        "trainer": args.trainer,
        "policy": args.policy,
        "device": args.device,
        "env_workers": args.env_workers,
        "env_backend": args.env_backend,
        "env_actor_cpus": args.env_actor_cpus,
        "overlap_update": args.overlap_update,
    }
    settings.update({name: value for name, value in flags.items() if value is not None})
    env_kwargs = parse_kwargs(args.kwarg)
    if env_kwargs:
        settings["env_kwargs"] = {**settings.get("env_kwargs", {}), **env_kwargs}
    overrides = {
        section: dict(values) for section, values in settings.get("feedback_overrides", {}).items()
    }
    for section, values in feedback_overrides(args).items():
        overrides[section] = {**overrides.get(section, {}), **values}
    if overrides:
        settings["feedback_overrides"] = overrides
    return settings


def given_sections(flags: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The config sections of ``flags`` (``{section: {field: value}}``) with a value given.

    Example:
        >>> given_sections({"guide": {"every": None}, "shaping": {"gamma": 0.9, "scale": None}})
        {'shaping': {'gamma': 0.9}}
    """
    overrides: dict[str, Any] = {}
    for section, values in flags.items():
        given = {name: value for name, value in values.items() if value is not None}
        if given:
            overrides[section] = given
    return overrides


def add_level_argument(parser: argparse.ArgumentParser) -> None:
    """``--level``: what hints and reviews may disclose, part of every result's label."""
    parser.add_argument(
        "--level",
        choices=HINT_LEVELS,
        help="what hints and reviews disclose: phase (default: the kind of next step, only "
        "services the agent has observed), target (the hidden root) or action (the expert's "
        "action, an ablation)",
    )


def feedback_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The feedback config sections the flags set (they override a ``--config`` file).

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_run_arguments(parser)
        >>> feedback_overrides(parser.parse_args(["--gamma", "0.995", "--fixed-switch"]))
        {'schedule': {'adaptive': None}, 'shaping': {'gamma': 0.995}}
    """
    flags = {
        "schedule": {"switch_at": args.switch_at, "fade": args.fade},
        "guide": {
            "dropout": args.dropout,
            "dropout_scope": args.dropout_scope,
            "level": args.level,
        },
        "review": {"level": args.level},
        "shaping": {"terminal": args.shaping_terminal, "gamma": args.gamma},
        "explore": {"scale": args.explore_scale},
    }
    overrides = given_sections(flags)
    if args.fixed_switch:
        overrides.setdefault("schedule", {})["adaptive"] = None
    elif args.min_success is not None:
        overrides.setdefault("schedule", {})["adaptive"] = {"min_success": args.min_success}
    if args.reliance_rule:
        overrides["reliance"] = {}  # on, with the file's settings or the defaults
    return dict(sorted(overrides.items()))
