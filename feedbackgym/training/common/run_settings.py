"""One run of one arm: its settings and its directory.

:class:`RunConfig` is what ``config.json`` holds;
:func:`~.run_files.prepare_run_dir` starts or resumes a run directory;
:func:`feedbackgym.training.experiments.launch.train_run` hands a run to its trainer: SB3
(:func:`~feedbackgym.training.sb3.run_sb3.train_sb3_run`) or the torch trainer
(:func:`~feedbackgym.training.torch_ppo.run_torch.train_torch_run`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from feedbackgym.config import FeedbackConfig
from feedbackgym.registration import evaluation_kwargs
from feedbackgym.training.common.arms import ArmFeedback, checked_keep_checkpoints, rounds_for
from feedbackgym.training.common.run_files import read_state, write_state
from feedbackgym.training.common.trainer_names import (
    DEFAULT_ENT_COEF,
    DEFAULT_NET_ARCH,
    DEFAULT_TRAINER,
    TRAINERS,
    default_net_arch,
    resolve_policy,
)
from feedbackgym.training.common.update_presets import DEFAULT_PRESET, UPDATE_PRESETS
from feedbackgym.training.workers.env_groups import check_env_backend
from feedbackgym.wrappers.stack import make

__all__ = [
    "DEFAULT_NET_ARCH",
    "DEFAULT_TRAINER",
    "RESUMABLE_CHANGES",
    "TRAINERS",
    "RunConfig",
    "close_run",
    "config_json",
    "in_worker_processes",
    "open_store",
]

_DEFAULT = UPDATE_PRESETS[DEFAULT_PRESET]
"""Where a run's rollout and update settings come from unless given."""

RESUMABLE_CHANGES = frozenset(
    {
        "total_steps",
        "out_dir",
        "device",
        "env_workers",
        "update_threads",
        "subprocess",
        "env_backend",
        "env_actor_cpus",
        "keep_checkpoints",
    }
)
"""The settings a resumed run may change: its length, where it lives and runs, and what
it keeps. Any other change would splice two different runs into one curve."""


@dataclass
class RunConfig(ArmFeedback):
    """Everything one run needs, stored as ``config.json`` in its directory.

    Attributes:
        env_id: The env to train on.
        arm: The comparison arm (see :mod:`~.arms`).
        seed: The run's seed (training seeds stay below the validation seeds).
        total_steps: Env steps to train for.
        out_dir: The run directory.
        n_envs: Parallel envs. This and the next four default to the
            :data:`~.update_presets.DEFAULT_PRESET`'s values.
        n_steps: Steps per env per round (PPO rollout length).
        n_epochs: Passes over each round's rollout in its update.
        batch_size: Samples per minibatch of the update (each pass takes
            ``n_envs * n_steps // batch_size`` gradient steps).
        subprocess: Run the envs in subprocess workers (SB3: ``SubprocVecEnv``; the
            torch trainer: 2 env workers unless ``env_workers`` says otherwise).
            Envs with slow steps (web, code) run in worker processes either way.
        eval_every: Rounds between validations.
        eval_episodes: Validation seeds per validation.
        review_credit: Redistribute review credit into PPO's rollout buffer (off by
            default: it changes the objective at the switch to reviews, and had no
            measured effect, ``docs/results/ops_hard_review_credit``).
        bc_episodes: Expert episodes for a behaviour-cloning warm-up (0: none).
        restart_demos: Expert episodes to restart training episodes backwards
            along (0: none; see :class:`~feedbackgym.config.ReexploreConfig`):
            the same episodes as ``bc_episodes`` reads, with or without cloning.
        learning_rate: PPO's learning rate.
        anneal_lr: Decay the learning rate linearly to 0 over the run (PPO's usual
            schedule for long runs), instead of keeping it constant.
        time_limit_terminal: Treat an episode cut off by its time limit as ended
            rather than bootstrapping its value (see
            :class:`~feedbackgym.training.sb3.vec_wrappers.TimeLimitAsTerminal`).
        ent_coef: PPO's entropy coefficient; ``None``: the policy's default
            (:data:`~.trainer_names.DEFAULT_ENT_COEF`). Stored resolved.
        net_arch: Hidden layer sizes of the policy and value networks (the entity
            policy: its embedding width is the first); ``None``: the policy's
            default (:data:`~.trainer_names.DEFAULT_NET_ARCH`). Stored resolved.
        policy: ``"entity"`` (attention over the env's entities with a pointer head
            and action masks; SB3: ``MaskablePPO``) or ``"mlp"`` (over the flat
            observation); ``None``: ``entity`` where the env declares an entity
            view, else ``mlp`` (:func:`~.trainer_names.resolve_policy`). Stored resolved.
        feedback: The feedback config the arm's preset goes on (its
            ``shaping.gamma`` is also PPO's discount, so the two match).
        feedback_file: A YAML/TOML feedback config file to follow instead of
            ``feedback``: edits apply to every env at the next round.
        feedback_overrides: ``{section: {field: value}}`` applied on top of the
            file at every read (command-line flags override the file).
        env_kwargs: Keyword arguments for ``gym.make``.
        trainer: ``"torch"`` (:mod:`~feedbackgym.training.torch_ppo.ppo`; its run is
            :func:`~feedbackgym.training.torch_ppo.run_torch.train_torch_run`; the default) or
            ``"sb3"`` (SB3's PPO).
        device: ``"auto"`` (CUDA when a GPU is present), ``"cuda"`` or ``"cpu"``.
        env_workers: The torch trainer's worker processes that step the envs while
            the learner acts (:class:`~feedbackgym.training.workers.env_groups.EnvWorkers`;
            ``subprocess`` alone means 2; 0: in the learner's process, except
            for envs with slow steps, web and code, which get one worker per env
            up to 4, each env stepped as soon as its last step is back).
        overlap_update: The torch trainer trains each round in an update worker
            process while the next round is collected with the weights before that
            update (:class:`~feedbackgym.training.torch_ppo.update_worker.UpdateWorker`).
        update_threads: The torch trainer's torch threads for its update (the
            envs wait meanwhile); ``compare`` gives each run its share of the
            machine's cores. More threads than free cores slow runs side by
            side down many times over.
        env_backend: Where the training envs live: ``"processes"`` (this
            machine, as ``subprocess`` and ``env_workers`` say) or ``"ray"``:
            in Ray actors of ``env_actor_cpus`` CPUs each, spread over the
            cluster's nodes (the torch trainer's
            :class:`~feedbackgym.training.workers.ray_actors.RayEnvWorkers`, SB3's
            :class:`~feedbackgym.training.workers.ray_vec_env.RayVecEnv`), ``env_workers``
            of them (0: 2, or 4 for web and code envs). Needs the ``ray`` extra.
        env_actor_cpus: CPUs each env actor asks for (``env_backend="ray"``).
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
    resumable_changes: ClassVar[frozenset[str]] = RESUMABLE_CHANGES
    fresh_start: ClassVar[tuple[str, ...]] = ("curve.csv", "state.json", "checkpoints")
    n_envs: int = _DEFAULT.n_envs
    n_steps: int = _DEFAULT.n_steps
    n_epochs: int = _DEFAULT.n_epochs
    batch_size: int = _DEFAULT.batch_size
    subprocess: bool = False
    eval_every: int = 4
    eval_episodes: int = 30
    review_credit: bool = False
    bc_episodes: int = 0
    restart_demos: int = 0
    learning_rate: float = _DEFAULT.learning_rate
    anneal_lr: bool = False
    time_limit_terminal: bool = False
    ent_coef: float | None = None
    net_arch: list[int] | None = None
    policy: str | None = None
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)
    feedback_file: str | None = None
    feedback_overrides: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    trainer: str = DEFAULT_TRAINER
    device: str = "auto"
    env_workers: int = 0
    overlap_update: bool = False
    update_threads: int = 1
    env_backend: str = "processes"
    env_actor_cpus: float = 1.0
    record: bool = False
    keep_checkpoints: int = 5

    def __post_init__(self) -> None:
        checked_keep_checkpoints(self.keep_checkpoints)
        if self.env_workers < 0:
            raise ValueError(f"env_workers must be >= 0, got {self.env_workers}")
        if self.n_epochs < 1 or self.batch_size < 1:
            raise ValueError(
                f"n_epochs and batch_size must be >= 1, got {self.n_epochs} and {self.batch_size}"
            )
        if self.trainer not in TRAINERS:
            raise ValueError(f"trainer must be one of {', '.join(TRAINERS)}, got {self.trainer!r}")
        self.policy = resolve_policy(self.policy, self.env_id)
        if self.net_arch is None:
            self.net_arch = default_net_arch(self.policy)
        if self.ent_coef is None:
            self.ent_coef = DEFAULT_ENT_COEF[self.policy]
        check_env_backend(self.env_backend, self.env_actor_cpus)
        if self.overlap_update and self.trainer != "torch":
            raise ValueError("overlap_update is the torch trainer's (trainer='torch')")
        self.arm_config(self.feedback)  # checks the arm and the overrides before the run starts

    @property
    def rounds(self) -> int:
        """Training rounds (PPO rollouts)."""
        return rounds_for(self.total_steps, self.n_envs, self.n_steps)

    def make_env(self, config: FeedbackConfig) -> Any:
        """One env of the run's stack, built from ``config``."""
        return make(self.env_id, config, **self.env_kwargs)

    def make_eval_env(self, config: FeedbackConfig) -> Any:
        """One env of the stack that validation plays: the test split, when the env has one."""
        return make(self.env_id, config, **evaluation_kwargs(self.env_id, self.env_kwargs))

    def to_json(self) -> str:
        """The config as JSON."""
        return config_json(self)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        """Reads a config written by :meth:`to_json`."""
        data = json.loads(text)
        for section in ("guide", "review"):  # saved before readers: the actor read both
            data["feedback"].setdefault(section, {}).setdefault("reader", "actor")
        data["feedback"] = FeedbackConfig.from_mapping(data["feedback"], source="config.json")
        data.setdefault("policy", "mlp")  # runs saved before the entity policy trained the MLP
        data.setdefault("ent_coef", DEFAULT_ENT_COEF["mlp"])
        return cls(**data)


def config_json(config: Any) -> str:
    """A run's or a comparison's config (a dataclass with a ``feedback`` config) as JSON."""
    data = asdict(config)
    data["feedback"] = config.feedback.model_dump(mode="json")
    return json.dumps(data, indent=2, sort_keys=True)


def in_worker_processes(config: RunConfig) -> bool:
    """Whether the run's envs step in worker processes.

    Asked for (``subprocess``, ``env_workers``), or by default for envs with slow
    steps (web, code: :func:`~feedbackgym.training.workers.env_groups.steps_slowly`):
    the torch trainer's env workers, SB3's ``SubprocVecEnv``; or in Ray actors
    (``env_backend="ray"``).
    """
    from feedbackgym.training.workers.env_groups import steps_slowly

    return (
        config.env_backend == "ray"
        or config.subprocess
        or bool(config.env_workers)
        or steps_slowly(config.env_id)
    )


def open_store(config: RunConfig) -> Any:
    """Where the run records: ``None``, the store's path (subprocess envs), or the store.

    Envs in the learner's process share one store whose episodes a writer
    process encodes, logs and seals (``writer="process"``), off the training thread.
    """
    if not config.record:
        return None
    path = Path(config.out_dir) / "trajectories"
    if in_worker_processes(config):
        return str(path)
    from feedbackgym.datasets import TrajectoryStore

    return TrajectoryStore(path, writer="process")


def close_run(
    config: RunConfig, controller: Any, closables: list[Any], store: Any
) -> dict[str, Any]:
    """Closes what a run opened (``None`` entries skipped), then the store; returns its state.

    The final state is ``state.json`` with the rounds the reward-drop alert fired at.
    """
    errors: list[BaseException] = []
    for closable in [*closables, None if isinstance(store, str) else store]:
        if closable is not None:
            try:
                closable.close()
            except Exception as error:  # close the rest, then report the first failure
                errors.append(error)
    if errors:
        raise errors[0]
    final = read_state(Path(config.out_dir))
    final["alerts"] = list(controller.alert.fired)
    write_state(Path(config.out_dir), final)
    return final
