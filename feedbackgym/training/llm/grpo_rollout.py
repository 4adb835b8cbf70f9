"""A round's rollouts for TRL's ``GRPOTrainer``: groups of episodes on a shared seed.

TRL calls a ``rollout_func`` with the prompts of one generation batch: each
dataset row (one seed, as :func:`seed_prompt` writes it) repeated
``num_generations`` times. :class:`GroupRollout` plays one episode for each
(:func:`~.episode_tokens.play_episode`), so a group is that many attempts at
the same incident, and returns their tokens, the model's choices as
``env_mask`` and each episode's return (the reward TRL's group-relative
advantage compares).

What the prompts carry is the controller's: the envs are driven by the
run's :class:`~feedbackgym.control.FeedbackController` through
``set_feedback_state``, so hints come in the guide phase (with the config's
dropout, or only after failures) and none after the switch; in the review
phase each episode's review is kept, and the system message of the next
group on the same seed carries the reviews of those earlier attempts
(Reflexion-style, ``memory`` at most). All attempts of one group read the
same memory, so the group compares like with like.

An arm's suffixes add to a group (:class:`RolloutMechanisms`): with
``+reexplore`` a group may start from a restart point of the env's
:class:`~feedbackgym.wrappers.Reexplore` (a step an earlier review flagged,
drawn and gated as the PPO restarts are): each of its episodes replays the
prefix and the model acts from there; with ``+failure-hints`` the model plays
without hints in its prompt, and a group that failed throughout is played
again with hints and trained on without them
(:func:`~.feedback_targets.failure_replay`); with ``+distill`` the model
plays without hints and reviews, and its failed episodes are distilled from
the model that reads them (:func:`~.feedback_targets.taught`).

Example:
    >>> seed_of(seed_prompt(12))
    12
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from feedbackgym.language.episode_chat import ReviewMemory, action_choices
from feedbackgym.training.llm.action_choice import Chooser, rollout_threads
from feedbackgym.training.llm.causal_lm import ChatModel
from feedbackgym.training.llm.episode_tokens import EpisodeTokens, play_episode
from feedbackgym.training.llm.feedback_targets import failure_replay, taught, unhinted
from feedbackgym.training.llm.served_rollouts import ServedAdapter
from feedbackgym.wrappers.common import find_wrapper
from feedbackgym.wrappers.reexplore import Reexplore, RestartStart

__all__ = [
    "GroupRollout",
    "RolloutMechanisms",
    "RoundEpisodes",
    "episode_return_reward",
    "seed_of",
    "seed_prompt",
]


def seed_prompt(seed: int) -> str:
    """A dataset row's ``prompt``: the episode it stands for (the real prompt is built later)."""
    return json.dumps({"seed": int(seed)})


def seed_of(prompt: Any) -> int:
    """The seed a :func:`seed_prompt` names.

    Raises:
        ValueError: ``prompt`` is not one.
    """
    try:
        return int(json.loads(prompt)["seed"])
    except (TypeError, ValueError, KeyError):
        raise ValueError(f"not a feedbackgym episode prompt: {str(prompt)[:80]!r}") from None


def episode_return_reward(
    prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
) -> list[float | None]:
    """TRL's reward function: each episode's return, as the rollout reported it."""
    return [float(value) for value in kwargs["episode_return"]]  # never None: every one ends


@dataclass
class RolloutMechanisms:
    """What an arm's suffixes add to its groups (all off by default).

    Attributes:
        hinted_envs: ``+failure-hints``: the stack hinting at a level
            (:class:`~.feedback_targets.HintedEnvs`); the model's prompts carry no hints.
        weight_cap: The largest importance weight of a replayed choice.
        distill: ``+distill``: failed episodes get their teacher's targets; the
            model's prompts carry no hints and no reviews.
        distill_flagged: Distil only at the steps the episode's review flags.
    """

    hinted_envs: Callable[[str], gym.Env[Any, Any]] | None = None
    weight_cap: float = 2.0
    distill: bool = False
    distill_flagged: bool = False

    @property
    def shows_hints(self) -> bool:
        """Whether the model's prompts carry the env's hints."""
        return self.hinted_envs is None and not self.distill


@dataclass
class RoundEpisodes:
    """The episodes one round played, and what playing them took.

    Attributes:
        round: The round.
        phase: The feedback phase they were played in.
        episodes: Each episode, in the batch's order.
        seconds: Wall time of the rollouts.
    """

    round: int
    phase: str
    episodes: list[EpisodeTokens] = field(default_factory=list)
    seconds: float = 0.0
    replayed_groups: int = 0
    rescued_groups: int = 0
    replay_episodes: int = 0
    restarted_groups: int = 0

    def summary(self) -> dict[str, float]:
        """Means over the round's episodes: returns, success, length, hints, token rates."""
        episodes = self.episodes
        count = max(1, len(episodes))
        computed = sum(e.computed for e in episodes)
        generated = sum(e.generated for e in episodes)
        return {
            "episodes": float(len(episodes)),
            "mean_return": sum(e.episode_return for e in episodes) / count,
            "env_return": sum(e.env_return for e in episodes) / count,
            "success": sum(e.success for e in episodes) / count,
            "length": sum(e.length for e in episodes) / count,
            "hint_rate": sum(e.hinted for e in episodes) / count,
            "hints_per_turn": sum(e.hints for e in episodes)
            / max(1, sum(e.length for e in episodes)),
            "reviews_in_prompt": sum(e.memory > 0 for e in episodes) / count,
            "steps": float(sum(e.length for e in episodes)),
            "tokens": float(sum(len(e.prompt_ids) + len(e.completion_ids) for e in episodes)),
            "tokens_per_s": computed / max(self.seconds, 1e-9),
            "generated_per_s": generated / max(self.seconds, 1e-9),
            "episodes_per_s": len(episodes) / max(self.seconds, 1e-9),
            "replayed_groups": float(self.replayed_groups),
            "rescued_groups": float(self.rescued_groups),
            "replay_episodes": float(self.replay_episodes),
            "restarted_groups": float(self.restarted_groups),
            "distilled_choices": float(sum(bool(o) for e in episodes for o in e.teacher_options)),
        }


class GroupRollout:
    """TRL's ``rollout_func``: plays the batch's episodes, groups on shared seeds.

    Args:
        chat: The model being trained (its adapter) and its tokenizer.
        env: The arm's stack on the text env (driven by the controller).
        round_at: The round a call plays, from TRL's trainer (its ``state``).
        memory: Reviews of earlier attempts at a seed that prompts carry.
        turns: What later user turns carry (``"delta"`` or ``"full"``).
        temperature: Sampling temperature.
        max_tokens: Longest sequence of an episode (prompt and completion).
        generator: The ``torch.Generator`` sampling draws from.
        on_round: Called with each round's :class:`RoundEpisodes` once played.
        mechanisms: What the arm's suffixes add (default: nothing).
        served: Play on the model server (the adapter published before each
            round), or ``None`` for the model in this process.

    Attributes:
        memories: Seed → the reviews of its earlier attempts.
        last: The round played last.
    """

    def __init__(
        self,
        chat: ChatModel,
        env: gym.Env[Any, Any],
        round_at: Callable[[Any], int],
        *,
        phase: Callable[[], str],
        memory: int = 3,
        turns: str = "delta",
        temperature: float = 1.0,
        max_tokens: int | None = None,
        generator: Any = None,
        on_round: Callable[[RoundEpisodes], None] | None = None,
        mechanisms: RolloutMechanisms | None = None,
        served: ServedAdapter | None = None,
    ) -> None:
        self.chat = chat
        self.env = env
        self.round_at = round_at
        self.phase = phase
        self.memory = memory
        self.turns = turns
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.generator = generator
        self.on_round = on_round
        self.mechanisms = mechanisms or RolloutMechanisms()
        self.served = served
        self._chooser: Callable[[], Chooser] | None = None
        self.restarts = find_wrapper(env, Reexplore)
        self.memories: dict[int, ReviewMemory] = {}
        self.last: RoundEpisodes | None = None

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        """Plays one episode per prompt; returns what TRL's ``rollout_func`` returns."""
        played = RoundEpisodes(self.round_at(trainer), self.phase())
        start = time.perf_counter()
        if self.served is not None:
            self._chooser = self.served.chooser(played.round)
        seeds = [seed_of(prompt) for prompt in prompts]
        with rollout_threads(self.chat.device):
            for seed in dict.fromkeys(seeds):  # a group: consecutive prompts of one seed
                played.episodes += self._group(played, seed, seeds.count(seed))
        played.seconds = time.perf_counter() - start
        self.last = played
        if self.on_round is not None:
            self.on_round(played)
        episodes = played.episodes
        out: dict[str, Any] = {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            # the server's replies carry none (TRL reads them for vLLM's correction only)
            "logprobs": (
                [e.logprobs for e in episodes]
                if all(e.sampled_logprobs for e in episodes)
                else None
            ),
            "env_mask": [e.env_mask for e in episodes],
            "episode_return": [e.episode_return for e in episodes],
        }
        if any(e.token_weights for e in episodes):
            out["token_weights"] = [
                e.token_weights or [1.0] * len(e.completion_ids) for e in episodes
            ]
        if any(e.teacher_options for e in episodes):
            for key in ("teacher_options", "teacher_logprobs"):
                out[key] = [getattr(e, key) or [[] for _ in e.completion_ids] for e in episodes]
        return out

    def _group(self, played: RoundEpisodes, seed: int, size: int) -> list[EpisodeTokens]:
        """One group of ``size`` episodes on ``seed`` (or on a restart point), with its feedback."""
        mechanisms = self.mechanisms
        restart = self.restarts.draw_restart() if self.restarts is not None else None
        if restart is not None:
            seed = restart.seed
            played.restarted_groups += 1
        memory = self.memories.setdefault(seed, ReviewMemory(self.memory))
        shown = None if mechanisms.distill else memory
        chat: dict[str, Any] = {"turns": self.turns, "temperature": self.temperature}

        def play(env: gym.Env[Any, Any], ended: Callable[..., None] | None = None) -> EpisodeTokens:
            return play_episode(
                self.chat,
                env,
                seed,
                memory=shown,
                generator=self.generator,
                max_tokens=self.max_tokens,
                show_hints=env is not self.env or mechanisms.shows_hints,
                prefix=restart.actions if restart is not None else (),
                on_end=ended,
                chooser=self._chooser,
                **chat,
            )

        group = [play(self.env, self._restart_ended(restart, seed)) for _ in range(size)]
        review = _review_to_keep(group)
        if mechanisms.hinted_envs is not None and not any(e.success for e in group):
            cap = mechanisms.weight_cap
            group, count = failure_replay(
                group,
                play,
                mechanisms.hinted_envs,
                lambda env, e: unhinted(self.chat, env, e, memory=shown, cap=cap, **chat),
            )
            played.replayed_groups += 1
            played.replay_episodes += count
            played.rescued_groups += any(e.hint_level is not None for e in group)
        if mechanisms.distill:
            trie = self.chat.trie(action_choices(self.env))
            for episode in (e for e in group if not e.success):
                flagged = mechanisms.distill_flagged
                taught(
                    self.chat,
                    self.env,
                    episode,
                    trie=trie,
                    memory=memory,
                    only_flagged=flagged,
                    **chat,
                )
        memory.add(review)
        return group

    def _restart_ended(
        self, restart: RestartStart | None, seed: int
    ) -> Callable[[list[str], dict[str, Any]], None] | None:
        """What tells the env's restarts an episode of the group ended (``None``: no restarts)."""
        restarts = self.restarts
        if restarts is None or restarts.config is None:
            return None
        return lambda actions, info: restarts.restart_ended(restart, seed, actions, info)


def _review_to_keep(group: Sequence[EpisodeTokens]) -> dict[str, Any] | None:
    """The review a group leaves for the next attempts: a failed attempt's, else the first."""
    reviewed = [e for e in group if e.review]
    failed = [e for e in reviewed if not e.success]
    chosen = failed or reviewed
    return chosen[0].review if chosen else None
