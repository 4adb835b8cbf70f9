"""The public factory that plugs feedbackgym envs into your own TRL script.

TRL's ``GRPOTrainer`` runs multi-turn environments through
``environment_factory``: a no-argument callable whose instances have
``reset(**row) -> str`` (the text appended to the prompt), tool methods the
model calls, and ``get_reward() -> float``. :class:`FeedbackEnvironments` is
such a factory for any feedbackgym env with a text mode:

* every instance is the arm's feedback stack on the text env, driven by one
  :class:`~feedbackgym.control.FeedbackController` (its state reaches each
  env through ``set_feedback_state``), so hints come in the guide phase and
  none after the switch, as the schedule says;
* ``reset(seed=...)`` returns the system text (the env, its actions, the
  reviews of earlier attempts at that seed), the first observation and its
  hint; the tool ``act(action)`` takes one action (its text must be one of
  the env's actions, else nothing happens and the reply says why) and
  returns what the env shows next, with a hint when one is given; once the
  episode ends its review is kept for the next attempts at the same seed;
* ``get_reward()`` is the episode's return from the stack (the env's reward,
  plus subgoal shaping on a ``+shaping`` arm);
* :meth:`FeedbackEnvironments.callback` is a ``TrainerCallback`` that starts a
  controller round at each optimizer step, with the last round's trend (a
  followed config file's edit applies then).

Example:
    >>> from feedbackgym.config import FeedbackConfig, merge_config
    >>> no_dropout = merge_config(FeedbackConfig(), {"guide": {"dropout": 0.0}})
    >>> environments = FeedbackEnvironments("feedbackgym/OpsIncidentEasy-v0",
    ...                                     arm="guide-then-review", feedback=no_dropout)
    >>> episode = environments()
    >>> "Hint:" in episode.reset(seed=0), environments.controller.state.phase
    (True, 'guide')
    >>> episode.act("inspect metrics db_primary").splitlines()[1]
    'Step 1 of 80 | SLO budget 99% | circuit breaker closed'
    >>> episode.act("reboot everything")[:40]
    "'reboot everything' is not an action. Re"

``feedbackgym train-llm`` trains through TRL too, by another door
(``rollout_func``, :mod:`~.grpo_rollout`), which holds every reply to the
actions token by token; this factory suits models that call tools.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from feedbackgym.config import FeedbackConfig, merge_config
from feedbackgym.control import FeedbackController
from feedbackgym.errors import InvalidAction, requires_extra
from feedbackgym.language.episode_chat import (
    EpisodeChat,
    ReviewMemory,
    action_choices,
    agent_template,
)
from feedbackgym.protocol import FEEDBACK, IS_SUCCESS
from feedbackgym.training.common.arms import arm_config
from feedbackgym.wrappers.stack import make, resolve_feedback

__all__ = ["FeedbackEnvironments", "FeedbackEpisode"]

_TEXT_CHANNELS = {"guide": {"channels": ["info"]}, "review": {"channels": ["info"]}}


class FeedbackEpisode:
    """One rollout's environment for TRL: ``reset``, the tool ``act``, ``get_reward``.

    Made by :class:`FeedbackEnvironments` (one per concurrent rollout; TRL
    resets and reuses them).
    """

    def __init__(self, owner: FeedbackEnvironments, env: Any) -> None:
        self._owner = owner
        self._env = env
        self._text: EpisodeChat | None = None
        self._seed = 0
        self._done = True
        self._reward = 0.0
        self._success = False

    def reset(self, seed: int | None = None, **row: Any) -> str:
        """Starts an episode (``seed``: the dataset row's, else the next training seed).

        Returns:
            The text TRL appends to the prompt: the env, its actions, the
            reviews of earlier attempts at this seed, the first observation
            and its hint.
        """
        owner = self._owner
        self._seed = int(seed) if seed is not None else owner.next_seed()
        obs, info = self._env.reset(seed=self._seed)
        self._text = EpisodeChat(
            agent_template(),
            owner.env_id,
            tuple(self._env.unwrapped.action_meanings),
            self._seed,
            owner.env_kwargs,
            turns="full",
            choices=action_choices(self._env),
        )
        system = self._text.system(owner.memory(self._seed))["content"]
        self._done, self._reward, self._success = False, 0.0, False
        hint = info.get(FEEDBACK, {}).get("guide") or None
        return f"{system}\n\n{self._text.user(obs, hint)['content']}"

    def act(self, action: str) -> str:
        """Takes one action in the environment.

        Args:
            action: One action from the list, written exactly as listed.

        Returns:
            What the environment shows next, with a hint when the guide gives one.
        """
        if self._text is None or self._done:
            return "The episode is over."
        try:
            index = self._env.unwrapped.parse_action(action)
        except InvalidAction:
            return f"{action!r} is not an action. Reply with one action from the list."
        obs, reward, terminated, truncated, info = self._env.step(index)
        self._reward += float(reward)
        if terminated or truncated:
            self._done = True
            self._success = bool(info.get(IS_SUCCESS, False))
            self._owner.episode_ended(self._seed, self._reward, self._success, info)
            return f"{self._text.user(obs, None)['content']}\nThe episode is over."
        hint = info.get(FEEDBACK, {}).get("guide") or None
        return self._text.user(obs, hint)["content"]

    def get_reward(self) -> float:
        """The episode's return so far (TRL's reward for the rollout)."""
        return self._reward


class FeedbackEnvironments:
    """A ``GRPOTrainer(environment_factory=...)`` for a feedbackgym text env, under a controller.

    Args:
        env_id: A registered env with a text mode (``obs_mode="text"``).
        arm: The comparison arm (who speaks when), e.g. ``"guide-then-review"``.
        feedback: The base feedback config, or a YAML/TOML file to follow
            (edits apply at the next round).
        rounds: The run's length in rounds (optimizer steps): where the
            schedule's switch falls.
        memory: Reviews of earlier attempts at a seed that ``reset`` shows.
        seed: The first training seed handed out when a row names none.
        env_kwargs: More ``gym.make`` keyword arguments (e.g. ``max_episode_steps``).

    Attributes:
        controller: The controller driving every instance's env.
        episodes: ``(seed, return, success)`` of the episodes ended since the last round.
    """

    def __init__(
        self,
        env_id: str,
        *,
        arm: str = "guide-then-review",
        feedback: FeedbackConfig | str | os.PathLike[str] | None = None,
        rounds: int = 100,
        memory: int = 3,
        seed: int = 0,
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.env_id = env_id
        self.env_kwargs = {"obs_mode": "text", **dict(env_kwargs or {})}
        self.memory_bound = memory

        def transform(config: FeedbackConfig) -> FeedbackConfig:
            return merge_config(arm_config(arm, config, rounds), _TEXT_CHANNELS, source=arm)

        if isinstance(feedback, (str, os.PathLike)) and Path(feedback).suffix:
            self.controller = FeedbackController(Path(feedback), transform=transform)
        else:
            self.controller = FeedbackController(transform(resolve_feedback(feedback)))  # type: ignore[arg-type]
        self.episodes: list[tuple[int, float, bool]] = []
        self._memories: dict[int, ReviewMemory] = {}
        self._next_seed = seed
        self._round = 0
        self._instances: list[FeedbackEpisode] = []

    def __call__(self) -> FeedbackEpisode:
        """A new environment instance (its env attached to the controller)."""
        env = self.make_env()
        self.controller.attach(env)
        episode = FeedbackEpisode(self, env)
        self._instances.append(episode)
        return episode

    def make_env(self) -> Any:
        """A new instance's env: the arm's stack on the text env (a subclass may serve it)."""
        return make(self.env_id, self.controller.config, **self.env_kwargs)

    def memory(self, seed: int) -> ReviewMemory:
        """The reviews of earlier attempts at ``seed``."""
        return self._memories.setdefault(seed, ReviewMemory(self.memory_bound))

    def next_seed(self) -> int:
        """The next training seed, for a row that names none."""
        seed, self._next_seed = self._next_seed, self._next_seed + 1
        return seed

    def episode_ended(self, seed: int, ret: float, success: bool, info: Mapping[str, Any]) -> None:
        """Notes an ended episode: its return for the round's trend, its review for ``seed``."""
        self.episodes.append((seed, ret, success))
        self.memory(seed).add(info.get(FEEDBACK, {}).get("review") or None)

    def rows(self, seeds: range | list[int]) -> list[dict[str, Any]]:
        """Dataset rows for TRL, one per seed (``datasets.Dataset.from_list(rows)``).

        Each has an empty user prompt, which ``reset``'s text completes, and its ``seed``.
        """
        return [{"prompt": [{"role": "user", "content": ""}], "seed": int(s)} for s in seeds]

    def next_round(self) -> Any:
        """Starts the next controller round with the trend of the episodes since the last one.

        Returns:
            The :class:`~feedbackgym.protocol.FeedbackState` every env now has.
        """
        trend: dict[str, float] = {}
        if self.episodes:
            trend = {
                "mean_return": sum(r for _, r, _ in self.episodes) / len(self.episodes),
                "success": sum(s for *_, s in self.episodes) / len(self.episodes),
            }
        self.episodes = []
        self._round += 1
        return self.controller.update(self._round, **trend)

    def callback(self) -> Any:
        """A ``transformers.TrainerCallback`` that calls :meth:`next_round` after each step.

        Raises:
            DependencyNotInstalled: transformers is not installed (the ``llm-train`` extra).
        """
        with requires_extra("llm-train", "transformers"):
            from transformers import TrainerCallback
        owner = self

        class FeedbackRounds(TrainerCallback):
            """Starts a feedback round at the end of each optimizer step."""

            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                owner.next_round()

        return FeedbackRounds()

    def close(self) -> None:
        """Closes every instance's env."""
        for episode in self._instances:
            episode._env.close()
        self._instances = []
