"""A CleanRL-style PPO in plain torch that consumes the feedback stack at the speed of the envs.

It trains over a Gymnasium vector env (in-process, or subprocess workers) of
the arm's stack, each env seen through
:class:`~feedbackgym.training.common.trainer_view.TrainerView`: one flat
``float32`` observation (the text, if used, as byte codes read by an
embedding) and an info of two keys, so neither the vector env nor the learner
handles per-key dicts. Actor and critic are separate MLPs (as SB3's
``MultiInputPolicy`` with ``net_arch=[h, h]``); the feedback config's critic-only
fields (:meth:`~feedbackgym.config.FeedbackConfig.critic_fields`: the reviews by
default) reach the critic alone. With ``review_credit`` on, review credit is added
to the rewards of the round's steps before the advantages are computed, as the SB3
path does. Each iteration is a round: the run's
:class:`~feedbackgym.control.FeedbackController` takes the last round's trend
(``loss``, ``mean_return``, ``success``) and pushes the round's feedback state
to every env. It runs on CUDA when asked (``device="auto"`` and a GPU), else
on the CPU with one torch thread.

:func:`train` is the loop alone (what an experiment script calls);
:mod:`~.run_torch` adds the run directory (TensorBoard,
validation, checkpoints, resume, recording) that ``feedbackgym train`` and
``feedbackgym compare --trainer torch`` use.

Usage::

    python -m feedbackgym.training.torch_ppo.ppo --env feedbackgym/OpsIncidentEasy-v0 \
        --arm guide-then-review+shaping
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np

from feedbackgym.config import FeedbackConfig
from feedbackgym.control import FeedbackController
from feedbackgym.errors import requires_extra
from feedbackgym.training.common.device import resolve_device
from feedbackgym.training.common.system_metrics import SystemMonitor
from feedbackgym.training.common.trainer_view import trainer_env
from feedbackgym.training.torch_ppo.learner import Learner, Rollout
from feedbackgym.training.torch_ppo.network import Agent, AnyAgent, FusedPolicy
from feedbackgym.training.torch_ppo.ppo_config import PPOConfig, learning_rate_at, make_vector_env

with requires_extra("baselines", "torch"):
    import torch

__all__ = [
    "Agent",
    "FusedPolicy",
    "Learner",
    "PPOConfig",
    "RoundResult",
    "Rollout",
    "make_vector_env",
    "resolve_device",
    "round_trend",
    "start_learner",
    "train",
    "train_rounds",
]


def round_trend(losses: dict[str, float] | None, collected: dict[str, float]) -> dict[str, float]:
    """What a round reports to the controller: its loss, its episodes' mean return and success.

    ``losses`` is ``None`` when no update has finished yet (an overlapped first round).
    """
    trend = {k: v for k, v in collected.items() if k != "episodes"}
    return trend if losses is None else {"loss": losses["loss"], **trend}


@dataclass(frozen=True)
class RoundResult:
    """A round of :func:`train_rounds`, trained on.

    Attributes:
        index: The round.
        learning_rate: Its learning rate.
        collected: What :meth:`Learner.collect` returned for it.
        losses: Its update's mean losses.
        trend: What it reported to the controller (the last round: would report).
        seen: What ``seen()`` returned right after the round was collected.
    """

    index: int
    learning_rate: float
    collected: dict[str, float]
    losses: dict[str, float]
    trend: dict[str, float]
    seen: Any


def train_rounds(
    learner: Learner,
    controller: Any,
    first_round: int,
    seen: Callable[[], Any] = lambda: None,
) -> Generator[RoundResult, None, None]:
    """Collects and trains rounds ``first_round`` to the last; yields each once trained on.

    The controller must be on ``first_round`` already; each next round's state
    is set from the round's trend before that round is collected. Without an
    update worker a round is collected after the consumer has handled the one
    before (``collect, update, report, yield``); with one, round ``r + 1`` is
    collected while round ``r`` trains, from the trend of round ``r``'s
    collection and round ``r - 1``'s loss.

    While it runs, the objects that exist when it starts (torch's, the
    envs', the agent's) are left out of the garbage collector's passes
    (:func:`gc.freeze`): each full pass would walk every one of them again
    (~300,000 in a trainer, ~160 ms a pass), for no garbage. They are
    put back when it ends or is closed (a consumer that keeps it after an
    error should close it). If objects are frozen already when it starts,
    that freeze is the caller's, and left as it is.

    Args:
        learner: The learner (reset).
        controller: The run's :class:`~feedbackgym.control.FeedbackController`.
        first_round: The round to start at.
        seen: Called right after each round's collection; its value is the
            round's :attr:`RoundResult.seen` (e.g. the envs' feedback counts).
    """
    config = learner.config
    overlap = config.overlap_update
    owner = not gc.get_freeze_count()  # a freeze already held (the caller's) is left as it is
    if owner:
        gc.freeze()
    try:
        collected, observed = learner.collect(), seen()
        losses_before: dict[str, float] | None = None
        for round_ in range(first_round, config.rounds):
            last = round_ + 1 >= config.rounds
            learning_rate = learning_rate_at(config, round_)
            learner.start_update(learning_rate)
            if overlap and not last:
                trend = round_trend(losses_before, collected)
                controller.update(round_ + 1, **trend)
                following = learner.collect(), seen()
            losses = learner.finish_update()
            if not overlap or last:
                trend = round_trend(losses, collected)
                if not last:
                    controller.update(round_ + 1, **trend)
            yield RoundResult(round_, learning_rate, collected, losses, trend, observed)
            if last:
                return
            if not overlap:
                following = learner.collect(), seen()
            (collected, observed), losses_before = following, losses
    finally:
        if owner:
            gc.unfreeze()


def train(
    config: PPOConfig,
    *,
    on_round: Callable[[int, dict[str, float]], None] | None = None,
    record: Any = None,
) -> tuple[AnyAgent, list[dict[str, float]]]:
    """Trains PPO on the arm's stack; returns the agent and one metrics dict per round.

    With ``record`` (a :class:`~feedbackgym.datasets.TrajectoryStore` or its path)
    every training episode is recorded there.

    A round's metrics: the losses, mean return and success of the episodes that
    ended in it, their count, the guide and review weights, and the system
    metrics of :class:`~feedbackgym.training.common.system_metrics.SystemMonitor` (CPU, memory,
    ``steps_per_s``;
    GPU memory and utilisation on CUDA).
    """
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    device = resolve_device(config.device)
    history: list[dict[str, float]] = []
    learner, controller = start_learner(config, device, record=record)
    system = SystemMonitor()  # from here: building the envs is not a round's
    try:
        if config.bc_episodes:
            clone_into(learner.agent, config, controller.config, device)
        for done in train_rounds(learner, controller, 0, seen=lambda: controller.state):
            metrics = {
                **done.losses,
                "mean_return": done.collected.get("mean_return", float("nan")),
                "episodes": done.collected["episodes"],
                "guide_weight": done.seen.guide_weight,
                "review_weight": done.seen.review_weight,
                **system.sample(steps=(done.index + 1) * config.n_envs * config.n_steps),
            }
            history.append(metrics)
            if on_round is not None:
                on_round(done.index, metrics)
    finally:
        learner.close()
        learner.envs.close()
    return learner.agent, history


def start_learner(
    config: PPOConfig, device: torch.device, *, record: Any = None
) -> tuple[Learner, FeedbackController]:
    """A learner on new envs, reset, and the arm's controller attached to them at round 0.

    What every torch training loop starts with (:func:`train`, benchmarks);
    on an error the envs are closed.

    Args:
        config: The run's settings.
        device: Where the agent lives.
        record: A store (or its path) to record every training episode in.

    Returns:
        The learner (its :attr:`Learner.envs` are the new envs) and the
        :class:`~feedbackgym.control.FeedbackController`.

    Example:
        >>> config = PPOConfig("feedbackgym/OpsIncidentEasy-v0", n_envs=2, n_steps=8)
        >>> learner, controller = start_learner(config, torch.device("cpu"))
        >>> learner.next_obs.shape[0], controller.state.round
        (2, 0)
        >>> learner.envs.close()
    """
    controller = config.controller()
    envs = make_vector_env(config, controller.config, record=record)
    try:
        learner = Learner(config, envs, controller.config, device)
        controller.attach(envs)
        learner.reset(config.seed)
        controller.update(0)
    except BaseException:
        envs.close()
        raise
    return learner, controller


def clone_into(
    agent: AnyAgent, config: PPOConfig, feedback: FeedbackConfig, device: torch.device
) -> float:
    """Behaviour-clones ``config.bc_episodes`` expert episodes into ``agent``; returns the loss."""
    from feedbackgym.training.common.cloning import collect_expert, fit_log_prob

    env = trainer_env(
        config.env_id, feedback, config.text_columns, masks=config.masks, **config.env_kwargs
    )
    try:
        observations, actions = collect_expert(env, config.bc_episodes, config.seed)
    finally:
        env.close()

    def log_prob(obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return agent.act(obs, act)[1]

    return fit_log_prob(
        log_prob, agent.parameters(), observations, actions, device=str(device), seed=config.seed
    )


def main(argv: list[str] | None = None) -> None:
    """Command line: train and print one line per round."""
    parser = argparse.ArgumentParser(description="CleanRL-style PPO over the feedback stack")
    parser.add_argument("--env", dest="env_id", default="feedbackgym/OpsIncidentEasy-v0")
    parser.add_argument("--arm", default="guide-then-review+shaping")
    parser.add_argument("--steps", dest="total_steps", type=int, default=50_000)
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--use-text", action="store_true")
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="feedback config (YAML or TOML) to follow: edits apply at the next round",
    )
    args = parser.parse_args(argv)
    env_kwargs = {"obs_mode": "both"} if args.use_text else {}
    config = PPOConfig(
        env_id=args.env_id,
        arm=args.arm,
        total_steps=args.total_steps,
        n_envs=args.n_envs,
        seed=args.seed,
        use_text=args.use_text,
        device=args.device,
        feedback_file=args.config,
        env_kwargs=env_kwargs,
    )
    start = time.perf_counter()

    def report(round_: int, metrics: dict[str, float]) -> None:
        print(
            f"round {round_}: " + " ".join(f"{k}={v:.3f}" for k, v in metrics.items()), flush=True
        )

    train(config, on_round=report)
    print(f"device {resolve_device(config.device)}, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
