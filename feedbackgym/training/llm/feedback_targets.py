"""Feedback turned into training targets for the model that plays without it.

Two mechanisms of the ``train-llm`` arms (their suffixes are
:data:`~feedbackgym.config.FAILURE_HINTS_SUFFIX` and
:data:`~feedbackgym.config.DISTILL_SUFFIX`):

* **hints where a group failed** (Scaf-GRPO): :func:`failure_replay` plays a
  group whose episodes all failed again with hints, at the lowest level of
  :data:`~feedbackgym.core.HINT_LEVELS` that yields a success, and
  :func:`unhinted` turns each replayed episode into the tokens of the same
  replies under the prompt *without* the hints, each of the model's choices
  weighted by the ratio of the policy without the hint to the hinted policy
  that sampled it, truncated at a cap (truncated importance sampling: the
  update is the off-policy gradient of the policy that plays unhinted);
* **self-distillation** (SDPO, SRPO, HINT-SD): :func:`taught` scores a failed
  episode the model played without feedback under the prompt *with* it (the
  hints the env had for its turns, the reviews of earlier attempts at its
  seed): at each of its choices, the teacher's log-probabilities of the tokens
  it could choose from, which the trainer's loss pulls the student towards
  (:mod:`~.chosen_token_grpo`), optionally only at the steps its review flags.

Both score whole sequences once, without gradients, through the output layer
at the choices only.

Example:
    >>> flagged_steps({"reexplore": [{"step": 2, "reason": "harmful"}, {"step": 5}]})
    {2, 5}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from feedbackgym.chat.token_trie import TokenTrie
from feedbackgym.config import FeedbackConfig, merge_config
from feedbackgym.core import HINT_LEVELS
from feedbackgym.errors import requires_extra
from feedbackgym.language.episode_chat import ReviewMemory
from feedbackgym.training.llm.causal_lm import ChatModel
from feedbackgym.training.llm.episode_tokens import EpisodeTokens, rendered
from feedbackgym.wrappers.stack import make

with requires_extra("llm-train", "torch"):
    import torch

__all__ = [
    "HintedEnvs",
    "choice_options",
    "failure_replay",
    "flagged_steps",
    "taught",
    "unhinted",
]


class HintedEnvs:
    """The arm's stack with the guide speaking in every turn, one per hint level (made lazily).

    Its reward is the arm's (shaping included), so replayed returns compare
    with the group's; no controller drives it: the guide always speaks.

    Args:
        env_id: The env.
        config: The run's feedback config (the arm's).
        env_kwargs: ``gym.make``'s keyword arguments (the training env's).
    """

    def __init__(self, env_id: str, config: FeedbackConfig, env_kwargs: dict[str, Any]) -> None:
        self.env_id = env_id
        self.config = config
        self.env_kwargs = env_kwargs
        self._envs: dict[str, gym.Env[Any, Any]] = {}

    def __call__(self, level: str) -> gym.Env[Any, Any]:
        """The stack whose every turn carries a hint at ``level``."""
        if level not in self._envs:
            shaped = self.config.shaping.scale != 0
            forced = merge_config(
                self.config,
                {"guide": {"dropout": 0.0, "when": "always", "level": level}},
                source="failure hints",
            )
            config = FeedbackConfig.for_arm("guide+shaping" if shaped else "guide", forced)
            channels = {  # the run's (a language model reads them in info), not the arms' vector
                name: {"channels": list(getattr(self.config, name).channels)}
                for name in ("guide", "review")
            }
            config = merge_config(config, channels, source="failure hints")
            self._envs[level] = make(self.env_id, config, **self.env_kwargs)
        return self._envs[level]

    def close(self) -> None:
        """Closes the stacks made."""
        for env in self._envs.values():
            env.close()
        self._envs.clear()


def flagged_steps(review: dict[str, Any] | None) -> set[int]:
    """The steps a review's re-explore points flag (``Review.to_dict()``; ``None``: none)."""
    return {int(point["step"]) for point in (review or {}).get("reexplore") or []}


def choice_options(trie: TokenTrie, episode: EpisodeTokens) -> list[list[int]]:
    """At each of the model's choices, in order, the tokens it could choose from."""
    options: list[list[int]] = []
    for begin, end in episode.replies:
        node = trie.root
        for position in range(begin, end):
            token = episode.completion_ids[position]
            if episode.env_mask[position]:
                options.append(list(node.next))
            node = node.next[token]
    return options


def _choice_log_probs(chat: ChatModel, episode: EpisodeTokens, temperature: float) -> Any:
    """The model's log-probabilities (whole vocabulary) at each choice of ``episode``'s sequence."""
    ids = episode.prompt_ids + episode.completion_ids
    positions = episode.chosen_positions()
    if not positions:  # every step replayed: nothing chosen
        return torch.empty((0, 0))
    keep = torch.tensor([p - 1 for p in positions], dtype=torch.long, device=chat.device)
    with torch.no_grad():
        logits = chat.model(
            input_ids=torch.tensor([ids], device=chat.device), logits_to_keep=keep, use_cache=False
        ).logits[0]
    return torch.log_softmax(logits.float() / temperature, dim=-1).cpu()


def unhinted(
    chat: ChatModel,
    env: gym.Env[Any, Any],
    episode: EpisodeTokens,
    *,
    memory: ReviewMemory | None,
    turns: str,
    temperature: float,
    cap: float,
) -> EpisodeTokens:
    """A hinted episode as the tokens of its replies under the prompt without hints.

    Each choice's weight is ``min(cap, p_plain / p_hinted)``: the probability
    of the token under the prompt without hints over the one it was sampled
    with (``episode.logprobs``, or computed here for an episode the model
    server played); its log-probability becomes the plain one.

    Args:
        chat: The model (as it sampled the episode).
        env: The env it was played on.
        episode: The hinted episode.
        memory: The reviews its system message carried.
        turns: What later user turns carry.
        temperature: The sampling temperature.
        cap: The largest weight.
    """
    plain = rendered(
        chat, env, episode, hints=[None] * len(episode.observations), memory=memory, turns=turns
    )
    log_probs = _choice_log_probs(chat, plain, temperature)
    weights = [1.0] * len(plain.completion_ids)
    logprobs = list(plain.logprobs)
    chosen = [j for j, flag in enumerate(plain.env_mask) if flag]
    sampled = [plain.logprobs[j] for j in chosen]
    if not episode.sampled_logprobs:  # played on the server: the hinted ones computed here
        hinted = _choice_log_probs(chat, episode, temperature)
        sampled = [float(hinted[row, plain.completion_ids[j]]) for row, j in enumerate(chosen)]
    for row, j in enumerate(chosen):
        now = float(log_probs[row, plain.completion_ids[j]])
        weights[j] = math.exp(min(now - sampled[row], math.log(cap)))
        logprobs[j] = now
    plain.logprobs, plain.token_weights = logprobs, weights
    return plain


def failure_replay(
    group: Sequence[EpisodeTokens],
    play: Callable[[gym.Env[Any, Any]], EpisodeTokens],
    hinted_envs: Callable[[str], gym.Env[Any, Any]],
    to_plain: Callable[[gym.Env[Any, Any], EpisodeTokens], EpisodeTokens],
    levels: Sequence[str] = HINT_LEVELS,
) -> tuple[list[EpisodeTokens], int]:
    """A failed group played again with hints, at the lowest level that yields a success.

    Args:
        group: The group's episodes (all failed).
        play: Plays one episode on the env given (the group's seed, start and memory).
        hinted_envs: The stack hinting at a level (:class:`HintedEnvs`).
        to_plain: Turns a hinted episode into its training tokens (:func:`unhinted`).
        levels: The levels tried, lowest first.

    Returns:
        The replayed episodes at the first level with a success, as training
        tokens (``hint_level`` set), or the group unchanged when no level
        helped; and the episodes played in all.
    """
    played = 0
    for level in levels:
        env = hinted_envs(level)
        replay = [play(env) for _ in group]
        played += len(replay)
        if any(e.success for e in replay):
            plain = [to_plain(env, e) for e in replay]
            for episode in plain:
                episode.hint_level = level
            return plain, played
    return list(group), played


def taught(
    chat: ChatModel,
    env: gym.Env[Any, Any],
    student: EpisodeTokens,
    *,
    trie: TokenTrie,
    memory: ReviewMemory | None,
    turns: str,
    temperature: float,
    only_flagged: bool = False,
) -> bool:
    """Gives ``student`` its teacher's targets: the model with the feedback it played without.

    The teacher reads the hints the env had for the student's turns and the
    reviews of earlier attempts (``memory``). Sets ``teacher_options`` and
    ``teacher_logprobs`` at each choice (at the steps the episode's review
    flags, with ``only_flagged`` and a review that flags some), and a weight of
    0 on the GRPO advantage of the distilled choices (SRPO: a failed episode
    is distilled, not pushed down).

    Returns:
        Whether the teacher read anything the student did not (else nothing is set).
    """
    hints = list(student.turn_hints)
    shown = memory is not None and len(memory.texts) > student.memory
    if not shown and not any(hints):
        return False
    teacher = rendered(chat, env, student, hints=hints, memory=memory, turns=turns)
    log_probs = _choice_log_probs(chat, teacher, temperature)
    options = choice_options(trie, student)
    flagged = flagged_steps(student.review) if only_flagged else set()
    size = len(student.completion_ids)
    student.teacher_options = [[] for _ in range(size)]
    student.teacher_logprobs = [[] for _ in range(size)]
    student.token_weights = student.token_weights or [1.0] * size
    row = 0
    for step, (begin, end) in enumerate(student.replies):
        for j in range(begin, end):
            if not student.env_mask[j]:
                continue
            if not flagged or step in flagged:
                student.teacher_options[j] = options[row]
                student.teacher_logprobs[j] = log_probs[row, options[row]].tolist()
                student.token_weights[j] = 0.0
            row += 1
    return True
