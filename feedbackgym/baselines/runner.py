"""One training run of one arm: SB3 PPO with the feedback stack, validation, checkpoints, resume.

A run directory holds::

    config.json          the RunConfig
    tb/                  TensorBoard logs (SB3's rollout/ and train/, our feedback/)
    curve.csv            step, round, phase, validation success (scheduled and unguided), return
    checkpoints/round_NNNN.zip   a versioned checkpoint every round (the newest
                                 ``keep_checkpoints`` are kept)
    checkpoints/best.zip         the checkpoint with the best validation success (rollback target)
    state.json           the last completed round, its timestep count, the best round, the
                         schedule's and the reward alert's state, and the trend of a round
                         trained on but not yet reported (what --resume restores)
    trajectories/        with ``record=True``: every training episode, with its hints,
                         reviews, schedule state and the switch time (a TrajectoryStore)
"""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from feedbackgym.baselines.arms import (
    ArmSettings,
    checked_keep_checkpoints,
    make_arm_env,
    rounds_for,
)
from feedbackgym.baselines.evaluation import Evaluation, evaluate_policy, validation_seeds
from feedbackgym.errors import DependencyNotInstalled

try:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor
except ImportError as error:
    raise DependencyNotInstalled.for_extra("stable_baselines3", "baselines") from error

from feedbackgym.baselines.callbacks import FeedbackCallback, RewardDropAlert

__all__ = ["CURVE_FIELDS", "DEFAULT_NET_ARCH", "RunConfig", "rollback", "train_run"]

DEFAULT_NET_ARCH = (128, 128)
"""Hidden layers of the policy and value networks that runs train by default."""

CURVE_FIELDS = (
    "step",
    "round",
    "phase",
    "success",
    "success_unguided",
    "mean_return",
    "mean_length",
)


@dataclass
class RunConfig:
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
        settings: Feedback settings shared by the arms.
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
    settings: ArmSettings = field(default_factory=ArmSettings)
    record: bool = False
    keep_checkpoints: int = 5

    def __post_init__(self) -> None:
        checked_keep_checkpoints(self.keep_checkpoints)

    @property
    def rounds(self) -> int:
        """Training rounds (PPO rollouts)."""
        return rounds_for(self.total_steps, self.n_envs, self.n_steps)

    def to_json(self) -> str:
        """The config as JSON."""
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        """Reads a config written by :meth:`to_json`."""
        data = json.loads(text)
        data["settings"] = ArmSettings(**data["settings"])
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
        feedback: FeedbackCallback,
        eval_env: Any,
        progress: Callable[[int], None] | None,
    ) -> None:
        super().__init__()
        self.config = config
        self.feedback = feedback
        self.report_progress = progress
        self.run_dir = Path(config.out_dir)
        self.eval_env = eval_env
        self.seeds = validation_seeds(self.eval_env, config.eval_episodes)
        state = _read_state(self.run_dir)
        self.best = state.get("best_success", -1.0)
        self._trained: int | None = None
        """The round whose rollout PPO is training on, until its work is done."""

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self._trained = self.feedback.round - 1  # FeedbackCallback has already counted it

    def _on_rollout_start(self) -> None:
        self._finish_round(reported=True)  # FeedbackCallback has reported the round's trend

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
        _drop_old_checkpoints(checkpoints, self.config.keep_checkpoints)
        last = finished + 1 >= self.config.rounds
        state = _read_state(self.run_dir)
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
            schedule=self.training_env.env_method("schedule_state", indices=[0])[0],
            alert=self.feedback.alert.state_dict(),
            pending_report=None if reported else self.feedback.trend(),
        )
        _write_state(self.run_dir, state)
        if self.report_progress is not None:
            self.report_progress(int(self.model.num_timesteps))

    def validate(self, progress: float) -> Evaluation:
        """Evaluates the current policy on the validation seeds and appends to the curve."""

        def policy(obs: Any) -> int:
            action, _ = self.model.predict(obs, deterministic=False)
            return int(action)

        # The policy is sampled (argmax policies loop on repeated inspections), with a fixed
        # torch seed so that a validation is reproducible.
        with torch.random.fork_rng():
            torch.manual_seed(self.config.seed)
            evaluation = evaluate_policy(self.eval_env, policy, self.seeds, progress)
        phase = self.eval_env.get_wrapper_attr("feedback_state")()["phase"]
        row = {
            "step": int(self.model.num_timesteps),
            "round": int(progress),
            "phase": phase,
            "success": evaluation.success,
            "success_unguided": evaluation.success_unguided,
            "mean_return": evaluation.mean_return,
            "mean_length": evaluation.mean_length,
        }
        _append_curve(self.run_dir / "curve.csv", row)
        self.logger.record("feedback/validation_success", evaluation.success)
        self.logger.record("feedback/validation_success_unguided", evaluation.success_unguided)
        self.logger.record("feedback/hint_reliance", evaluation.reliance)
        return evaluation


def _append_curve(path: Path, row: dict[str, Any]) -> None:
    new = not path.exists()
    with path.open("a", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=CURVE_FIELDS)
        if new:
            writer.writeheader()
        writer.writerow(row)


def _drop_curve_rows_after(path: Path, progress: int) -> None:
    """Drops validations past ``progress`` rounds (before resuming from there).

    A crash after a validation was written but before its round's state was
    saved would otherwise leave that validation in the curve twice.
    """
    if not path.exists():
        return
    with path.open(newline="") as file:
        rows = list(csv.DictReader(file))
    kept = [row for row in rows if float(row["round"]) <= progress]
    if len(kept) < len(rows):
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=CURVE_FIELDS)
            writer.writeheader()
            writer.writerows(kept)
        tmp.replace(path)


def _read_state(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "state.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _write_state(run_dir: Path, state: dict[str, Any]) -> None:
    tmp = run_dir / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(run_dir / "state.json")  # atomic: a crash never leaves half a state file


def _make_vec_env(config: RunConfig, store: Any, *, seed: int) -> Any:
    """The training envs (env ``i`` seeded with ``seed + i``), recording to ``store`` if given.

    ``store`` is a shared TrajectoryStore, or its path for subprocess workers,
    which then each write their own shard.
    """

    def make() -> Any:
        env = make_arm_env(config.env_id, config.arm, config.settings)
        if store is None:
            return env
        from feedbackgym.wrappers import RecordTrajectories

        return RecordTrajectories(env, store, task_id=config.env_id)

    vec_cls = SubprocVecEnv if config.subprocess else DummyVecEnv
    venv = vec_cls([make] * config.n_envs)
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
    state = _read_state(run_dir) if resume else {}
    first_round = state.get("round", -1) + 1
    if resume and first_round >= config.rounds:
        return state  # finished: its config, state and checkpoints stay as they were
    if not resume:
        for stale in ("curve.csv", "state.json"):
            (run_dir / stale).unlink(missing_ok=True)
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    else:
        _drop_curve_rows_after(run_dir / "curve.csv", max(first_round, 0))
    (run_dir / "config.json").write_text(config.to_json())
    store = _open_store(config)
    venv = eval_env = None
    try:
        venv = _make_vec_env(config, store, seed=config.seed + max(first_round, 0) * config.n_envs)
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
                gamma=config.settings.gamma,
                policy_kwargs={"net_arch": list(config.net_arch)},
                tensorboard_log=str(run_dir / "tb"),
                seed=config.seed,
                device="cpu",
            )
            if config.bc_episodes:
                from feedbackgym.baselines.bc import clone_expert

                expert_env = make_arm_env(config.env_id, config.arm, config.settings)
                try:
                    clone_expert(model.policy, expert_env, config.bc_episodes, seed=config.seed)
                finally:
                    expert_env.close()
        eval_env = make_arm_env(config.env_id, config.arm, config.settings)
        alert = RewardDropAlert()
        if "schedule" in state:  # a resumed run: the switch and the trend as they were
            venv.env_method("load_schedule_state", state["schedule"])
            eval_env.get_wrapper_attr("load_schedule_state")(state["schedule"])
            alert.load_state_dict(state["alert"])
        feedback = FeedbackCallback(
            first_round=max(first_round, 0),
            review_credit=config.review_credit,
            alert=alert,
            mirrors=[eval_env],
            resume_report=state.get("pending_report"),
        )
        rounds = _RoundCallback(config, feedback, eval_env, progress)
        remaining = (config.rounds - max(first_round, 0)) * config.n_envs * config.n_steps
        if remaining > 0:
            model.learn(
                remaining,
                callback=CallbackList([feedback, rounds]),
                reset_num_timesteps=first_round <= 0,
                tb_log_name=f"{config.arm}_seed{config.seed}",
            )
    finally:
        for env in (venv, eval_env):
            if env is not None:
                env.close()
        if store is not None and not isinstance(store, str):
            store.close()
    final = _read_state(run_dir)
    final["alerts"] = list(feedback.alert.fired)
    _write_state(run_dir, final)
    return final


def _drop_old_checkpoints(checkpoints: Path, keep: int) -> None:
    """Deletes all but the ``keep`` newest round checkpoints (0 keeps every one)."""
    if keep:
        for old in sorted(checkpoints.glob("round_*.zip"))[:-keep]:
            old.unlink()


def rollback(run_dir: str | Path) -> PPO:
    """Loads the run's best checkpoint (by validation success): the rollback target.

    Raises:
        FileNotFoundError: The run has no best checkpoint yet.
    """
    best = Path(run_dir) / "checkpoints" / "best.zip"
    if not best.exists():
        raise FileNotFoundError(f"{run_dir} has no best checkpoint yet")
    return PPO.load(best, device="cpu")


def read_curve(run_dir: str | Path) -> dict[str, np.ndarray]:
    """Reads a run's ``curve.csv`` into arrays (``phase`` as strings)."""
    with (Path(run_dir) / "curve.csv").open() as file:
        rows = list(csv.DictReader(file))
    return {
        key: np.array([r[key] for r in rows])
        if key == "phase"
        else np.array([float(r[key]) for r in rows])
        for key in CURVE_FIELDS
    }
