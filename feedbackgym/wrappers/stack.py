"""``make``: an env with its whole feedback stack, from one feedback config.

The stack is ``FadeGuideToReview(Reexplore(AddReview(AddGuide(AddExplorationBonus(
ShapeWithSubgoals(env))))))``, optionally inside ``RecordTrajectories``; ``Reexplore``
passes every call through unless the config has a ``reexplore`` section. Every
setting comes from the config, whose defaults are the project's one set of
defaults. ``feedbackgym.make`` is this function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym

from feedbackgym.config import (
    ARM_PRESETS,
    ARM_SUFFIX_HELP,
    BASE_ARMS,
    NETWORK_FIELDS,
    FeedbackConfig,
    load_config,
)
from feedbackgym.errors import ConfigError
from feedbackgym.wrappers.curriculum import WidenTasks
from feedbackgym.wrappers.explore import AddExplorationBonus, bonus_kwargs
from feedbackgym.wrappers.guide import AddGuide
from feedbackgym.wrappers.reexplore import Reexplore
from feedbackgym.wrappers.review import AddReview
from feedbackgym.wrappers.schedule import FadeGuideToReview
from feedbackgym.wrappers.shaping import ShapeWithSubgoals

__all__ = ["make", "resolve_feedback"]


def _generator_as(fields: dict[str, Any], name: str) -> dict[str, Any]:
    """A section's fields with ``generator`` renamed to the wrapper's ``name`` argument."""
    generator = fields.pop("generator")
    return {**fields, name: generator}


def resolve_feedback(feedback: FeedbackConfig | str | Path | None) -> FeedbackConfig:
    """The config ``feedback`` names: a config, an arm's preset, a file, or the defaults.

    A string without a file extension is an arm's name.

    Raises:
        ConfigError: An unknown arm, or a file that cannot be read or validated.

    Example:
        >>> config = resolve_feedback("guide+shaping")
        >>> config.schedule.arm, config.shaping.scale
        ('guide+shaping', 1.0)
    """
    if feedback is None:
        return FeedbackConfig()
    if isinstance(feedback, FeedbackConfig):
        return feedback
    if isinstance(feedback, str) and not Path(feedback).suffix:
        if feedback not in ARM_PRESETS:
            raise ConfigError(
                f"{feedback!r} is neither an arm ({', '.join(BASE_ARMS)}; {ARM_SUFFIX_HELP}) "
                "nor a .yaml, .yml or .toml config file"
            )
        return FeedbackConfig.for_arm(feedback)
    return load_config(feedback)


def make(
    env_id: str | gym.Env[Any, Any],
    feedback: FeedbackConfig | str | Path | None = None,
    *,
    record: Any = None,
    **env_kwargs: Any,
) -> gym.Env[Any, Any]:
    """Builds ``env_id`` with the whole feedback stack that ``feedback`` describes.

    Args:
        env_id: A registered id (made with ``gym.make(env_id, **env_kwargs)``)
            or an env already made (a third-party env with subgoals).
        feedback: A :class:`~feedbackgym.config.FeedbackConfig`, an arm's name
            (its preset, e.g. ``"guide-then-review"``, or ``"guide-then-review+shaping"``
            with shaping), the path of a YAML or
            TOML config file (followed: a valid edit applies at the next
            ``set_progress``; a trainer's controller overrides it), or ``None``
            for the defaults.
        record: A :class:`~feedbackgym.datasets.TrajectoryStore` or its path
            (subprocess workers: each writes its own shard) to record every
            episode to, or ``None``.
        **env_kwargs: Passed to ``gym.make``.

    Raises:
        ConfigError: A bad config or config file.

    Example:
        >>> import feedbackgym
        >>> env = feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", feedback="guide-then-review")
        >>> _, info = env.reset(seed=0)
        >>> info["feedback"]["phase"], "hint_next" in env.observation_space.spaces
        ('guide', True)
    """
    config = resolve_feedback(feedback)
    env = gym.make(env_id, **env_kwargs) if isinstance(env_id, str) else env_id
    # Each section's fields are its wrapper's keyword arguments, by design, but the ones the
    # trainers' networks read (NETWORK_FIELDS: which network reads a vector channel).
    env = WidenTasks(env)  # the curriculum's width, handed on by FadeGuideToReview
    env = ShapeWithSubgoals(env, **config.shaping.model_dump())
    env = AddExplorationBonus(env, **bonus_kwargs(config.explore))
    guide, review = (
        section.model_dump(exclude=set(NETWORK_FIELDS)) for section in (config.guide, config.review)
    )
    env = AddGuide(env, **_generator_as(guide, "guide"))
    env = AddReview(env, **_generator_as(review, "reviewer"))
    env = Reexplore(env, config.reexplore)
    followed = isinstance(feedback, (str, Path)) and feedback not in ARM_PRESETS
    env = FadeGuideToReview(
        env, config=str(feedback) if followed else config.model_dump(mode="json")
    )
    if record is None:
        return env
    from feedbackgym.wrappers.record import RecordTrajectories

    task_id = env_id if isinstance(env_id, str) else type(env.unwrapped).__name__
    return RecordTrajectories(env, record, task_id=task_id)
