"""One training run of one arm: SB3 PPO with the feedback stack, validation, checkpoints, resume.

The run's :class:`~feedbackgym.control.FeedbackController` decides the feedback
of every round for the training envs and the validation env alike. Its files
are described in :mod:`feedbackgym.baselines.rundir`: ``state.json`` holds the
last completed round, its timestep count, the best round, the controller's
state, and the trend of a round trained on but not yet reported (what
``--resume`` restores); with ``record=True``, ``trajectories/`` holds every
training episode, with its hints, reviews, feedback state and the switch time.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from feedbackgym.baselines.arms import ArmFeedback, checked_keep_checkpoints, rounds_for
from feedbackgym.baselines.evaluation import Evaluation, evaluate_policy, validation_seeds
from feedbackgym.baselines.rundir import (
    CURVE_FIELDS,
    append_curve,
    drop_curve_rows_after,
    drop_old_checkpoints,
    read_curve,
    read_state,
    write_state,
)
from feedbackgym.config import FeedbackConfig
from feedbackgym.errors import DependencyNotInstalled
from feedbackgym.wrappers.stack import make

try:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor
except ImportError as error:
    raise DependencyNotInstalled.for_extra("stable_baselines3", "baselines") from error

from feedbackgym.baselines.callbacks import feedback_callbacks
from feedbackgym.baselines.drive import DriveController

__all__ = ["CURVE_FIELDS", "DEFAULT_NET_ARCH", "RunConfig", "read_curve", "rollback", "train_run"]

DEFAULT_NET_ARCH = (128, 128)
"""Hidden layers of the policy and value networks that runs train by default."""


@dataclass
class RunConfig(ArmFeedback):
    """Everything one run needs, stored as ``config.json`` in its directory.

    Attributes:
        env_id: The env to train on.
        arm: The comparison arm (see :mod:`feedbackgym.baselines.arms`).
        seed: The run's seed (training seeds stay below the validation seeds).
        total_steps: Env steps to train for.
        out_dir: The run directory.
        n_envs: Parallel envs.
        n_steps: Steps per env per round (PPO rollout length).
        subprocess: Run the envs in subprocess workers (``SubprocVecEnv``).
        eval_every: Rounds between validations.
        eval_episodes: Validation seeds per validation.
        review_credit: Redistribute review credit into PPO's rollout buffer.
        bc_episodes: Expert episodes for a behaviour-cloning warm-up (0: none).
        learning_rate: PPO's learning rate.
        anneal_lr: Decay the learning rate linearly to 0 over the run (PPO's usual
            schedule for long runs), instead of keeping it constant.
        time_limit_terminal: Treat an episode cut off by its time limit as ended
            rather than bootstrapping its value (see :class:`~.vec_env.TimeLimitAsTerminal`).
        ent_coef: PPO's entropy coefficient.
        net_arch: Hidden layer sizes of the policy and value networks.
        feedback: The feedback config the arm's preset goes on (its
            ``shaping.gamma`` is also PPO's discount, so the two match).
        feedback_file: A YAML/TOML feedback config file to follow instead of
            ``feedback``: edits apply to every env at the next round.
        feedback_overrides: ``{section: {field: value}}`` applied on top of the
            file at every read (command-line flags override the file).
        env_kwargs: Keyword arguments for ``gym.make``.
        record: Record every training episode in ``out_dir/trajectories`` (a
            :class:`~feedbackgym.datasets.TrajectoryStore`; the episodes of round
            ``r`` are under ``/{env_id}/{r}``). Needs the ``hdf5`` extra.
        keep_checkpoints: How many of the newest round checkpoints to keep (0: every
            one). ``best.zip`` is always kept. A checkpoint is about 2 MB with the
            default network, so a 2M-step run that kept every round would hold ~4 GB.
    """

    env_id: str
    arm: str
    seed: int
    total_steps: int
    out_dir: str
    n_envs: int = 8
    n_steps: int = 128
    subprocess: bool = False
    eval_every: int = 4
    eval_episodes: int = 30
    review_credit: bool = True
    bc_episodes: int = 0
    learning_rate: float = 3e-4
    anneal_lr: bool = False
    time_limit_terminal: bool = False
    ent_coef: float = 0.01
    net_arch: list[int] = field(default_factory=lambda: list(DEFAULT_NET_ARCH))
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)
    feedback_file: str | None = None
    feedback_overrides: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    record: bool = False
    keep_checkpoints: int = 5

    def __post_init__(self) -> None:
        checked_keep_checkpoints(self.keep_checkpoints)
        self.arm_config(self.feedback)  # checks the arm and the overrides before the run starts

    @property
    def rounds(self) -> int:
        """Training rounds (PPO rollouts)."""
        return rounds_for(self.total_steps, self.n_envs, self.n_steps)

    def make_env(self, config: FeedbackConfig) -> Any:
        """One env of the run's stack, built from ``config``."""
        return make(self.env_id, config, **self.env_kwargs)

    def to_json(self) -> str:
        """The config as JSON."""
        data = asdict(self)
        data["feedback"] = self.feedback.model_dump(mode="json")
        return json.dumps(data, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        """Reads a config written by :meth:`to_json`."""
        data = json.loads(text)
        data["feedback"] = FeedbackConfig.from_mapping(data["feedback"], source="config.json")
        return cls(**data)


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
    """Validates every ``eval_every`` rounds, writes the curve, saves versioned checkpoints.

    A round's work is done once PPO has trained on its rollout (at the next
    rollout start, or at the end of training): SB3 calls ``_on_rollout_end``
    before that update, so a checkpoint saved there would lack it, and a run
    resumed from it would never get it.
    """

    def __init__(
        self,
        config: RunConfig,
        drive: DriveController,
        eval_env: Any,
        progress: Callable[[int], None] | None,
    ) -> None:
        super().__init__()
        self.config = config
        self.drive = drive
        self.controller = drive.controller
        self.report_progress = progress
        self.run_dir = Path(config.out_dir)
        self.eval_env = eval_env
        self.seeds = validation_seeds(self.eval_env, config.eval_episodes)
        state = read_state(self.run_dir)
        self.best = state.get("best_success", -1.0)
        self._trained: int | None = None
        """The round whose rollout PPO is training on, until its work is done."""

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self._trained = self.controller.round

    def _on_rollout_start(self) -> None:
        self._finish_round(reported=True)  # DriveController has reported the round's trend

    def _on_training_end(self) -> None:
        self._finish_round(reported=False)
        self.logger.dump(self.num_timesteps)  # SB3 dumps before training: the last round's logs

    def _finish_round(self, *, reported: bool) -> None:
        finished, self._trained = self._trained, None
        if finished is None:
            return
        checkpoints = self.run_dir / "checkpoints"
        checkpoints.mkdir(parents=True, exist_ok=True)
        self.model.save(checkpoints / f"round_{finished:04d}.zip")
        drop_old_checkpoints(checkpoints, self.config.keep_checkpoints)
        last = finished + 1 >= self.config.rounds
        state = read_state(self.run_dir)
        if finished % self.config.eval_every == 0 or last:
            evaluation = self.validate(finished + 1)
            if evaluation.success > self.best:
                self.best = evaluation.success
                shutil.copyfile(checkpoints / f"round_{finished:04d}.zip", checkpoints / "best.zip")
                state["best_round"] = finished
            state["best_success"] = self.best
        state.update(
            round=finished,
            timesteps=int(self.model.num_timesteps),
            controller=self.controller.state_dict(),
            pending_report=None if reported else self.drive.trend(),
        )
        write_state(self.run_dir, state)
        if self.report_progress is not None:
            self.report_progress(int(self.model.num_timesteps))

    def validate(self, round_: int) -> Evaluation:
        """Evaluates the current policy in round ``round_``'s feedback; appends to the curve."""

        def policy(obs: Any) -> int:
            action, _ = self.model.predict(obs, deterministic=False)
            return int(action)

        controller = self.controller
        state = controller.state if controller.round == round_ else controller.state_at(round_)
        # The policy is sampled (argmax policies loop on repeated inspections), with a fixed
        # torch seed so that a validation is reproducible.
        with torch.random.fork_rng():
            torch.manual_seed(self.config.seed)
            evaluation = evaluate_policy(self.eval_env, policy, self.seeds, state)
        row = {
            "step": int(self.model.num_timesteps),
            "round": round_,
            "phase": state.phase,
            "success": evaluation.success,
            "success_unguided": evaluation.success_unguided,
            "mean_return": evaluation.mean_return,
            "mean_length": evaluation.mean_length,
        }
        append_curve(self.run_dir / "curve.csv", row)
        self.logger.record("feedback/validation_success", evaluation.success)
        self.logger.record("feedback/validation_success_unguided", evaluation.success_unguided)
        self.logger.record("feedback/hint_reliance", evaluation.reliance)
        return evaluation


def _make_vec_env(config: RunConfig, feedback: FeedbackConfig, store: Any, *, seed: int) -> Any:
    """The training envs (env ``i`` seeded with ``seed + i``), recording to ``store`` if given.

    ``store`` is a shared TrajectoryStore, or its path for subprocess workers,
    which then each write their own shard.
    """

    def build() -> Any:
        return make(config.env_id, feedback, record=store, **config.env_kwargs)

    vec_cls = SubprocVecEnv if config.subprocess else DummyVecEnv
    venv = vec_cls([build] * config.n_envs)
    venv.seed(seed)
    monitor = VecMonitor(venv, info_keywords=("is_success",))
    if config.time_limit_terminal:
        from feedbackgym.baselines.vec_env import TimeLimitAsTerminal

        return TimeLimitAsTerminal(monitor)
    return monitor


def _open_store(config: RunConfig) -> Any:
    """Where the run records: ``None``, the store's path (subprocess envs), or the store."""
    if not config.record:
        return None
    path = Path(config.out_dir) / "trajectories"
    if config.subprocess:
        return str(path)
    from feedbackgym.datasets import TrajectoryStore

    return TrajectoryStore(path)


def train_run(
    config: RunConfig,
    *,
    resume: bool = False,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Trains one arm with one seed; returns the run's final state.

    Args:
        config: The run's settings; its ``out_dir`` receives every output.
        resume: Continue from the last checkpoint in ``out_dir`` when there is one.
        progress: Called with the timestep count after each round.
    """
    torch.set_num_threads(1)
    run_dir = Path(config.out_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    state = read_state(run_dir) if resume else {}
    first_round = state.get("round", -1) + 1
    if resume and first_round >= config.rounds:
        return state  # finished: its config, state and checkpoints stay as they were
    if not resume:
        for stale in ("curve.csv", "state.json"):
            (run_dir / stale).unlink(missing_ok=True)
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    else:
        drop_curve_rows_after(run_dir / "curve.csv", max(first_round, 0))
    (run_dir / "config.json").write_text(config.to_json())
    controller = config.controller()
    feedback = controller.config  # the stack as it starts; edits reach it through the controller
    store = _open_store(config)
    venv = eval_env = None
    try:
        venv = _make_vec_env(
            config, feedback, store, seed=config.seed + max(first_round, 0) * config.n_envs
        )
        if first_round > 0:
            model = PPO.load(
                run_dir / "checkpoints" / f"round_{first_round - 1:04d}.zip", env=venv, device="cpu"
            )
            model.set_random_seed(config.seed + first_round)  # not the first round's draws again
        else:
            model = PPO(
                "MultiInputPolicy",
                venv,
                n_steps=config.n_steps,
                batch_size=min(256, config.n_steps * config.n_envs),
                learning_rate=LinearDecay(config.learning_rate)
                if config.anneal_lr
                else config.learning_rate,
                ent_coef=config.ent_coef,
                gamma=feedback.shaping.gamma,
                policy_kwargs={"net_arch": list(config.net_arch)},
                tensorboard_log=str(run_dir / "tb"),
                seed=config.seed,
                device="cpu",
            )
            if config.bc_episodes:
                from feedbackgym.baselines.bc import clone_expert

                expert_env = config.make_env(feedback)
                try:
                    clone_expert(model.policy, expert_env, config.bc_episodes, seed=config.seed)
                finally:
                    expert_env.close()
        eval_env = config.make_env(feedback)
        controller.attach(eval_env)
        if "controller" in state:  # resumed: the switch, the trend and the alert as they were
            controller.load_state_dict(state["controller"])
        callbacks = feedback_callbacks(
            controller,
            review_credit=config.review_credit,
            first_round=max(first_round, 0),
            resume_report=state.get("pending_report"),
        )
        drive = callbacks.callbacks[0]
        assert isinstance(drive, DriveController)
        rounds = _RoundCallback(config, drive, eval_env, progress)
        remaining = (config.rounds - max(first_round, 0)) * config.n_envs * config.n_steps
        if remaining > 0:
            model.learn(
                remaining,
                callback=CallbackList([callbacks, rounds]),
                reset_num_timesteps=first_round <= 0,
                tb_log_name=f"{config.arm}_seed{config.seed}",
            )
    finally:
        for env in (venv, eval_env):
            if env is not None:
                env.close()
        if store is not None and not isinstance(store, str):
            store.close()
    final = read_state(run_dir)
    final["alerts"] = list(controller.alert.fired)
    write_state(run_dir, final)
    return final


def rollback(run_dir: str | Path) -> PPO:
    """Loads the run's best checkpoint (by validation success): the rollback target.

    Raises:
        FileNotFoundError: The run has no best checkpoint yet.
    """
    best = Path(run_dir) / "checkpoints" / "best.zip"
    if not best.exists():
        raise FileNotFoundError(f"{run_dir} has no best checkpoint yet")
    return PPO.load(best, device="cpu")
