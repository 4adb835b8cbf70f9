"""SB3 vector-env wrappers for the runner."""

from __future__ import annotations

from typing import Any

from feedbackgym.errors import requires_extra

with requires_extra("baselines", "stable_baselines3"):
    from stable_baselines3.common.vec_env import VecEnvWrapper
    from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

__all__ = ["TimeLimitAsTerminal"]


class TimeLimitAsTerminal(VecEnvWrapper):
    """Makes SB3 treat an episode cut off by its time limit as ended, not bootstrapped.

    SB3 adds ``gamma * V(final observation)`` to the reward of a step that
    ``info["TimeLimit.truncated"]`` marks, as if the episode went on. That is
    right when the limit is outside the task; when the limit is part of it (an
    incident unresolved in 80 steps has failed) and the observation shows the
    time left, it lets a policy run out the clock for free, since the value it
    bootstraps from never sees the failure. This wrapper clears the flag, so
    the learner sees the cut-off as the end it is.

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> from stable_baselines3.common.vec_env import DummyVecEnv
        >>> make = lambda: gym.make("feedbackgym/OpsIncidentEasy-v0", max_episode_steps=1)
        >>> for venv in (DummyVecEnv([make]), TimeLimitAsTerminal(DummyVecEnv([make]))):
        ...     _ = venv.reset()
        ...     wait = venv.env_method("parse_action", "wait")[0]
        ...     _, _, dones, infos = venv.step([wait])
        ...     print(bool(dones[0]), infos[0]["TimeLimit.truncated"])
        True True
        True False
    """

    def reset(self) -> Any:
        """Resets every env."""
        return self.venv.reset()

    def step_wait(self) -> VecEnvStepReturn:
        """Steps every env; a time-limit cut-off is reported as an end."""
        obs, rewards, dones, infos = self.venv.step_wait()
        for info in infos:
            if info.get("TimeLimit.truncated"):
                info["TimeLimit.truncated"] = False
        return obs, rewards, dones, infos
