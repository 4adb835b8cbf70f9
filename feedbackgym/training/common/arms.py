"""The comparison arms: presets of one feedback config; one stack, the schedule decides who speaks.

Every arm gets the same observation space (hint and review fields are zero
when their weight is zero), so networks are comparable across arms. Who speaks:

* ``sparse``: no hints or reviews.
* ``guide``: hints (vector; half the episodes unguided), all training long.
* ``review``: reviews (a vector summary of the previous episode, read by the critic alone
  unless ``review.reader`` says ``actor``), all training long.
* ``guide-then-review``: hints first, then a cross-fade into reviews.
* ``review-then-guide``: the reverse order.
* ``explore``: no hints or reviews; a count-based exploration bonus instead, β/√n on
  the n-th visit of an observation's SimHash code (Tang et al. 2017; see
  :class:`~feedbackgym.wrappers.AddExplorationBonus`): the baseline that explores
  without feedback. No maintained implementation fits the stack: sb3-contrib has no
  exploration bonus, rllte-core (1.0.1, May 2024) pins matplotlib, seaborn and
  huggingface-hub to old versions and its RND/E3B modules take image or flat-vector
  batches, not Dict observations, and CleanRL's RND is a script for Atari envpool.

Each comes with shaping off (the plain name: the env reward only) and on
(``guide+shaping``, ...; ``shaping`` is sparse with shaping, ``explore+shaping``
explore's): shaping from subgoal progress all training long, so the gain of hints and
reviews can be told apart from the shaping's (see :data:`feedbackgym.config.ARM_PRESETS`).
The bonus is not combined with hints or reviews: it is a baseline without feedback.

Shaping stays on for the whole run when an arm has it: withdrawing it with the hints
left the policy with the sparse reward alone and collapsed it after the switch
(measured on OpsIncidentEasy, see the README).
Hints are withheld from whole episodes (half of them), not from single steps: with
30% of single hints dropped the policy leaned on the hints (0-17% success with them
masked while 84% with them) and lost a third of its success at the switch; with
half the episodes unguided it learns to play without them and keeps its success.
"""

from __future__ import annotations

from typing import Any, ClassVar

from feedbackgym.config import FeedbackConfig, checked_arm, merge_config
from feedbackgym.control import FeedbackController
from feedbackgym.errors import ConfigError
from feedbackgym.schedules import ARMS

__all__ = ["ArmFeedback", "arm_config", "checked_keep_checkpoints", "rounds_for"]


def rounds_for(steps: int, n_envs: int, n_steps: int) -> int:
    """Training rounds (rollouts of ``n_envs`` x ``n_steps``) in ``steps`` env steps, at least 1."""
    return max(1, steps // (n_envs * n_steps))


def checked_keep_checkpoints(keep: int) -> int:
    """Returns ``keep``, the round checkpoints a run keeps (0: every one).

    Raises:
        ValueError: ``keep`` is negative.
    """
    if keep < 0:
        raise ValueError(f"keep_checkpoints must be >= 0 (0 keeps every one), got {keep}")
    return keep


def arm_config(arm: str, base: FeedbackConfig, rounds: int) -> FeedbackConfig:
    """The config of ``arm`` in a run of ``rounds`` rounds: the arm's preset on ``base``.

    Raises:
        ConfigError: Unknown arm, or a schedule counted in steps.

    Example:
        >>> config = arm_config("sparse", FeedbackConfig(), rounds=40)
        >>> config.schedule.arm, config.schedule.total, config.shaping.scale
        ('sparse', 40.0, 0.0)
    """
    if base.schedule.unit != "rounds":
        raise ConfigError(
            "schedule.unit: a run counts its schedule in rounds (its length sets the total)"
        )
    return FeedbackConfig.for_arm(arm, merge_config(base, {"schedule": {"total": rounds}}))


class ArmFeedback:
    """The feedback of one run of an arm, for the trainers' run configs (a mixin).

    The class it is mixed into has ``arm``, ``rounds``, ``feedback`` (the base
    config), ``feedback_file`` (a file to follow instead, or ``None``) and
    ``feedback_overrides`` (``{section: {field: value}}`` applied on top of
    every version read: command-line flags override the file), ``seed`` and
    ``restart_demos`` (expert episodes to restart backwards along: with N > 0
    the run's ``reexplore`` section plays N demonstrations on the seeds
    behaviour cloning reads, ``seed`` on; an arm without ``+reexplore`` gets
    them alone, no review restarts).

    Attributes:
        trained_arms: The arms the trainer takes (:data:`~feedbackgym.schedules.ARMS`, the
            vector trainers'; the language-model trainer's
            :data:`~feedbackgym.schedules.LLM_ARMS`); another is refused as the
            commands refuse it (:func:`~feedbackgym.config.checked_arm`).
    """

    trained_arms: ClassVar[tuple[str, ...]] = ARMS

    arm: str
    seed: int
    feedback: FeedbackConfig
    feedback_file: str | None
    feedback_overrides: dict[str, Any]
    restart_demos: int

    @property
    def rounds(self) -> int:
        """Training rounds of the run (the class mixed into defines it)."""
        raise NotImplementedError

    def arm_config(self, base: FeedbackConfig) -> FeedbackConfig:
        """The run's config from ``base`` (the file as read, or ``feedback``).

        Raises:
            ConfigError: A bad override or arm.
        """
        checked_arm(self.arm, self.trained_arms)
        merged = merge_config(base, self.feedback_overrides, source="run overrides")
        config = arm_config(self.arm, merged, self.rounds)
        if not self.restart_demos:
            return config
        section = config.reexplore.model_dump() if config.reexplore is not None else {"prob": 0.0}
        demos = {"demonstrations": self.restart_demos, "demo_seed": self.seed}
        return merge_config(config, {"reexplore": {**section, **demos}}, source="restart demos")

    def controller(self) -> FeedbackController:
        """A new controller for the run, following ``feedback_file`` if set."""
        if self.feedback_file is not None:
            return FeedbackController(self.feedback_file, transform=self.arm_config)
        return FeedbackController(self.arm_config(self.feedback))
