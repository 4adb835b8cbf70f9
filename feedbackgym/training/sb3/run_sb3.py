"""One training run of one arm: SB3 PPO with the feedback stack, validation, checkpoints, resume.

The run's :class:`~feedbackgym.control.FeedbackController` decides the feedback
of every round for the training envs and the validation env alike. Its files
are described in :mod:`feedbackgym.training.common.run_files`: ``state.json`` holds the
last completed round, its timestep count, the best round, the controller's
state, and the trend of a round trained on but not yet reported (what
``--resume`` restores); with ``record=True``, ``trajectories/`` holds every
training episode, with its hints, reviews, feedback state and the switch time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from feedbackgym.config import FeedbackConfig
from feedbackgym.errors import requires_extra
from feedbackgym.training.common.device import resolve_device
from feedbackgym.training.common.round_book import RoundBook
from feedbackgym.training.common.run_files import (
    CURVE_FIELDS,
    best_checkpoint,
    prepare_run_dir,
    read_curve,
)
from feedbackgym.training.common.run_settings import (
    DEFAULT_NET_ARCH,
    RunConfig,
    close_run,
    in_worker_processes,
    open_store,
)
from feedbackgym.training.common.trainer_names import Progress, RunState
from feedbackgym.training.common.validation import Policy, validation_envs
from feedbackgym.training.workers.env_groups import steps_slowly
from feedbackgym.wrappers.stack import make

with requires_extra("baselines", "stable_baselines3"):
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor

from feedbackgym.training.sb3.callbacks import feedback_callbacks
from feedbackgym.training.sb3.drive_controller import DriveController

__all__ = [
    "CURVE_FIELDS",
    "DEFAULT_NET_ARCH",
    "RunConfig",
    "read_curve",
    "rollback",
    "train_sb3_run",
]


@dataclass(frozen=True)
class LinearDecay:
    """A learning rate falling linearly from ``initial`` to 0 (SB3 schedule: progress left).

    Example:
        >>> LinearDecay(3e-4)(1.0), LinearDecay(3e-4)(0.25)
        (0.0003, 7.5e-05)
    """

    initial: float

    def __call__(self, progress_remaining: float) -> float:
        return self.initial * progress_remaining


class _RoundCallback(BaseCallback):
    """Closes each round through a round book once PPO has trained on it.

    The book is a :class:`~feedbackgym.training.common.round_book.RoundBook`.

    SB3 calls ``_on_rollout_end`` before that update, so a checkpoint saved
    there would lack it, and a run resumed from it would never get it: the
    round is closed at the next rollout start, or at the end of training.
    """

    def __init__(self, book: RoundBook, drive: DriveController) -> None:
        super().__init__()
        self.book = book
        self.drive = drive
        self._trained: int | None = None
        """The round whose rollout PPO is training on, until its work is done."""

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self._trained = self.drive.controller.round

    def _on_rollout_start(self) -> None:
        self._finish_round(reported=True)  # DriveController has reported the round's trend

    def _on_training_end(self) -> None:
        self._finish_round(reported=False)
        self.logger.dump(self.num_timesteps)  # SB3 dumps before training: the last round's logs

    def _finish_round(self, *, reported: bool) -> None:
        finished, self._trained = self._trained, None
        if finished is None:
            return
        self.book.finish(
            finished,
            timesteps=int(self.model.num_timesteps),
            save=self.model.save,
            policy=_sampled_policy(self.model),
            pending_report=None if reported else self.drive.trend(),
            log=self.logger.record,
        )


def _sampled_policy(model: BaseAlgorithm) -> Policy:
    """The model's policy for validation: the envs' observations, batched, to actions, sampled.

    A masked model's validation envs add their masks to the observations
    (:class:`~.entity_policy.MaskInObservation`), and its actions honour them.
    """

    def policy(observations: list[Any]) -> list[int]:
        if isinstance(model, MaskablePPO):
            from feedbackgym.training.sb3.entity_policy import masked_predict

            return [int(action) for action in masked_predict(model, observations)]
        batch = {key: np.stack([obs[key] for obs in observations]) for key in observations[0]}
        actions, _ = model.predict(batch, deterministic=False)
        return [int(action) for action in actions]

    return policy


def algorithm(config: RunConfig) -> Any:
    """The run's SB3 algorithm: ``MaskablePPO`` for the entity policy, else ``PPO``."""
    return MaskablePPO if config.policy == "entity" else PPO


def _make_vec_env(config: RunConfig, feedback: FeedbackConfig, store: Any, *, seed: int) -> Any:
    """The training envs (env ``i`` seeded with ``seed + i``), recording to ``store`` if given.

    ``store`` is a shared TrajectoryStore, or its path for subprocess workers
    (and Ray actors), which then each write their own shard. With
    ``env_backend="ray"`` the envs live in Ray actors
    (:class:`~feedbackgym.training.workers.ray_vec_env.RayVecEnv`).
    """

    def build() -> Any:
        return make(config.env_id, feedback, record=store, **config.env_kwargs)

    if config.env_backend == "ray":  # the envs in Ray actors over the cluster's nodes
        from feedbackgym.training.workers.ray_actors import actor_layout
        from feedbackgym.training.workers.ray_vec_env import RayVecEnv

        slow = steps_slowly(config.env_id)
        actors, _ = actor_layout(config.n_envs, config.env_workers, slow=slow)
        venv: Any = RayVecEnv([build] * config.n_envs, actors, num_cpus=config.env_actor_cpus)
    else:
        vec_cls = SubprocVecEnv if in_worker_processes(config) else DummyVecEnv
        venv = vec_cls([build] * config.n_envs)
    venv.seed(seed)
    monitor = VecMonitor(venv, info_keywords=("is_success",))
    if config.time_limit_terminal:
        from feedbackgym.training.sb3.vec_wrappers import TimeLimitAsTerminal

        return TimeLimitAsTerminal(monitor)
    return monitor


def train_sb3_run(
    config: RunConfig, *, resume: bool = False, progress: Progress = None
) -> RunState:
    """Trains one run with SB3's PPO.

    Arguments and result as :class:`~feedbackgym.training.common.trainer_names.TrainRun`.
    """
    device = str(resolve_device(config.device))
    state = prepare_run_dir(config, resume=resume, rounds=config.rounds)
    if state.get("finished"):
        return state["state"]
    first_round = state.get("round", -1) + 1
    run_dir = Path(config.out_dir)
    controller = config.controller()
    feedback = controller.config  # the stack as it starts; edits reach it through the controller
    store = open_store(config)
    venv = None
    eval_envs: list[Any] = []
    try:
        venv = _make_vec_env(
            config, feedback, store, seed=config.seed + max(first_round, 0) * config.n_envs
        )
        if first_round > 0:
            model = algorithm(config).load(
                run_dir / "checkpoints" / f"round_{first_round - 1:04d}.zip",
                env=venv,
                device=device,
            )
            model.set_random_seed(config.seed + first_round)  # not the first round's draws again
        else:
            model = algorithm(config)(
                _policy(config),
                venv,
                n_steps=config.n_steps,
                batch_size=min(config.batch_size, config.n_steps * config.n_envs),
                n_epochs=config.n_epochs,
                learning_rate=LinearDecay(config.learning_rate)
                if config.anneal_lr
                else config.learning_rate,
                ent_coef=config.ent_coef,
                gamma=feedback.shaping.gamma,
                policy_kwargs=_policy_kwargs(config, venv, feedback.critic_fields()),
                tensorboard_log=str(run_dir / "tb"),
                seed=config.seed,
                device=device,
            )
            if config.bc_episodes:
                from feedbackgym.training.common.cloning import clone_expert

                expert_env = config.make_env(feedback)
                try:
                    clone_expert(model.policy, expert_env, config.bc_episodes, seed=config.seed)
                finally:
                    expert_env.close()
        eval_envs = [_eval_env(config, feedback) for _ in range(validation_envs(config))]
        # The training envs too, before the state is restored: SB3 resets them when learning
        # starts, and their first episodes then play the restored curriculum width.
        for env in (venv, *eval_envs):
            controller.attach(env)
        if "controller" in state:  # resumed: the switch, the trend and the alert as they were
            controller.load_state_dict(state["controller"])
        book = RoundBook(config, controller, eval_envs, suffix=".zip", progress=progress)
        callbacks = feedback_callbacks(
            controller,
            review_credit=config.review_credit,
            first_round=max(first_round, 0),
            resume_report=state.get("pending_report"),
            on_round=lambda _, metrics: book.add_replayed(metrics.get("replayed_steps", 0.0)),
        )
        drive = callbacks.callbacks[0]
        assert isinstance(drive, DriveController)
        if first_round == 0 and config.bc_episodes:
            book.validate_clone(_sampled_policy(model))
        rounds = _RoundCallback(book, drive)
        remaining = (config.rounds - max(first_round, 0)) * config.n_envs * config.n_steps
        if remaining > 0:
            model.learn(
                remaining,
                callback=CallbackList([callbacks, rounds]),
                reset_num_timesteps=first_round <= 0,
                tb_log_name=f"{config.arm}_seed{config.seed}",
            )
    finally:
        closed = close_run(config, controller, [venv, *eval_envs], store)
    return closed


def _policy(config: RunConfig) -> Any:
    """The SB3 policy class of the run's policy."""
    if config.policy == "entity":
        from feedbackgym.training.sb3.entity_policy import EntityPolicy

        return EntityPolicy
    from feedbackgym.training.sb3.critic_inputs import CriticInputsPolicy

    return CriticInputsPolicy


def _policy_kwargs(config: RunConfig, venv: Any, critic_fields: tuple[str, ...]) -> dict[str, Any]:
    """The policy's settings: the envs' entity layout or the MLP's layers; the critic's keys."""
    assert config.net_arch is not None  # resolved by RunConfig
    if config.policy == "entity":
        from feedbackgym.training.sb3.entity_policy import entity_policy_kwargs

        return entity_policy_kwargs(venv, hidden=config.net_arch[0], critic_fields=critic_fields)
    return {"net_arch": list(config.net_arch), "critic_fields": critic_fields}


def _eval_env(config: RunConfig, feedback: FeedbackConfig) -> Any:
    """A validation env; a masked policy's shows the masks in its observations."""
    env = config.make_eval_env(feedback)
    if config.policy != "entity":
        return env
    from feedbackgym.training.sb3.entity_policy import MaskInObservation

    return MaskInObservation(env)


def rollback(run_dir: str | Path) -> BaseAlgorithm:
    """Loads the run's best checkpoint (by validation success): the rollback target.

    ``MaskablePPO`` where the run trained the entity policy, else ``PPO``.

    Raises:
        FileNotFoundError: The run has no best checkpoint yet.
    """
    config = RunConfig.from_json((Path(run_dir) / "config.json").read_text())
    return algorithm(config).load(best_checkpoint(run_dir, ".zip"), device="cpu")
