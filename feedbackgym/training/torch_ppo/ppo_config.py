"""The torch trainer's settings: one run's PPO hyperparameters, envs and arm, and its envs."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any

from feedbackgym.config import FeedbackConfig
from feedbackgym.training.common.arms import ArmFeedback, rounds_for
from feedbackgym.training.common.trainer_names import (
    DEFAULT_ENT_COEF,
    default_net_arch,
    resolve_policy,
)
from feedbackgym.training.common.trainer_view import trainer_env
from feedbackgym.training.torch_ppo.network import UpdateSettings
from feedbackgym.training.workers.env_groups import (
    EnvGroups,
    EnvWorkers,
    check_env_backend,
    steps_slowly,
    worker_layout,
)


@dataclass
class PPOConfig(ArmFeedback):
    """PPO settings, each named as the run config names it.

    A run's config (:class:`~feedbackgym.training.common.run_settings.RunConfig`)
    becomes this one field by field (:func:`~.run_torch.ppo_config`);
    the settings only PPO has (``gae_lambda``, ``clip_coef``, ``vf_coef``,
    ``max_grad_norm``, the text embedding) keep CleanRL's names.

    Attributes:
        env_id: The env.
        arm: The comparison arm whose stack to train on.
        seed: Seed of torch, numpy and the envs.
        total_steps: Env steps to train for.
        n_envs: Parallel envs.
        n_steps: Steps per env per round.
        env_workers: Worker processes that step the envs, two groups each: a worker
            steps one group while the learner picks the other's actions (0:
            every env in the learner's process; ``None``: 0, or for envs with
            slow steps such as web and code, one per env up to
            :data:`~feedbackgym.training.workers.env_groups.SLOW_ENV_WORKERS`, each env stepped as
            soon as
            its last step is back). See
            :func:`~feedbackgym.training.workers.env_groups.worker_layout`.
            With ``env_backend="ray"``: the Ray actors that hold the envs
            (``None`` or 0: 2, or 4 for envs with slow steps; see
            :func:`~feedbackgym.training.workers.ray_actors.actor_layout`).
        env_backend: Where the envs live: ``"processes"`` (this machine) or
            ``"ray"`` (Ray actors of ``env_actor_cpus`` CPUs each, spread over
            the cluster's nodes: :class:`~feedbackgym.training.workers.ray_actors.RayEnvWorkers`;
            needs the
            ``ray`` extra).
        env_actor_cpus: CPUs each env actor asks for (``env_backend="ray"``).
        use_text: Also read the text observation (needs ``obs_mode="both"`` in ``env_kwargs``).
        text_length: Characters of text the embedding reads.
        learning_rate: Adam's step size.
        anneal_lr: Decay the learning rate linearly to 0 over the run.
        gae_lambda: GAE's λ.
        batch_size: Samples per minibatch (each epoch takes ``n_envs * n_steps //
            batch_size`` gradient steps).
        n_epochs: Epochs per round.
        update_threads: Torch threads for the update on the CPU (the envs wait
            meanwhile; inference between env steps keeps one). More threads than
            free cores (runs side by side) slow every run down many times over.
        overlap_update: Train each round in an update worker process while the
            next round is collected with the weights before that update (one
            update stale; the controller hears a round's loss one round later).
            See :mod:`~.update_worker`.
        clip_coef: PPO's clip.
        ent_coef: Entropy bonus; ``None``: the policy's default
            (:data:`~feedbackgym.training.common.trainer_names.DEFAULT_ENT_COEF`).
        vf_coef: Value-loss weight.
        max_grad_norm: Gradient clip.
        net_arch: Hidden layer sizes: two layers of one width (actor and critic each;
            the entity policy's embedding width); ``None``: the policy's default
            (:data:`~feedbackgym.training.common.trainer_names.DEFAULT_NET_ARCH`).
        policy: ``"entity"`` or ``"mlp"``; ``None``: ``entity`` where the env
            declares an entity view (see
            :func:`~feedbackgym.training.common.trainer_names.resolve_policy`).
        review_credit: Add review credit to the rewards of the round's steps (off by default).
        time_limit_terminal: Treat an episode cut off by its time limit as ended
            rather than bootstrapping its value from its final observation.
        bc_episodes: Expert episodes for a behaviour-cloning warm-up (0: none).
        restart_demos: Expert episodes to restart backwards along (0: none).
        device: ``"auto"`` (CUDA when available), ``"cuda"`` or ``"cpu"``.
        feedback: The feedback config the arm's preset goes on; its
            ``shaping.gamma`` is the discount.
        feedback_file: A YAML/TOML config file to follow instead of ``feedback``
            (edits apply at the next round); ``feedback_overrides`` go on top.
        feedback_overrides: ``{section: {field: value}}`` applied to every version read.
        env_kwargs: Keyword arguments for ``gym.make``.
    """

    env_id: str
    arm: str = "guide-then-review+shaping"
    seed: int = 0
    total_steps: int = 50_000
    n_envs: int = 8
    n_steps: int = 128
    env_workers: int | None = None
    env_backend: str = "processes"
    env_actor_cpus: float = 1.0
    use_text: bool = False
    text_length: int = 512
    learning_rate: float = 3e-4
    anneal_lr: bool = False
    gae_lambda: float = 0.95
    batch_size: int = 256
    n_epochs: int = 4
    update_threads: int = 2
    overlap_update: bool = False
    clip_coef: float = 0.2
    ent_coef: float | None = None
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    net_arch: list[int] | None = None
    policy: str | None = None
    review_credit: bool = False
    time_limit_terminal: bool = False
    bc_episodes: int = 0
    restart_demos: int = 0
    device: str = "auto"
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)
    feedback_file: str | None = None
    feedback_overrides: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_env_backend(self.env_backend, self.env_actor_cpus)
        self.policy = resolve_policy(self.policy, self.env_id)
        if self.net_arch is None:
            self.net_arch = default_net_arch(self.policy)
        if self.ent_coef is None:
            self.ent_coef = DEFAULT_ENT_COEF[self.policy]
        if len(self.net_arch) != 2 or self.net_arch[0] != self.net_arch[1]:
            raise ValueError(
                f"the torch trainer has two hidden layers of one width, got {list(self.net_arch)}"
            )
        if self.n_epochs < 1 or self.batch_size < 1:
            raise ValueError(
                f"n_epochs and batch_size must be >= 1, got {self.n_epochs} and {self.batch_size}"
            )

    @property
    def rounds(self) -> int:
        """Training rounds (iterations)."""
        return rounds_for(self.total_steps, self.n_envs, self.n_steps)

    @property
    def num_minibatches(self) -> int:
        """Minibatches per epoch of the update."""
        return max(1, self.n_envs * self.n_steps // self.batch_size)

    @property
    def text_columns(self) -> int:
        """Characters of text the flat observation keeps (0 without ``use_text``)."""
        return self.text_length if self.use_text else 0

    @property
    def masks(self) -> bool:
        """Whether the trainer views append the action masks (the entity policy reads them)."""
        return self.policy == "entity"

    @property
    def update_settings(self) -> UpdateSettings:
        """What :func:`~.network.ppo_update` needs of these settings."""
        return UpdateSettings(**{f.name: getattr(self, f.name) for f in fields(UpdateSettings)})


def make_vector_env(
    config: PPOConfig, feedback: FeedbackConfig, *, record: Any = None
) -> EnvGroups:
    """``n_envs`` stacks as ``feedback`` describes, each seen through a trainer view.

    Each env is seen through
    :class:`~feedbackgym.training.common.trainer_view.TrainerView`. They live in
    the learner's process, or in worker processes (see
    :func:`~feedbackgym.training.workers.env_groups.worker_layout`), or with
    ``env_backend="ray"`` in Ray actors over a cluster's nodes
    (:class:`~feedbackgym.training.workers.ray_actors.RayEnvWorkers`; a
    recording store goes to them as its path, so each actor writes on its node).
    ``record`` is a store, or its path. A store goes to worker processes as its
    path and options: each worker's envs share one copy (one shard, or one
    writer process with ``writer="process"``); with a path, each env opens its own.
    """
    build = partial(
        trainer_env,
        config.env_id,
        feedback,
        config.text_columns,
        record,
        masks=config.masks,
        **config.env_kwargs,
    )
    if config.env_backend == "ray":
        from feedbackgym.training.workers.ray_actors import ray_env_workers

        return ray_env_workers(
            [build] * config.n_envs,
            config.env_workers,
            slow=steps_slowly(config.env_id),
            num_cpus=config.env_actor_cpus,
        )
    processes, groups = worker_layout(config.env_id, config.n_envs, config.env_workers)
    return EnvWorkers([build] * config.n_envs, groups=groups, processes=processes)


def learning_rate_at(config: PPOConfig, round_: int) -> float:
    """The learning rate of round ``round_`` (linear decay to 0 with ``anneal_lr``)."""
    if not config.anneal_lr:
        return config.learning_rate
    return config.learning_rate * (1.0 - round_ / config.rounds)
