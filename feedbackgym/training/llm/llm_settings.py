"""One LLM training run's settings, stored as ``config.json`` in its directory.

Example:
    >>> config = LLMRunConfig("feedbackgym/OpsIncidentEasy-v0", "guide-then-review+shaping",
    ...                       seed=0, total_rounds=8, out_dir="runs/llm")
    >>> config.rounds, config.batch_episodes, config.arm_config(config.feedback).guide.channels
    (8, 8, ('info',))
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from feedbackgym.config import (
    DISTILL_SUFFIX,
    FAILURE_HINTS_SUFFIX,
    REEXPLORE_SUFFIX,
    FeedbackConfig,
    arm_suffixes,
    merge_config,
)
from feedbackgym.language.episode_chat import check_turns
from feedbackgym.schedules import LLM_ARMS
from feedbackgym.training.common.arms import ArmFeedback, checked_keep_checkpoints
from feedbackgym.training.common.run_settings import config_json

__all__ = ["DEFAULT_TRAINING_ARM", "LLM_RESUMABLE_CHANGES", "LLMRunConfig"]

DEFAULT_TRAINING_ARM = "guide-then-review+shaping"
"""The arm a run trains by default: hints first, then reviews, with subgoal shaping (GRPO
learns only from groups whose returns differ; on the sparse reward alone a weak model's
groups are mostly all failures)."""

LLM_RESUMABLE_CHANGES = frozenset(
    {"total_rounds", "out_dir", "device", "cpu_threads", "keep_checkpoints", "env_url", "rollouts"}
)
"""The settings a resumed run may change: its length, where it lives and runs (a served env's
address too), what it keeps, where its episodes are played."""

ROLLOUTS = ("auto", "server", "torch")
"""Where a run's episodes are played: ``server`` the model server (the adapter published
each round), ``torch`` the model being trained, ``auto`` the server for a GGUF model."""

_TEXT_CHANNELS = {"guide": {"channels": ["info"]}, "review": {"channels": ["info"]}}
"""A language model reads hints and reviews as words: they stay in ``info`` (the arms'
vector fields would turn the text observation into a dict)."""


@dataclass
class LLMRunConfig(ArmFeedback):
    """Everything one LLM run needs.

    Attributes:
        env_id: A registered env with a text mode (``obs_mode="text"``).
        arm: The comparison arm: who speaks when (see :mod:`feedbackgym.training.common.arms`).
        seed: The run's seed (training seeds are ``seed * 1000`` on, below the held-out ones).
        total_rounds: Rounds to train: each plays ``groups`` groups of ``group_size``
            episodes and takes one optimizer step on them.
        out_dir: The run directory.
        model: ``"packaged"`` (the packaged Gemma 3 270M), a ``.gguf`` file or a
            local model folder.
        adapter: A saved PEFT adapter to start from (e.g. the supervised warm-up's).
        groups: Groups (seeds) per round.
        group_size: Episodes per group (GRPO's ``num_generations``).
        seed_pool: Training seeds cycled through (each comes back every
            ``seed_pool / groups`` rounds, with the reviews of its earlier attempts).
        max_turns: Steps an episode may take (its time limit in training).
        max_tokens: Longest sequence of an episode; it is cut before a turn past it.
        turns: What later user turns carry: ``"delta"`` (new lines) or ``"full"``.
        memory: Reviews of earlier attempts at a seed the prompt carries.
        temperature: Sampling temperature (rollouts, validations and the loss's; above 0).
        learning_rate: The adapter's learning rate (constant).
        beta: GRPO's KL coefficient against the base model (0: none, TRL's default).
        epsilon: GRPO's clipping range.
        lora_rank: A new adapter's rank.
        lora_alpha: A new adapter's alpha.
        eval_every: Rounds between validations (the last round is always validated).
        eval_episodes: Held-out seeds a validation plays (twice: hints shown and masked;
            the test split's on an env with splits).
        eval_temperature: The validations' sampling temperature (0: greedy, the default).
        promote_above: Validation success (hints masked) a version needs to be promoted.
        rollback_drop: When a validation's success with hints masked falls more than
            this below the promoted version's, training goes back to that version's
            adapter (``None``: never).
        hint_weight_cap: ``+failure-hints``: the largest importance weight of a
            replayed choice (the no-hint over the hinted probability, truncated).
        distill_coef: ``+distill``: the weight of the teacher's divergence in the loss.
        distill_alpha: ``+distill``: which divergence (TRL SDPO's
            ``distillation_alpha``: 1 the reverse KL, 0 the forward KL).
        distill_steps: ``+distill``: ``"all"`` the choices of a failed episode, or
            ``"flagged"`` only those at the steps its review flags.
        keep_checkpoints: Newest round checkpoints kept (0: every one).
        device: ``"auto"`` (CUDA when present), ``"cuda"`` or ``"cpu"``.
        cpu_threads: torch threads on the CPU, and the model server's when it plays
            the episodes (0: one per core: the model's matrix products dominate; 1 is
            faster for tiny models, whose steps are overhead, and for two runs side by
            side on 2 cores, whose threads would otherwise wait on each other).
        record: Record every training episode in ``out_dir/trajectories`` (HDF5).
        feedback: The feedback config the arm's preset goes on.
        feedback_file: A YAML/TOML config file to follow instead (edits apply at the next round).
        feedback_overrides: ``{section: {field: value}}`` on top of every config read.
        env_kwargs: More keyword arguments for ``gym.make``.
        restart_demos: Unused by this trainer (restarts need env snapshots a chat cannot resume).
        env_url: A ``feedbackgym serve-env`` server to train on instead of a local env
            (``env_id`` is the env it serves): its sessions play the episodes and the
            validations, the run's controller drives their feedback through each reset,
            and the server's env keyword arguments (its time limit too) apply.
        rollouts: Who plays the episodes and validations (one of :data:`ROLLOUTS`):
            ``"server"`` the model server with the adapter published each round
            (:mod:`~.served_rollouts`), ``"torch"`` the model being trained, in this
            process; ``"auto"`` (the default) the server when ``model`` is a GGUF
            model (the packaged one too), else torch.
    """

    env_id: str
    arm: str
    seed: int
    total_rounds: int
    out_dir: str
    resumable_changes: ClassVar[frozenset[str]] = LLM_RESUMABLE_CHANGES
    trained_arms: ClassVar[tuple[str, ...]] = LLM_ARMS
    fresh_start: ClassVar[tuple[str, ...]] = (
        "curve.csv",
        "state.json",
        "chats.jsonl",
        "checkpoints",
        "versions",
        "served",
    )
    model: str = "packaged"
    adapter: str | None = None
    groups: int = 2
    group_size: int = 4
    seed_pool: int = 16
    max_turns: int = 20
    max_tokens: int = 2048
    turns: str = "delta"
    memory: int = 3
    temperature: float = 1.0
    learning_rate: float = 5e-5
    beta: float = 0.0
    epsilon: float = 0.2
    lora_rank: int = 8
    lora_alpha: int = 16
    eval_every: int = 4
    eval_episodes: int = 16
    eval_temperature: float = 0.0
    promote_above: float = 0.0
    rollback_drop: float | None = None
    hint_weight_cap: float = 2.0
    distill_coef: float = 1.0
    distill_alpha: float = 1.0
    distill_steps: str = "all"
    keep_checkpoints: int = 5
    device: str = "auto"
    cpu_threads: int = 0
    record: bool = False
    feedback: FeedbackConfig = field(default_factory=FeedbackConfig)
    feedback_file: str | None = None
    feedback_overrides: dict[str, Any] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    restart_demos: int = 0
    env_url: str | None = None
    rollouts: str = "auto"

    def __post_init__(self) -> None:
        checked_keep_checkpoints(self.keep_checkpoints)
        for name in ("total_rounds", "groups", "seed_pool", "max_turns", "max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError(
                f"group_size must be at least 2 (GRPO compares), got {self.group_size}"
            )
        if self.seed_pool < self.groups:
            raise ValueError(
                f"seed_pool ({self.seed_pool}) must be at least groups ({self.groups}): the "
                "groups of a round play different seeds"
            )
        if not self.temperature > 0:
            raise ValueError(f"temperature must be above 0 (GRPO samples), got {self.temperature}")
        check_turns(self.turns)
        self._check_mechanisms()
        if self.restart_demos:
            raise ValueError("restart_demos: the LLM trainer has no restarts")
        if self.env_url is not None and self.record:
            raise ValueError("record: a served env's episodes are recorded where it runs, not here")
        self.arm_config(self.feedback)  # checks the arm and the overrides before the run starts

    def _check_mechanisms(self) -> None:
        if not self.eval_temperature >= 0:
            raise ValueError(f"eval_temperature must be at least 0, got {self.eval_temperature}")
        if not self.hint_weight_cap > 0:
            raise ValueError(f"hint_weight_cap must be above 0, got {self.hint_weight_cap}")
        if not 0 <= self.distill_alpha <= 1:
            raise ValueError(f"distill_alpha must be in [0, 1], got {self.distill_alpha}")
        if self.rollouts not in ROLLOUTS:
            raise ValueError(
                f"rollouts must be one of {', '.join(ROLLOUTS)}, got {self.rollouts!r}"
            )
        if self.rollouts == "server" and not self._gguf_model:
            raise ValueError(
                f"rollouts 'server': the model server plays GGUF models (packaged or a .gguf "
                f"file), not {self.model!r}"
            )
        if self.distill_steps not in ("all", "flagged"):
            raise ValueError(
                f"distill_steps must be 'all' or 'flagged', got {self.distill_steps!r}"
            )
        if self.rollback_drop is not None and not 0 <= self.rollback_drop <= 1:
            raise ValueError(f"rollback_drop must be in [0, 1], got {self.rollback_drop}")
        local = {FAILURE_HINTS_SUFFIX, REEXPLORE_SUFFIX} & set(self.suffixes)
        if self.env_url is not None and local:
            raise ValueError(
                f"arm {self.arm}: {', '.join(sorted(local))} replays episodes in a local env; "
                "not with env_url"
            )

    @property
    def suffixes(self) -> tuple[str, ...]:
        """The arm's suffixes (:func:`~feedbackgym.config.arm_suffixes`)."""
        return arm_suffixes(self.arm)

    @property
    def failure_hints(self) -> bool:
        """Whether failed groups are replayed with hints (``+failure-hints``)."""
        return FAILURE_HINTS_SUFFIX in self.suffixes

    @property
    def distill(self) -> bool:
        """Whether failed episodes are distilled from the model reading the feedback."""
        return DISTILL_SUFFIX in self.suffixes

    @property
    def _gguf_model(self) -> bool:
        return self.model == "packaged" or self.model.endswith(".gguf")

    @property
    def served_rollouts(self) -> bool:
        """Whether the model server plays the episodes (``rollouts``, ``auto`` resolved)."""
        return self.rollouts == "server" or (self.rollouts == "auto" and self._gguf_model)

    @property
    def rounds(self) -> int:
        """Training rounds (one optimizer step each)."""
        return self.total_rounds

    @property
    def batch_episodes(self) -> int:
        """Episodes a round plays."""
        return self.groups * self.group_size

    def arm_config(self, base: FeedbackConfig) -> FeedbackConfig:
        """The arm's config, hints and reviews in ``info`` only (the prompt carries them)."""
        return merge_config(super().arm_config(base), _TEXT_CHANNELS, source="the LLM trainer")

    def round_seeds(self, round_: int) -> list[int]:
        """The seeds of round ``round_``'s groups (distinct, cycling through the pool)."""
        start = self.seed * 1000
        return [start + (round_ * self.groups + g) % self.seed_pool for g in range(self.groups)]

    def env_arguments(self) -> dict[str, Any]:
        """``gym.make``'s keyword arguments: text observations, the training time limit."""
        return {"obs_mode": "text", "max_episode_steps": self.max_turns, **self.env_kwargs}

    def to_json(self) -> str:
        """The config as JSON."""
        return config_json(self)

    @classmethod
    def from_json(cls, text: str) -> LLMRunConfig:
        """Reads a config written by :meth:`to_json`."""
        data = json.loads(text)
        data["feedback"] = FeedbackConfig.from_mapping(data["feedback"], source="config.json")
        return cls(**data)
