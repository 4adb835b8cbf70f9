"""The language agent's feedback arms: who speaks on which attempt at a seed, and what is kept.

The agent plays each seed ``attempts`` times in a row (attempt 1, 2, ...). An
arm says, per attempt, whether hints go into the prompt and which reviews the
system message carries (Reflexion-style memory, bounded by ``memory``). The
names are ``feedbackgym compare``'s where they make sense for a language agent:

* ``sparse``: no hints, no reviews;
* ``guide``: hints on every attempt, no reviews;
* ``review``: no hints; the reviews of the earlier attempts at the *same seed*;
* ``guide-then-review``: hints on the first attempt at a seed, none later; the
  later attempts carry the reviews of the earlier ones at that seed;
* ``guide+review`` (the default, what the agent did before it had arms): hints
  on every attempt, and the reviews of the last episodes *whatever their seed*.

Each episode is labelled with its arm and attempt in its env spec
(:class:`LabelAttempt`), which the trajectory store records and
``datasets export-chat`` reads back (:func:`attempt_label`).

Example:
    >>> arm = agent_arm("guide-then-review")
    >>> [arm.hints_on(a) for a in (1, 2, 3)], arm.memory, arm.reviews
    ([True, False, False], 'seed', True)
    >>> agent_arm("sparse").reviews
    False
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from feedbackgym.errors import ConfigError

__all__ = [
    "AGENT_ARMS",
    "DEFAULT_AGENT_ARM",
    "MEMORY_SCOPES",
    "AgentArm",
    "LabelAttempt",
    "agent_arm",
    "attempt_label",
]

MEMORY_SCOPES = ("none", "seed", "all")
"""Which reviews an arm's prompts carry: none, the same seed's earlier attempts, or any."""


@dataclass(frozen=True)
class AgentArm:
    """One feedback arm of the language agent.

    Attributes:
        name: The arm's name (``--arm``).
        hints: When hints go into the prompt: ``"always"``, ``"first"`` (the
            first attempt at a seed only) or ``"never"``.
        memory: Which reviews the system message carries (one of :data:`MEMORY_SCOPES`).
        description: One line, for ``--help`` and the docs.
    """

    name: str
    hints: str
    memory: str
    description: str

    def hints_on(self, attempt: int) -> bool:
        """Whether hints go into the prompt on ``attempt`` (counted from 1)."""
        return self.hints == "always" or (self.hints == "first" and attempt == 1)

    @property
    def reviews(self) -> bool:
        """Whether episodes are reviewed (for the reviews the later prompts carry)."""
        return self.memory != "none"


AGENT_ARMS: dict[str, AgentArm] = {
    arm.name: arm
    for arm in (
        AgentArm("sparse", "never", "none", "no hints, no reviews"),
        AgentArm("guide", "always", "none", "hints in the prompt, no reviews"),
        AgentArm(
            "review", "never", "seed", "reviews of the earlier attempts at the same seed, no hints"
        ),
        AgentArm(
            "guide-then-review",
            "first",
            "seed",
            "hints on the first attempt at a seed, then the reviews of the earlier attempts",
        ),
        AgentArm(
            "guide+review",
            "always",
            "all",
            "hints, and the reviews of the last episodes whatever their seed",
        ),
    )
}
"""The arms by name."""
DEFAULT_AGENT_ARM = "guide+review"
"""The arm the agent plays unless told otherwise (its behaviour before it had arms)."""


def agent_arm(name: str) -> AgentArm:
    """The arm called ``name``.

    Raises:
        ConfigError: No arm has that name.
    """
    try:
        return AGENT_ARMS[name]
    except KeyError:
        raise ConfigError(f"no agent arm {name!r} (known: {', '.join(AGENT_ARMS)})") from None


class LabelAttempt(gym.Wrapper[Any, Any, Any, Any], gym.utils.RecordConstructorArgs):
    """Names the agent's arm and attempt in the env spec; otherwise passes everything through.

    :class:`~feedbackgym.wrappers.RecordTrajectories` outside it stores the
    spec with each episode, so the store knows each episode's arm and attempt.

    Args:
        env: The env.
        arm: The arm's name.
        attempt: The attempt at the seed, counted from 1.

    Example:
        >>> import feedbackgym
        >>> env = LabelAttempt(gym.make("feedbackgym/OpsIncidentEasy-v0"), "review", 2)
        >>> attempt_label(env.spec.to_json())
        ('review', 2)

    Change logs:
     * v0.1.0 - Initially added
    """

    def __init__(self, env: gym.Env[Any, Any], arm: str, attempt: int) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, arm=arm, attempt=attempt)
        gym.Wrapper.__init__(self, env)
        self.arm = arm
        self.attempt = attempt


def attempt_label(env_spec: str) -> tuple[str | None, int | None]:
    """The arm and attempt a recorded env spec (JSON) names; ``(None, None)`` when unlabelled.

    Example:
        >>> attempt_label("")
        (None, None)
    """
    if not env_spec:
        return None, None
    try:
        wrappers = json.loads(env_spec).get("additional_wrappers") or []
    except (json.JSONDecodeError, AttributeError):
        return None, None
    for wrapper in wrappers:
        if isinstance(wrapper, dict) and wrapper.get("name") == LabelAttempt.__name__:
            kwargs = wrapper.get("kwargs") or {}
            return str(kwargs.get("arm")), int(kwargs.get("attempt", 1))
    return None, None
