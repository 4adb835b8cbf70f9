"""``ShapeWithSubgoals``: potential-based shaping from subgoal progress."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

from feedbackgym.config import ShapingConfig

__all__ = [
    "TERMINAL_MODES",
    "ShapeWithSubgoals",
    "checked_clip",
    "checked_gamma",
    "checked_terminal",
]

_DEFAULTS = ShapingConfig()
"""The shaping's defaults live in the config (:class:`~feedbackgym.config.ShapingConfig`)."""

TERMINAL_MODES = ("zero", "keep", "zero_on_harm")
"""What a terminal state's potential is: always 0, never 0, or 0 after a harmful step."""


def checked_gamma(gamma: float) -> float:
    """``gamma`` as a float, if it is a discount in (0, 1].

    Raises:
        ValueError: It is not.
    """
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}")
    return float(gamma)


def checked_terminal(terminal: str) -> str:
    """``terminal``, if it is one of :data:`TERMINAL_MODES`.

    Raises:
        ValueError: It is not.
    """
    if terminal not in TERMINAL_MODES:
        raise ValueError(f"terminal must be one of {', '.join(TERMINAL_MODES)}, got {terminal!r}")
    return terminal


def checked_clip(clip: tuple[float, float] | None) -> tuple[float, float] | None:
    """``clip`` as a pair of floats ``(low, high)`` with ``low < high``, or ``None``.

    Raises:
        ValueError: It is not such a pair.
    """
    if clip is None:
        return None
    low, high = (float(bound) for bound in clip)
    if not low < high:
        raise ValueError(f"clip must be (low, high) with low < high, got {tuple(clip)}")
    return low, high


class ShapeWithSubgoals(
    gym.Wrapper[Any, Any, Any, Any],
    gym.utils.RecordConstructorArgs,
):
    r"""Adds F = γΦ(s′) − Φ(s) to the reward, with Φ = ``scale`` × fraction of subgoals done.

    Potential-based shaping leaves the optimal policy unchanged (Ng, Harada &
    Russell 1999), also when Φ changes over training (Devlin & Kudenko 2012):
    it is the safe dense channel. With ``terminal="zero"`` Φ of
    a terminal state is 0, so over an episode that terminates at step T the
    discounted shaping sums to −Φ(s₀) whatever the agent did: the invariant
    form. It also takes back all progress reward when an episode fails, which
    leaves little learning signal on long tasks; ``terminal="keep"`` (the default) keeps the
    last state's potential (the shaping then sums to γᵀΦ(s_T) − Φ(s₀), a bias
    towards ending with more subgoals done — fade it out with the guide,
    ``FadeGuideToReview(fade_shaping=True)``, to train the final policy on the env
    reward alone; the comparison's arms keep it on, as fading it collapsed success
    after the switch). ``"keep"`` also rewards ending an episode on purpose:
    every step without progress costs (1 − γ)Φ(s), so once progress stalls a
    policy that escalates or breaks something to end the episode keeps its
    potential and stops paying (seen on OpsIncident hard, where two of five
    seeds learned exactly that). ``terminal="zero_on_harm"`` keeps the last
    potential unless the episode ends on a harmful step (``info["harmful"]``:
    an escalation, a destructive action, a wrong declaration), where Φ is 0:
    running out of time keeps the progress reward, ending the episode on
    purpose loses it. On truncation the last state always keeps its potential.
    The env reward and the shaping term are reported apart in
    ``info["env_reward"]`` and ``info["shaping_reward"]``.

    The reward returned (env reward plus shaping) is clipped to ``clip``, so an
    outlier cannot break training; a step whose reward was clipped says so in
    ``info["reward_clipped"]`` (the default range is wide of every reward the
    suite's envs give; ``None``: no clip).

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> env = ShapeWithSubgoals(gym.make("feedbackgym/OpsIncidentEasy-v0"), gamma=1.0)
        >>> _ = env.reset(seed=0)
        >>> env.step("wait")[-1]["shaping_reward"]
        0.0

    Change logs:
     * v0.1.0 - Initially added
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        gamma: float = _DEFAULTS.gamma,
        scale: float = _DEFAULTS.scale,
        *,
        terminal: str = _DEFAULTS.terminal,
        clip: tuple[float, float] | None = _DEFAULTS.clip,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, gamma=gamma, scale=scale, terminal=terminal, clip=clip
        )
        gym.Wrapper.__init__(self, env)
        self.set_shaping(gamma=gamma, scale=scale, terminal=terminal)
        self.set_clip(clip)
        self._potential = 0.0

    def set_clip(self, clip: tuple[float, float] | None) -> None:
        """Changes the range the reward is clipped to (``None``: no clip); for hot reload."""
        self.clip = checked_clip(clip)

    def set_shaping(self, *, gamma: float, scale: float, terminal: str | None = None) -> None:
        """Changes γ, the potential's scale and (if given) the terminal mode.

        For hot reload, or a Φ annealed over training.
        """
        if scale < 0:
            raise ValueError(f"scale must be non-negative, got {scale}")
        self.gamma = checked_gamma(gamma)
        self.scale = float(scale)
        if terminal is not None:
            self.terminal = checked_terminal(terminal)

    def potential(self, progress: dict[str, bool]) -> float:
        """Φ of a state with subgoal ``progress``."""
        if not progress:
            return 0.0
        return self.scale * sum(progress.values()) / len(progress)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Resets the env and the potential."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._potential = self.potential(info.get("subgoals", {}))
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps the env and adds the shaping term to the reward."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        zero = terminated and (
            self.terminal == "zero"
            or (self.terminal == "zero_on_harm" and bool(info.get("harmful", False)))
        )
        next_potential = 0.0 if zero else self.potential(info.get("subgoals", {}))
        shaping = self.gamma * next_potential - self._potential
        self._potential = next_potential
        info["env_reward"] = float(reward)
        info["shaping_reward"] = shaping
        total = float(reward) + shaping
        if self.clip is not None and not self.clip[0] <= total <= self.clip[1]:
            total = min(max(total, self.clip[0]), self.clip[1])
            info["reward_clipped"] = True
        return obs, total, terminated, truncated, info
