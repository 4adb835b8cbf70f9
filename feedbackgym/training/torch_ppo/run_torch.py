"""One run of one arm with the torch trainer: the same run directory as the SB3 path.

TensorBoard (``tb/ARM_seedS_1``: ``rollout/``, ``train/``, ``feedback/``,
``system/``), validation with hints shown and masked on the env's held-out
seeds, a checkpoint a round (``checkpoints/round_NNNN.pt``, the best kept as
``best.pt``: the rollback target), ``state.json`` for ``--resume``, recording,
the reward-drop alert and the config file followed through the controller.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from feedbackgym.entity_view import EntityLayout
from feedbackgym.errors import requires_extra
from feedbackgym.protocol import FeedbackState, call_envs
from feedbackgym.training.common.device import resolve_device
from feedbackgym.training.common.entity_network import PolicyMismatchError
from feedbackgym.training.common.feedback_metrics import feedback_metrics
from feedbackgym.training.common.round_book import RoundBook
from feedbackgym.training.common.run_files import (
    best_checkpoint,
    prepare_run_dir,
    tensorboard_dir,
)
from feedbackgym.training.common.run_settings import (
    RunConfig,
    close_run,
    open_store,
)
from feedbackgym.training.common.system_metrics import SystemMonitor
from feedbackgym.training.common.trainer_names import Progress, RunState
from feedbackgym.training.common.trainer_view import TrainerView
from feedbackgym.training.common.validation import (
    Evaluation,
    Policy,
    evaluate_policy,
    validation_envs,
    validation_seeds,
)
from feedbackgym.training.torch_ppo.network import Agent, AnyAgent, build_agent
from feedbackgym.training.torch_ppo.ppo import (
    Learner,
    PPOConfig,
    RoundResult,
    clone_into,
    make_vector_env,
    train_rounds,
)

with requires_extra("baselines", "torch"):
    import torch
    from torch.utils.tensorboard import SummaryWriter

__all__ = [
    "load_agent",
    "play_checkpoint",
    "ppo_config",
    "rollback",
    "sampled_policy",
    "train_torch_run",
]


def ppo_config(config: RunConfig) -> PPOConfig:
    """The torch trainer's settings for a run: every setting the two share, by its name.

    Where the run leaves its env workers to the trainer (``env_workers=0``),
    ``subprocess`` asks for 2, and otherwise the trainer picks
    (:func:`~feedbackgym.training.workers.env_groups.worker_layout`).

    Raises:
        ValueError: ``net_arch`` is not two layers of one width (the torch agent's shape).

    Example:
        >>> run = RunConfig(env_id="feedbackgym/OpsIncidentEasy-v1", arm="shaping", seed=3,
        ...                 total_steps=4096, out_dir="runs/a", n_envs=4, subprocess=True)
        >>> ppo = ppo_config(run)
        >>> ppo.seed, ppo.n_envs, ppo.env_workers, ppo.total_steps
        (3, 4, 2, 4096)
    """
    shared = {f.name for f in fields(PPOConfig)} & {f.name for f in fields(RunConfig)}
    settings = {name: copy.copy(getattr(config, name)) for name in shared}
    settings["env_workers"] = config.env_workers or (2 if config.subprocess else None)
    return PPOConfig(**settings)


def train_torch_run(
    config: RunConfig, *, resume: bool = False, progress: Progress = None
) -> RunState:
    """Trains one run with the torch trainer.

    Arguments and result as :class:`~feedbackgym.training.common.trainer_names.TrainRun`.
    """
    ppo = ppo_config(config)
    device = resolve_device(config.device)
    state = prepare_run_dir(config, resume=resume, rounds=config.rounds)
    if state.get("finished"):
        return state["state"]
    first_round = state.get("round", -1) + 1
    run_dir = Path(config.out_dir)
    torch.manual_seed(config.seed + first_round)  # a resumed run does not redraw round 0's
    controller = config.controller()
    store = open_store(config)
    envs = writer = learner = None
    eval_envs: list[TrainerView] = []
    try:
        envs = make_vector_env(ppo, controller.config, record=store)
        learner = Learner(ppo, envs, controller.config, device)
        eval_envs = _eval_views(config, ppo, controller.config, validation_envs(config))
        book = RoundBook(config, controller, eval_envs, suffix=".pt", progress=progress)
        if first_round > 0:
            learner.load_state_dict(torch.load(book.checkpoint(first_round - 1), weights_only=True))
        elif config.bc_episodes:
            clone_into(learner.agent, ppo, controller.config, device)
        controller.attach(envs)
        for env in eval_envs:
            controller.attach(env)
        if "controller" in state:  # resumed: the switch, the trend and the alert as they were
            controller.load_state_dict(state["controller"])
        pending = state.get("pending_report")
        if first_round == 0 or pending is not None:
            controller.update(first_round, **(pending or {}))
        writer = SummaryWriter(
            str(tensorboard_dir(run_dir / "tb", f"{config.arm}_seed{config.seed}", first_round))
        )
        _train_rounds(config, ppo, learner, controller, book, writer, first_round, device)
    finally:
        closed = close_run(config, controller, [learner, envs, *eval_envs, writer], store)
    return closed


def _train_rounds(
    config: RunConfig,
    ppo: PPOConfig,
    learner: Learner,
    controller: Any,
    book: RoundBook,
    writer: Any,
    first_round: int,
    device: torch.device,
) -> None:
    """Rounds ``first_round`` to the last: collect, update, report, log, close the round."""
    steps_per_round = config.n_envs * config.n_steps
    system = SystemMonitor(steps=first_round * steps_per_round)
    learner.reset(config.seed + first_round * config.n_envs)
    policy = sampled_policy(learner.agent, device)
    if first_round == 0 and config.bc_episodes:
        book.validate_clone(policy)
    for done in train_rounds(learner, controller, first_round, seen=lambda: _rollout(learner)):
        timesteps = (done.index + 1) * steps_per_round

        def log(tag: str, value: float, step: int = timesteps) -> None:
            writer.add_scalar(tag, value, step)

        book.add_replayed(_log_round(done, controller, log).get("replayed_steps", 0.0))
        for key, value in system.sample(timesteps).items():
            log(f"system/{key}", value)
        last = done.index + 1 >= config.rounds
        book.finish(
            done.index,
            timesteps=timesteps,
            save=lambda path: torch.save(learner.state_dict(), path),
            policy=policy,
            pending_report=done.trend if last else None,
            log=log,
        )


def _eval_views(config: RunConfig, ppo: PPOConfig, feedback: Any, count: int) -> list[TrainerView]:
    """``count`` validation envs of the run's stack (test split), as its policy reads them."""
    return [
        TrainerView(config.make_eval_env(feedback), ppo.text_columns, masks=ppo.masks)
        for _ in range(count)
    ]


def sampled_policy(agent: AnyAgent, device: torch.device) -> Policy:
    """The agent as a validation policy: observations, batched, to sampled actions."""

    def policy(observations: list[Any]) -> list[int]:
        with torch.inference_mode():
            actions, *_ = agent.act(torch.as_tensor(np.stack(observations), device=device))
        return [int(action) for action in actions.tolist()]

    return policy


def _rollout(learner: Learner) -> dict[str, Any]:
    """What a round's logs need of its collection, taken before the next one starts."""
    returns = learner.episode_returns
    return {
        "returns": list(returns),
        "successes": list(learner.episode_successes),
        "credit_applied": learner.buffer.credit_applied,
        "feedback_stats": call_envs(learner.envs, "feedback_stats"),
    }


def _log_round(
    done: RoundResult, controller: Any, log: Callable[[str, float], None]
) -> dict[str, float]:
    """Logs the round's ``rollout/``, ``train/`` and ``feedback/`` scalars (SB3's names).

    Returns:
        The round's ``feedback/`` metrics.
    """
    rollout, losses = done.seen, done.losses
    returns = rollout["returns"]
    if returns:
        log("rollout/ep_rew_mean", float(np.mean(returns)))
        log("rollout/success_rate", float(np.mean(rollout["successes"])))
    log("train/loss", losses["loss"])
    log("train/policy_gradient_loss", losses["policy_loss"])
    log("train/value_loss", losses["value_loss"])
    log("train/entropy_loss", -losses["entropy"])
    log("train/learning_rate", done.learning_rate)
    log("train/credit_applied", float(rollout["credit_applied"]))
    mean_return = float(np.mean(returns)) if returns else None
    metrics = feedback_metrics(controller, rollout["feedback_stats"], mean_return)
    for key, value in metrics.items():
        log(f"feedback/{key}", value)
    return metrics


def rollback(run_dir: str | Path, layout: EntityLayout | None = None) -> AnyAgent:
    """Loads the run's best agent (by validation success): the rollback target.

    Args:
        run_dir: The run directory.
        layout: The entity layout of the env it will play (an entity policy's).

    Raises:
        FileNotFoundError: The run has no best checkpoint yet.
        PolicyMismatchError: An entity policy and no layout, or one of other widths.
    """
    return load_agent(best_checkpoint(run_dir, ".pt"), layout)


def load_agent(path: str | Path, layout: EntityLayout | None = None) -> AnyAgent:
    """The agent a torch checkpoint (``round_NNNN.pt``, ``best.pt``) holds, in eval mode.

    Raises:
        FileNotFoundError: No such file.
        PolicyMismatchError: An entity policy and no layout, or one of other widths.
    """
    checkpoint = torch.load(Path(path), weights_only=True)
    agent = build_agent(checkpoint["shape"], layout)
    try:
        agent.load_state_dict(checkpoint["agent"])
    except RuntimeError as error:  # an architecture other than today's
        first = str(error).splitlines()[1:2] or [str(error)]
        raise PolicyMismatchError(
            f"{path}: the weights do not fit today's {agent.shape.get('policy', 'mlp')} policy "
            f"({first[0].strip()})"
        ) from error
    return agent.eval()


def play_checkpoint(
    checkpoint: str | Path, env_id: str | None = None, episodes: int = 30
) -> tuple[Evaluation, RunConfig]:
    """Plays a torch checkpoint on an env's validation seeds, hints masked: what validation does.

    The checkpoint's run (``config.json`` two folders up) gives the arm, the
    feedback and the env's keyword arguments; ``env_id`` plays another env
    with the same stack (an entity policy trained on easy plays medium or hard,
    its weights unchanged). Episodes are the env's held-out validation seeds,
    on its test split where it has one.

    Args:
        checkpoint: A ``.pt`` checkpoint of a torch run (``checkpoints/best.pt``, ...).
        env_id: The env to play (default: the run's).
        episodes: Validation seeds to play, one episode each.

    Returns:
        The evaluation (``success`` with no hints shown) and the config played.

    Raises:
        FileNotFoundError: No checkpoint, or no ``config.json`` beside its folder.
        PolicyMismatchError: An entity checkpoint for an env of other widths, or with no view.
    """
    path = Path(checkpoint)
    saved = path.resolve().parent.parent / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint {path}")
    if not saved.is_file():
        raise FileNotFoundError(f"{path}: no config.json in {saved.parent} (a torch run's folder)")
    config = RunConfig.from_json(saved.read_text())
    if env_id is not None and env_id != config.env_id:
        config = dataclasses.replace(config, env_id=env_id, eval_episodes=episodes)
    controller, ppo = config.controller(), ppo_config(config)  # as the run's validation had it
    envs = _eval_views(config, ppo, controller.config, min(episodes, validation_envs(config)))
    try:
        agent = load_agent(path, envs[0].entity_layout())
        width = int(envs[0].observation_space.shape[0])  # type: ignore[index]
        if isinstance(agent, Agent) and agent.shape["obs_size"] != width:
            raise PolicyMismatchError(
                f"{path}: an mlp policy of {agent.shape['obs_size']} input columns cannot read "
                f"{config.env_id}'s {width} (an MLP plays only envs of its training width; the "
                "entity policy plays any preset)"
            )
        seeds = validation_seeds(envs[0], episodes)
        hidden = FeedbackState(phase="none", guide_weight=0.0, review_weight=0.0)
        policy = sampled_policy(agent, torch.device("cpu"))
        return evaluate_policy(envs, policy, seeds, hidden), config
    finally:
        for env in envs:
            env.close()
