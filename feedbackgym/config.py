"""One validated feedback config, from YAML or TOML, re-read when its file changes.

Example file (``feedback.yaml``)::

    guide: {every: 4, lookahead: 2, dropout: 0.1, channels: [vector, info]}
    review: {window: 20, channels: [info, credit]}
    schedule: {arm: guide-then-review+shaping, switch_at: 0.4, fade: 5, total: 100, unit: rounds,
               adaptive: {metric: return, window: 10, min_success: 0.3}}
    shaping: {gamma: 0.99, scale: 1.0, terminal: keep}
    retention: {hot_days: 7, cold_days: 90}
    reliance: {raise_above: 0.2, lower_below: 0.05, step: 0.1, min_dropout: 0.1, max_dropout: 0.9}
    alert: {drop: 0.2, rounds: 3, reading: cumulative, floor: 0.1, smoothing: 0.15, noise: 3.0}

:class:`FeedbackConfig` is the single description of a feedback stack and the
single home of its defaults: :func:`feedbackgym.make` builds the stack from it,
the comparison's arms are presets of it (:meth:`FeedbackConfig.for_arm`), and
the trainers' configs embed it. Every field has a default (the settings the
comparisons measured best), so an empty file is a valid config. Errors raise
:class:`~feedbackgym.errors.ConfigError` naming the field. :class:`ConfigWatcher`
re-reads the file when it changes: a valid edit is applied and logged with a
timestamp; an invalid one (or one that changes a channel, which would change
the observation space mid-run) is rejected with a logged reason and the old
config is kept.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from feedbackgym.errors import ConfigError
from feedbackgym.webhook import checked_webhook_url

__all__ = [
    "ARM_MODIFIERS",
    "ARM_PRESETS",
    "ARM_SUFFIX_HELP",
    "BASE_ARMS",
    "ARM_SPEAKERS",
    "DISTILL_SUFFIX",
    "DEFAULT_DEADLINE_MS",
    "EXPLORE_ARM",
    "FAILURE_HINTS_SUFFIX",
    "HINT_FIELDS",
    "REVIEW_FIELDS",
    "LLM_ONLY_SUFFIXES",
    "NETWORK_FIELDS",
    "VECTOR_ONLY_SUFFIXES",
    "CRITIC_HINTS_SUFFIX",
    "CURRICULUM_SUFFIX",
    "CurriculumConfig",
    "REEXPLORE_SUFFIX",
    "SHAPING_SUFFIX",
    "AdaptiveConfig",
    "AlertConfig",
    "ConfigWatcher",
    "ExploreConfig",
    "FeedbackConfig",
    "GuideConfig",
    "ReexploreConfig",
    "RelianceConfig",
    "RestartPoint",
    "RetentionConfig",
    "ReviewConfig",
    "ScheduleConfig",
    "ShapingConfig",
    "checked_arm",
    "checked_source",
    "load_config",
    "arm_suffixes",
    "merge_config",
    "split_arm",
    "split_generator_name",
]

logger = logging.getLogger(__name__)

DEFAULT_DEADLINE_MS = 50.0
"""How long a step waits for feedback from a service or an off-step generator (the
spec's latency budget is 100 ms from trajectory to feedback)."""

GuideChannel = Literal["text", "vector", "info"]
ReviewChannel = Literal["text", "vector", "info", "credit"]
HINT_FIELDS: tuple[str, ...] = ("hint_next", "hint_present", "hint_targets", "hint_kind")
"""The observation keys the guide's ``vector`` channel adds (``hint_targets`` and ``hint_kind``
where the env names targets and subgoal kinds): what ``guide.reader = "critic"`` keeps from the
actor."""
REVIEW_FIELDS: tuple[str, ...] = ("review_reached", "review_flag", "review_present")
"""The observation keys the review's ``vector`` channel adds (a summary of the previous
episode): what ``review.reader = "critic"``, the default, keeps from the actor."""
NETWORK_FIELDS: frozenset[str] = frozenset({"reader"})
"""Fields of the guide and review sections that a trainer's network reads, not their
wrappers: every other field of a section is its wrapper's keyword argument."""
VectorReader = Literal["actor", "critic"]
"""Who reads a ``vector`` channel in the vector trainers' networks: ``"actor"`` (the policy
and the value function) or ``"critic"`` (the value function alone: the policy's input
carries none of it, so the policy cannot come to depend on it)."""
HintLevel = Literal["phase", "target", "action"]
"""What a hint or review may disclose (:data:`feedbackgym.core.HINT_LEVELS`)."""

ARM_SPEAKERS: dict[str, tuple[str, ...]] = {
    "sparse": (),
    "guide": ("guide",),
    "review": ("review",),
    "guide-then-review": ("guide", "review"),
    "review-then-guide": ("review", "guide"),
}
"""Who speaks in each arm's schedule, in order: with two speakers the schedule switches
from the first to the second (see :func:`feedbackgym.schedules.make_schedule`)."""

SHAPING_SUFFIX = "+shaping"
"""An arm named with this suffix has subgoal shaping on; its plain name has it off
(``shaping`` alone is sparse feedback with shaping on)."""


def _arm_name(speakers: str, shaped: bool) -> str:
    if not shaped:
        return speakers
    return "shaping" if speakers == "sparse" else speakers + SHAPING_SUFFIX


EXPLORE_ARM = "explore"
"""The arm without feedback that has the count-based exploration bonus on (its
``explore`` section; see :class:`ExploreConfig`), and ``explore+shaping`` with shaping:
both speak as ``sparse``. Every other arm has the bonus off."""

REEXPLORE_SUFFIX = "+reexplore"
"""An arm named with this suffix restarts training episodes from states its reviews
flag (the ``reexplore`` section, see :class:`ReexploreConfig`), whoever speaks."""

FAILURE_HINTS_SUFFIX = "+failure-hints"
"""An arm with a guide named with this suffix hints only in episodes that start where
the policy recently failed (``guide.when = "after-failure"``, no dropout)."""

CURRICULUM_SUFFIX = "+curriculum"
"""An arm named with this suffix trains on a curriculum of tasks the controller widens
towards the env's preset as training success rises (the ``curriculum`` section, see
:class:`CurriculumConfig`), whoever speaks; validation plays the preset."""

CRITIC_HINTS_SUFFIX = "+critic-hints"
"""An arm with a guide named with this suffix feeds the hints to the critic only
(``guide.reader = "critic"``): the actor's input carries no hint, so the policy it learns
plays the same with hints shown or masked; every episode is hinted (no dropout)."""

DISTILL_SUFFIX = "+distill"
"""An arm with a guide or a review named with this suffix has the language-model trainer
distil the model reading the hint or review (the teacher) into the model without it, on
the model's own failed episodes (``train-llm`` only: it sets no feedback section)."""

ARM_MODIFIERS: dict[str, dict[str, Any]] = {
    REEXPLORE_SUFFIX: {"reexplore": {}},
    CURRICULUM_SUFFIX: {"curriculum": {}},
    FAILURE_HINTS_SUFFIX: {"guide": {"when": "after-failure", "dropout": 0.0}},
    DISTILL_SUFFIX: {},
    CRITIC_HINTS_SUFFIX: {"guide": {"reader": "critic", "dropout": 0.0}},
}
"""What each arm suffix after ``+shaping`` sets, in the order the suffixes are written."""

LLM_ONLY_SUFFIXES: tuple[str, ...] = (DISTILL_SUFFIX,)
"""The suffixes only the language-model trainer acts on (the other trainers refuse them)."""
VECTOR_ONLY_SUFFIXES: tuple[str, ...] = (CRITIC_HINTS_SUFFIX, CURRICULUM_SUFFIX)
"""The suffixes only the vector trainers (torch, SB3) act on (``train-llm`` refuses them): a
language model reads its hints in the prompt and has no critic to hand them to, and its
rounds are too few for the curriculum's moving average."""

_BASE_ARMS: dict[str, tuple[str, bool]] = {
    **{
        _arm_name(speakers, shaped): (speakers, shaped)
        for speakers in ARM_SPEAKERS
        for shaped in (False, True)
    },
    EXPLORE_ARM: ("sparse", False),
    EXPLORE_ARM + SHAPING_SUFFIX: ("sparse", True),
}


def _modified_arms() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Every arm name: the base arms, then each with a combination of the suffixes, in order."""
    arms: dict[str, tuple[str, tuple[str, ...]]] = {base: (base, ()) for base in _BASE_ARMS}
    for suffixes in itertools.chain.from_iterable(
        itertools.combinations(ARM_MODIFIERS, count) for count in range(1, len(ARM_MODIFIERS) + 1)
    ):
        for base, (speakers, _) in _BASE_ARMS.items():
            guided = "guide" in ARM_SPEAKERS[speakers]
            if {FAILURE_HINTS_SUFFIX, CRITIC_HINTS_SUFFIX} & set(suffixes) and not guided:
                continue  # no guide to gate or to hand to the critic
            if DISTILL_SUFFIX in suffixes and not ARM_SPEAKERS[speakers]:
                continue  # no hint or review to distil
            if set(suffixes) & set(LLM_ONLY_SUFFIXES) and set(suffixes) & set(VECTOR_ONLY_SUFFIXES):
                continue  # no trainer takes both
            if {REEXPLORE_SUFFIX, CURRICULUM_SUFFIX} <= set(suffixes):
                continue  # restarts replay a seed's actions, at the width it was played at
            arms[base + "".join(suffixes)] = (base, suffixes)
    return arms


BASE_ARMS: tuple[str, ...] = tuple(_BASE_ARMS)
"""The arms without a suffix of :data:`ARM_MODIFIERS`."""
ARM_SUFFIX_HELP = (
    f"each optionally followed by {REEXPLORE_SUFFIX}, {CURRICULUM_SUFFIX} (train and compare "
    f"only), with a guide {FAILURE_HINTS_SUFFIX}, with a guide or a review {DISTILL_SUFFIX} "
    f"(train-llm only) and with a guide {CRITIC_HINTS_SUFFIX} (train and compare only), in that "
    "order"
)
"""How the arm suffixes are written, for messages."""


_ARMS = _modified_arms()

ARM_PRESETS: dict[str, dict[str, Any]] = {}
"""What each comparison arm sets on top of a base config: every arm of
:data:`ARM_SPEAKERS` with shaping off (scale 0) and with shaping on (the base
config's shaping: scale 1 by default), and :data:`EXPLORE_ARM` with shaping off
and on; the ``explore`` arms turn the exploration bonus on (the base config's
``explore`` section, or its defaults), every other arm turns it off. Each may end
in :data:`REEXPLORE_SUFFIX` and, with a guide, :data:`FAILURE_HINTS_SUFFIX`
(:data:`ARM_MODIFIERS`); the others have no restarts and the fixed-dropout guide.
The schedule decides who speaks; every arm has the guide and review in the vector
and info channels (:data:`ARM_CHANNELS`), so all arms share one observation space."""
for _name, (_base, _suffixes) in _ARMS.items():
    _preset: dict[str, Any] = {
        **({} if _BASE_ARMS[_base][1] else {"shaping": {"scale": 0.0}}),
        "explore": {} if _base.removesuffix(SHAPING_SUFFIX) == EXPLORE_ARM else None,
        "reexplore": None,
        "curriculum": None,
    }
    for _suffix in _suffixes:
        for _section, _values in ARM_MODIFIERS[_suffix].items():
            _preset[_section] = {**(_preset.get(_section) or {}), **_values}
    ARM_PRESETS[_name] = _preset


def split_arm(arm: str) -> tuple[str, bool]:
    """An arm's name as who speaks (a key of :data:`ARM_SPEAKERS`) and whether it shapes.

    Example:
        >>> split_arm("guide-then-review+shaping"), split_arm("review"), split_arm("shaping")
        (('guide-then-review', True), ('review', False), ('sparse', True))
        >>> split_arm("shaping+reexplore"), arm_suffixes("guide+shaping+reexplore+failure-hints")
        (('sparse', True), ('+reexplore', '+failure-hints'))

    Raises:
        ConfigError: Unknown arm (the message names the valid ones).
    """
    try:
        return _BASE_ARMS[_ARMS[arm][0]]
    except KeyError:
        raise ConfigError(
            f"unknown arm {arm!r}; choose one of {', '.join(BASE_ARMS)}, {ARM_SUFFIX_HELP}"
        ) from None


def arm_suffixes(arm: str) -> tuple[str, ...]:
    """The suffixes of :data:`ARM_MODIFIERS` that ``arm`` ends in, in order.

    Raises:
        ConfigError: Unknown arm.
    """
    split_arm(arm)
    return _ARMS[arm][1]


def checked_arm(arm: str, arms: tuple[str, ...] | list[str]) -> str:
    """``arm`` if it is one of ``arms`` (the arms a command trains).

    Raises:
        ConfigError: An unknown arm (the message gives the grammar, not every name), or one
            whose suffixes another trainer owns.

    Example:
        >>> checked_arm("shaping+tutor", ["shaping"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        feedbackgym.errors.ConfigError: unknown arm 'shaping+tutor'; choose one of sparse, ...
        >>> checked_arm("guide+distill", ["guide"])
        Traceback (most recent call last):
        ...
        feedbackgym.errors.ConfigError: arm 'guide+distill' is not for this command: +distill \
is train-llm's
    """
    if arm in arms:
        return arm
    suffixes = arm_suffixes(arm)  # raises for an unknown arm
    owned = [
        f"{suffix} is train-llm's"
        if suffix in LLM_ONLY_SUFFIXES
        else f"{suffix} is train and compare's (the vector trainers')"
        for suffix in suffixes
        if suffix in LLM_ONLY_SUFFIXES + VECTOR_ONLY_SUFFIXES
    ]
    raise ConfigError(f"arm {arm!r} is not for this command: {'; '.join(owned) or 'unknown'}")


def split_generator_name(name: str) -> tuple[str, str]:
    """A generator's ``"module:Class"`` name as ``(module, attribute path)``.

    Example:
        >>> split_generator_name("my_critics:RubricReviewer")
        ('my_critics', 'RubricReviewer')

    Raises:
        ValueError: ``name`` is not of that form.
    """
    module, sep, attribute = name.partition(":")
    if not (module and sep and attribute):
        raise ValueError(f"a generator is named as 'module:Class', got {name!r}")
    return module, attribute


def checked_source(source: str) -> str:
    """``source`` if it is ``"local"`` or a ``tcp://`` or ``ipc://`` service address.

    Raises:
        ValueError: It is neither.
    """
    if source != "local" and not source.startswith(("tcp://", "ipc://")):
        raise ValueError(f"source must be 'local' or a tcp:// or ipc:// address, got {source!r}")
    return source


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Generated(_Section):
    """Where a section's feedback comes from: a generator in-process, or a service."""

    generator: str | None = None
    source: str = "local"
    deadline_ms: float = Field(DEFAULT_DEADLINE_MS, gt=0)

    @field_validator("generator")
    @classmethod
    def _named_as_module_class(cls, generator: str | None) -> str | None:
        if generator is not None:
            split_generator_name(generator)
        return generator

    @field_validator("source")
    @classmethod
    def _local_or_address(cls, source: str) -> str:
        return checked_source(source)

    @model_validator(mode="after")
    def _one_origin(self) -> Any:
        if self.generator is not None and self.source != "local":
            raise ValueError(
                "generator and source exclude each other: a service runs its own generator "
                "(feedbackgym serve-feedback --generator)"
            )
        return self


class GuideConfig(_Generated):
    """Guide settings.

    Attributes:
        generator: The guide, named as ``"module:Class"`` (any object meeting
            :class:`~feedbackgym.feedback.generators.Guide`); ``None``: the
            built-in :class:`~feedbackgym.feedback.SubgoalGuide`.
        source: ``"local"`` (in-process) or a ``feedbackgym serve-feedback`` address.
        deadline_ms: Longest a step waits for a hint from a service or an
            off-step guide; a hint later than that is skipped and counted.
        every: Guide density: a hint is due every ``every`` steps.
        lookahead: Subgoals a hint names.
        dropout: Chance a due hint is withheld even at full guide weight
            (where the reliance rule starts, when it is on).
        dropout_scope: ``"episode"`` (whole episodes unguided: the policy
            learns to play without hints) or ``"step"`` (single hints).
        when: ``"always"`` (every episode may be hinted, less the dropout) or
            ``"after-failure"`` (only episodes that start where the policy
            recently failed; see :class:`~feedbackgym.wrappers.AddGuide`).
        level: What a hint may disclose (:data:`~feedbackgym.core.HINT_LEVELS`):
            ``"phase"`` (default: the kind of next step, only observed services),
            ``"target"`` (the hidden target) or ``"action"`` (the expert's action).
        channels: Where hints go.
        reader: Who reads the ``vector`` channel in the vector trainers' networks
            (:data:`VectorReader`): ``"actor"`` (default) or ``"critic"`` (the
            value function only; :data:`CRITIC_HINTS_SUFFIX`).

    The defaults are the training recipe the arms use (half the episodes
    unguided); :class:`~feedbackgym.wrappers.AddGuide` alone hints in every
    episode unless asked otherwise.
    """

    every: int = Field(1, ge=1)
    lookahead: int = Field(2, ge=1)
    dropout: float = Field(0.5, ge=0.0, le=1.0)
    dropout_scope: Literal["step", "episode"] = "episode"
    when: Literal["always", "after-failure"] = "always"
    level: HintLevel = "phase"
    channels: tuple[GuideChannel, ...] = ("info",)
    reader: VectorReader = "actor"


class ReviewConfig(_Generated):
    """Review settings.

    Attributes:
        generator: The reviewer, named as ``"module:Class"`` (any object meeting
            :class:`~feedbackgym.feedback.generators.Reviewer`); ``None``: the
            built-in :class:`~feedbackgym.feedback.TrajectoryReviewer`.
        source: ``"local"`` (in-process) or a ``feedbackgym serve-feedback`` address.
        deadline_ms: Longest the last step of an episode waits for its review
            from a service or an off-step reviewer; a later one lands on a
            later step.
        window: Review window length N (the last N steps).
        stall_steps: Steps without progress that count as a stall.
        level: What a review may disclose, as the guide's ``level``: ``"phase"``
            (default), ``"target"`` or ``"action"`` (adds the expert's action).
        channels: Where reviews go.
        reader: Who reads the ``vector`` channel in the vector trainers' networks:
            ``"critic"`` (default: a review describes the previous episode, so it
            informs the value, not the next action) or ``"actor"``.
    """

    window: int = Field(40, ge=1)
    stall_steps: int = Field(8, ge=1)
    level: HintLevel = "phase"
    channels: tuple[ReviewChannel, ...] = ("info",)
    reader: VectorReader = "critic"


def _in_order(section: Any, *pairs: tuple[str, str]) -> Any:
    """``section``, when each pair's first field does not exceed its second.

    Raises:
        ValueError: One does, naming both fields.
    """
    for low, high in pairs:
        if getattr(section, low) > getattr(section, high):
            raise ValueError(f"{low} must not exceed {high}")
    return section


class AdaptiveConfig(_Section):
    """The adaptive switch rule (see :class:`feedbackgym.schedules.TrendRule`).

    The defaults follow the training return and hold the guide while the
    training success is under 30% (what ``feedbackgym compare`` measured best).
    """

    metric: Literal["loss", "return"] = "return"
    window: int = Field(10, ge=2)
    sooner_below: float = Field(0.01, ge=0.0)
    later_above: float = Field(0.05, ge=0.0)
    shift: float = Field(0.05, ge=0.0, le=1.0)
    min_switch: float = Field(0.1, ge=0.0, le=1.0)
    max_switch: float = Field(0.8, ge=0.0, le=1.0)
    min_success: float = Field(0.3, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> AdaptiveConfig:
        return _in_order(self, ("sooner_below", "later_above"), ("min_switch", "max_switch"))


class ScheduleConfig(_Section):
    """The guide → review schedule.

    Attributes:
        arm: Which comparison arm the schedule is (one of :data:`ARM_PRESETS`; a
            ``+shaping`` arm has the schedule of its plain name).
        switch_at: Where the fade starts, as a fraction of training.
        fade: Cross-fade length, in ``unit`` (``None``: 10% of training, at least 5).
        total: Training length, in ``unit``.
        unit: ``"rounds"`` or ``"steps"``.
        adaptive: The adaptive rule, or ``None`` for a fixed switch.
    """

    arm: str = "guide-then-review+shaping"
    switch_at: float = Field(0.4, ge=0.0, le=1.0)
    fade: float | None = Field(None, ge=0)
    total: float = Field(100, gt=0)
    unit: Literal["rounds", "steps"] = "rounds"
    adaptive: AdaptiveConfig | None = AdaptiveConfig()

    @field_validator("arm")
    @classmethod
    def _known_arm(cls, arm: str) -> str:
        split_arm(arm)
        return arm

    @property
    def fade_length(self) -> float:
        """The fade length in ``unit``: ``fade``, or 10% of training (at least 5)."""
        return self.fade if self.fade is not None else max(5.0, 0.1 * self.total)


class ShapingConfig(_Section):
    """Potential-based shaping settings (see :class:`~feedbackgym.wrappers.ShapeWithSubgoals`).

    Attributes:
        gamma: Discount of the shaping term (train the learner with the same).
        scale: Potential of a finished task (0: no shaping).
        terminal: Potential of a terminal state: ``"keep"``, ``"zero"`` or
            ``"zero_on_harm"``.
        clip: The range ``[low, high]`` the reward (env reward plus shaping) is
            clipped to, so an outlier cannot break training (``None``: no clip).
            The default is wide of every reward the suite's envs give.
    """

    gamma: float = Field(0.99, gt=0.0, le=1.0)
    scale: float = Field(1.0, ge=0.0)
    terminal: Literal["zero", "keep", "zero_on_harm"] = "keep"
    clip: tuple[float, float] | None = (-10.0, 10.0)

    @field_validator("clip")
    @classmethod
    def _ordered(cls, clip: tuple[float, float] | None) -> tuple[float, float] | None:
        if clip is not None and not clip[0] < clip[1]:
            raise ValueError(f"clip must be [low, high] with low < high, got {list(clip)}")
        return clip


class ExploreConfig(_Section):
    """The count-based exploration bonus (see :class:`~feedbackgym.wrappers.AddExplorationBonus`).

    The ``explore`` arms turn it on (``explore: {}`` in a file: on, with these
    defaults); ``explore: null``, the default, is off.

    Attributes:
        scale: β, the bonus of a hash code's first visit (β/√n after n visits).
        bits: Length of the SimHash code (fewer bits: coarser cells, a bonus
            that decays sooner).
    """

    scale: float = Field(0.01, gt=0.0)
    bits: int = Field(16, ge=1)


RestartPoint = Literal["harmful", "stalled", "first", "last"]
"""Which of a review's re-explore points become restart points: its harmful steps, its
stalls, its first point or its last one."""


class ReexploreConfig(_Section):
    """Restarts: training episodes that start from states a review flagged, or along demos.

    The ``+reexplore`` arms turn it on (``reexplore: {}`` in a file: on, with these
    defaults); ``reexplore: null``, the default, is off. A reset with a seed
    (validation, a trainer's first reset) is always a true reset. See
    :class:`~feedbackgym.wrappers.Reexplore`.

    Attributes:
        prob: Chance a training reset starts from a restart point of a review
            (when there is one).
        points: Which review points become restart points.
        begin: ``"start"`` (restarts from the first round) or ``"switch"`` (from
            the schedule's switch, when the reviews begin).
        anneal_by: Fraction of training by which ``prob`` and ``demo_prob`` have
            fallen linearly to 0 (``None``: constant).
        gate_successes: Successes from a review point that drop it (it is
            learnt), or from a demonstration's start that move it back.
        gate_failures: Failures from a review point that move it back
            ``back_steps`` (it is too hard from there).
        back_steps: Steps a start moves back towards the true start.
        pool: Most review points kept (the oldest go first).
        demonstrations: Expert episodes to restart backwards along (0: none),
            played by the env's expert on seeds ``demo_seed, demo_seed + 1, ...``
            (the seeds behaviour cloning's ``bc_episodes`` use, so BC(N) and
            restarts along N read the same demonstrations).
        demo_seed: The first demonstration's seed.
        demo_prob: Chance a training reset starts along a demonstration whose
            start has not reached the true start yet (the rest: true resets).
    """

    prob: float = Field(0.5, ge=0.0, le=1.0)
    points: tuple[RestartPoint, ...] = Field(("first",), min_length=1)
    begin: Literal["start", "switch"] = "start"
    anneal_by: float | None = Field(None, gt=0.0, le=1.0)
    gate_successes: int = Field(3, ge=1)
    gate_failures: int = Field(3, ge=1)
    back_steps: int = Field(2, ge=1)
    pool: int = Field(32, ge=1)
    demonstrations: int = Field(0, ge=0)
    demo_seed: int = Field(0, ge=0)
    demo_prob: float = Field(0.8, ge=0.0, le=1.0)


class RetentionConfig(_Section):
    """Trajectory store retention, in days."""

    hot_days: float = Field(7, gt=0)
    cold_days: float = Field(90, gt=0)
    min_raw_days: float = Field(30, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> RetentionConfig:
        if self.cold_days < self.hot_days:
            raise ValueError("cold_days must be at least hot_days")
        if self.min_raw_days > self.cold_days:
            raise ValueError("min_raw_days must not exceed cold_days")
        return self


class CurriculumConfig(_Section):
    """The task curriculum the controller drives (see :mod:`feedbackgym.feedback.curriculum`).

    Training envs play tasks of a *width* in ``[0, 1]``: 0 is the env family's
    easiest preset, 1 the env's own preset, and the knobs between (services,
    hops, misleading alerts, faults, ...) are interpolated (an env takes a width
    through ``set_curriculum``). The width starts at ``start``; each round the
    training success at the width in force feeds a moving average (weight
    ``smoothing``), and after at least ``min_rounds`` rounds at a width the rule
    widens by ``step`` when the average is over ``widen_above`` and narrows by
    ``step`` when it is under ``narrow_below``: training batches sit where
    episodes both succeed and fail, so that they carry signal. Validation and
    evaluation always play the preset's test split, never the curriculum's width.

    Attributes:
        start: The width of the first round.
        step: How far one move widens or narrows.
        widen_above: Smoothed training success over which the width grows.
        narrow_below: Smoothed training success under which it shrinks.
        smoothing: The weight of each round in the moving average.
        min_rounds: Rounds at a width before it may move again.
        group: Episodes a group counts when the share of groups that carry signal
            (``1 - p^group - (1 - p)^group`` at success ``p``) is logged.
    """

    start: float = Field(0.0, ge=0.0, le=1.0)
    step: float = Field(0.25, gt=0.0, le=1.0)
    widen_above: float = Field(0.7, ge=0.0, le=1.0)
    narrow_below: float = Field(0.1, ge=0.0, le=1.0)
    smoothing: float = Field(0.3, gt=0.0, le=1.0)
    min_rounds: int = Field(3, ge=1)
    group: int = Field(8, ge=2)

    @model_validator(mode="after")
    def _ordered(self) -> CurriculumConfig:
        return _in_order(self, ("narrow_below", "widen_above"))


class RelianceConfig(_Section):
    """The guide-dependence rule (see :class:`feedbackgym.control.RelianceRule`).

    At each validation, hint reliance (success with hints shown minus with
    hints masked) sets the guide's dropout: above ``raise_above`` the dropout
    rises by ``step`` (more hints withheld), under ``lower_below`` it falls by
    ``step``, always inside ``[min_dropout, max_dropout]``.

    Attributes:
        raise_above: Reliance over which the dropout rises.
        lower_below: Reliance under which the dropout falls.
        step: How far one validation moves the dropout.
        min_dropout: Lowest dropout.
        max_dropout: Highest dropout.
    """

    raise_above: float = Field(0.2, ge=-1.0, le=1.0)
    lower_below: float = Field(0.05, ge=-1.0, le=1.0)
    step: float = Field(0.1, gt=0.0, le=1.0)
    min_dropout: float = Field(0.2, ge=0.0, le=1.0)
    max_dropout: float = Field(0.9, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> RelianceConfig:
        return _in_order(self, ("lower_below", "raise_above"), ("min_dropout", "max_dropout"))


class AlertConfig(_Section):
    """The reward-drop alert (see :class:`feedbackgym.control.RewardDropAlert`).

    The spec's rule, "the mean reward falls ``rounds`` rounds in a row by more
    than ``drop``", read on the rounds' mean reward smoothed (a moving average)
    and beyond its noise, one of two ways: ``"cumulative"`` (the default) fires
    when the mean fell in each of the last ``rounds`` rounds and by more than
    ``drop`` in total over them; ``"each"`` when it fell by more than ``drop``
    in each of them.

    Attributes:
        drop: Relative fall that counts (0.2: 20%).
        rounds: Consecutive falls that raise the alert.
        reading: ``"cumulative"`` or ``"each"``.
        floor: Falls count only from a mean of at least this magnitude, so that
            a mean going from a rare success back to 0 is not an alert (0: off).
        smoothing: Weight of each new round in the moving average the rule
            reads, in (0, 1] (1: the raw round means).
        noise: A fall counts only when larger than this many times the smoothed
            mean's spread (0: any fall).
        webhook: An http(s) URL each alert is POSTed to as JSON, besides the log
            warning (see :class:`feedbackgym.webhook.Webhook`; ``None``: none).
    """

    drop: float = Field(0.2, gt=0.0, lt=1.0)
    rounds: int = Field(3, ge=1)
    reading: Literal["cumulative", "each"] = "cumulative"
    floor: float = Field(0.1, ge=0.0)
    smoothing: float = Field(0.15, gt=0.0, le=1.0)
    noise: float = Field(3.0, ge=0.0)
    webhook: str | None = None

    @field_validator("webhook")
    @classmethod
    def _http_url(cls, webhook: str | None) -> str | None:
        return None if webhook is None else checked_webhook_url(webhook)


ARM_CHANNELS: dict[str, Any] = {
    "guide": {"channels": ("vector", "info")},
    "review": {"channels": ("vector", "info", "credit")},
}


class FeedbackConfig(_Section):
    """The whole feedback config: one description of a feedback stack.

    Example:
        >>> config = FeedbackConfig.for_arm("sparse")
        >>> config.schedule.arm, config.shaping.scale, config.guide.channels
        ('sparse', 0.0, ('vector', 'info'))
        >>> merge_config(config, {"guide": {"every": 4}}).guide.every
        4
    """

    guide: GuideConfig = GuideConfig()
    review: ReviewConfig = ReviewConfig()
    schedule: ScheduleConfig = ScheduleConfig()
    shaping: ShapingConfig = ShapingConfig()
    explore: ExploreConfig | None = None
    """The count-based exploration bonus, or ``None`` (the default) for none."""
    reexplore: ReexploreConfig | None = None
    """Restarts from reviewed states or along demonstrations, or ``None`` (the default)."""
    curriculum: CurriculumConfig | None = None
    """The task curriculum of the training envs, or ``None`` (the default): every
    training episode plays the env's own preset."""
    retention: RetentionConfig = RetentionConfig()
    reliance: RelianceConfig | None = None
    """The guide-dependence rule, which moves ``guide.dropout`` at each validation,
    or ``None`` (the default) for a fixed dropout."""
    alert: AlertConfig = AlertConfig()
    """The reward-drop alert, read once when the controller is made."""

    @classmethod
    def for_arm(cls, arm: str, base: FeedbackConfig | None = None) -> FeedbackConfig:
        """The preset of a comparison arm on top of ``base`` (default: the defaults).

        Example:
            >>> [FeedbackConfig.for_arm(arm).shaping.scale for arm in ("guide", "guide+shaping")]
            [0.0, 1.0]

        Raises:
            ConfigError: Unknown arm (the message names the valid ones).
        """
        split_arm(arm)
        overrides = {**ARM_CHANNELS, "schedule": {"arm": arm}}
        for section, values in ARM_PRESETS[arm].items():
            overrides[section] = (
                values if values is None else {**overrides.get(section, {}), **values}
            )
        return merge_config(base or cls(), overrides)

    @classmethod
    def from_mapping(cls, data: Any, source: str = "config") -> FeedbackConfig:
        """Validates ``data``; raises :class:`ConfigError` naming the bad field."""
        if data is None:
            data = {}
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}"
                for e in error.errors()
            )
            raise ConfigError(f"{source}: {problems}") from None

    @model_validator(mode="after")
    def _curriculum_without_restarts(self) -> FeedbackConfig:
        if self.curriculum is not None and self.reexplore is not None:
            raise ValueError(
                "curriculum and reexplore exclude each other: a restart replays its seed's "
                "actions, and under a curriculum the seed may draw another task at another width"
            )
        return self

    @model_validator(mode="after")
    def _critic_hints_not_in_the_text(self) -> FeedbackConfig:
        if self.guide.reader == "critic" and "text" in self.guide.channels:
            raise ValueError(
                "guide.reader 'critic' with the guide's 'text' channel would show the actor "
                "the hints its critic alone should read: drop one"
            )
        return self

    @model_validator(mode="after")
    def _dropout_in_reliance_range(self) -> FeedbackConfig:
        rule = self.reliance
        if rule is not None and not rule.min_dropout <= self.guide.dropout <= rule.max_dropout:
            raise ValueError(
                f"guide.dropout {self.guide.dropout} is outside [reliance.min_dropout, "
                f"reliance.max_dropout] = [{rule.min_dropout}, {rule.max_dropout}]"
            )
        return self

    def space_fields(self) -> tuple[Any, ...]:
        """The fields that shape observation spaces and networks, which cannot change mid-run."""
        return (self.guide.channels, self.review.channels, self.guide.reader, self.review.reader)

    def critic_fields(self) -> tuple[str, ...]:
        """The observation keys only the critic reads (the ``vector`` channels read by ``critic``).

        Example:
            >>> FeedbackConfig.for_arm("guide+shaping+critic-hints").critic_fields()[:2]
            ('hint_next', 'hint_present')
            >>> FeedbackConfig.for_arm("guide+shaping").critic_fields()
            ('review_reached', 'review_flag', 'review_present')
        """
        fields: tuple[str, ...] = ()
        if self.guide.reader == "critic":
            fields += HINT_FIELDS
        if self.review.reader == "critic":
            fields += REVIEW_FIELDS
        return fields

    def origin_fields(self) -> tuple[Any, ...]:
        """Where feedback comes from (generators, sources), fixed when the envs are made."""
        return tuple(
            (section.generator, section.source, section.deadline_ms)
            for section in (self.guide, self.review)
        )


def merge_config(
    config: FeedbackConfig, overrides: dict[str, Any], source: str = "overrides"
) -> FeedbackConfig:
    """``config`` with ``overrides`` (``{section: {field: value}}``) applied, validated.

    Nested dicts merge field by field; a value set to ``None``
    (``{"schedule": {"adaptive": None}}``) clears it.

    Raises:
        ConfigError: An override names an unknown field or has a bad value.
    """
    return FeedbackConfig.from_mapping(_merged(config.model_dump(), overrides), source=source)


def _merged(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    merged = dict(data)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_config(path: str | Path) -> FeedbackConfig:
    """Reads and validates a YAML (``.yaml``/``.yml``) or TOML (``.toml``) config file.

    Raises:
        ConfigError: Unreadable file, unknown extension, bad syntax or a bad field.
    """
    path = Path(path)
    return FeedbackConfig.from_mapping(_parse(path, _read(path)), source=str(path))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read config file: {error.strerror}") from None


def _parse(path: Path, raw: bytes) -> Any:
    suffix = path.suffix.lower()
    try:
        if suffix in (".yaml", ".yml"):
            import yaml

            return yaml.safe_load(raw)
        if suffix == ".toml":
            return tomllib.loads(raw.decode())
    except Exception as error:  # both parsers raise their own error types
        raise ConfigError(f"{path}: not valid {suffix[1:].upper()}: {error}") from None
    raise ConfigError(f"{path}: config files must end in .yaml, .yml or .toml")


class ConfigWatcher:
    """Re-reads a config file when it changes and keeps the last valid version.

    Args:
        path: The YAML or TOML file.
        transform: Applied to every version read (command-line overrides, an
            arm's preset); a :class:`ConfigError` it raises rejects the edit.

    Attributes:
        config: The config in force.
        version: 1 for the initial file, +1 per applied edit.
        changes: ``{"version", "time", "applied", "reason"}`` for every edit seen.

    Raises:
        ConfigError: The initial file is invalid (nothing to fall back on).
    """

    def __init__(
        self,
        path: str | Path,
        transform: Callable[[FeedbackConfig], FeedbackConfig] | None = None,
    ) -> None:
        self.path = Path(path)
        self.transform = transform or (lambda config: config)
        raw = _read(self.path)
        self.config = self._validated(raw)
        self.version = 1
        self._digest = hashlib.sha256(raw).hexdigest()
        self._mtime = self._stat()
        self.changes: list[dict[str, Any]] = []

    def _stat(self) -> float:
        try:
            return self.path.stat().st_mtime_ns
        except OSError:
            return -1

    def poll(self) -> bool:
        """Checks the file once; applies a valid edit. Returns whether the config changed."""
        mtime = self._stat()
        if mtime == self._mtime:
            return False
        self._mtime = mtime
        try:
            raw = _read(self.path)
        except ConfigError as error:
            return self._reject(str(error))
        digest = hashlib.sha256(raw).hexdigest()
        if digest == self._digest:
            return False
        self._digest = digest
        try:
            candidate = self._validated(raw)
        except ConfigError as error:
            return self._reject(str(error))
        if candidate.space_fields() != self.config.space_fields():
            return self._reject(
                f"{self.path}: channels and readers cannot change during a run "
                "(they shape the observation space and the networks)"
            )
        if candidate.origin_fields() != self.config.origin_fields():
            return self._reject(
                f"{self.path}: generators, sources and deadlines cannot change during a run "
                "(the envs are made with them)"
            )
        self.config = candidate
        self.version += 1
        self.changes.append(
            {"version": self.version, "time": time.time(), "applied": True, "reason": "valid edit"}
        )
        logger.info("config %s: applied version %d", self.path, self.version)
        return True

    def _validated(self, raw: bytes) -> FeedbackConfig:
        parsed = FeedbackConfig.from_mapping(_parse(self.path, raw), source=str(self.path))
        return self.transform(parsed)

    def _reject(self, reason: str) -> bool:
        self.changes.append(
            {"version": self.version, "time": time.time(), "applied": False, "reason": reason}
        )
        logger.warning("config edit rejected, keeping version %d: %s", self.version, reason)
        return False
