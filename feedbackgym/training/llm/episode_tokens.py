"""One episode played by the model as a multi-turn chat, kept as the tokens GRPO trains on.

:func:`play_episode` resets the env (the arm's stack, hints and reviews on
its ``info`` channel), opens the chat (the system message with the reviews
of earlier attempts, the first observation and its hint), then each step
has the model reply with an action held to the env's actions
(:mod:`~.action_choice`), steps the env and adds the next user turn. The
result is one sequence: the prompt (up to the first reply), then the
completion, in which the model's choices are trained on (``env_mask`` 1)
and the env's turns and forced tokens are not (0), as TRL's ``GRPOTrainer``
takes a multi-turn rollout.

Example:
    >>> EpisodeTokens(seed=0).hinted
    False
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from feedbackgym.chat.token_trie import TokenTrie
from feedbackgym.language.episode_chat import (
    EpisodeChat,
    ReviewMemory,
    action_choices,
    agent_template,
)
from feedbackgym.protocol import ENV_REWARD, FEEDBACK, IS_SUCCESS, OUTCOME
from feedbackgym.training.llm.action_choice import (
    TokenStream,
    choose_action,
)
from feedbackgym.training.llm.causal_lm import ChatModel

__all__ = ["EpisodeTokens", "play_episode"]


@dataclass
class EpisodeTokens:
    """One episode as a chat and as tokens.

    Attributes:
        seed: The reset seed.
        prompt_ids: The tokens up to the first reply.
        completion_ids: The replies and the env's turns between them.
        env_mask: 1 for each token the model chose, 0 for the env's and forced ones.
        logprobs: Each completion token's log-probability (0.0 where masked).
        episode_return: The return the arm's stack paid (the env's reward, plus
            shaping on a ``+shaping`` arm): GRPO's reward.
        env_return: The env's own return.
        success: Whether the episode reached its goal.
        outcome: ``info["outcome"]`` at the end.
        length: Steps taken.
        truncated: Whether the time limit or the token budget cut it.
        hints: User turns that carried a hint.
        review: The episode's own review (``Review.to_dict()``), or ``None``.
        memory: Reviews of earlier attempts its system message carried.
        messages: The chat: system, then user and assistant in turn.
        generated: Tokens of the replies (chosen and forced).
        computed: Tokens the model computed while playing.
        seconds: Wall time the episode took.
    """

    seed: int
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    episode_return: float = 0.0
    env_return: float = 0.0
    success: bool = False
    outcome: str = ""
    length: int = 0
    truncated: bool = False
    hints: int = 0
    review: dict[str, Any] | None = None
    memory: int = 0
    messages: list[dict[str, str]] = field(default_factory=list)
    generated: int = 0
    computed: int = 0
    seconds: float = 0.0

    @property
    def hinted(self) -> bool:
        """Whether any user turn carried a hint."""
        return self.hints > 0

    def chat_record(self) -> dict[str, Any]:
        """The episode without its tokens, JSON-safe (a line of the run's ``chats.jsonl``)."""
        return {
            "seed": self.seed,
            "return": self.episode_return,
            "env_return": self.env_return,
            "success": self.success,
            "outcome": self.outcome,
            "length": self.length,
            "truncated": self.truncated,
            "hints": self.hints,
            "memory": self.memory,
            "review": self.review,
            "messages": self.messages,
        }


def _feedback(info: dict[str, Any], kind: str) -> dict[str, Any] | None:
    value = info.get(FEEDBACK, {}).get(kind)
    return value or None


def play_episode(
    chat: ChatModel,
    env: gym.Env[Any, Any],
    seed: int,
    *,
    memory: ReviewMemory | None = None,
    turns: str = "delta",
    temperature: float = 1.0,
    generator: Any = None,
    max_tokens: int | None = None,
    trie: TokenTrie | None = None,
) -> EpisodeTokens:
    """Plays one episode from ``reset(seed=seed)`` with the model choosing every action.

    Args:
        chat: The model, its tokenizer and the turn markup.
        env: The arm's stack on a text env (hints and reviews in ``info``).
        seed: The reset seed.
        memory: Reviews of earlier attempts for the system message (not changed).
        turns: What later user turns carry (``"delta"`` or ``"full"``).
        temperature: Sampling temperature (0: greedy within the actions).
        generator: The ``torch.Generator`` sampling draws from.
        max_tokens: Longest sequence (prompt and completion); the episode is
            cut (truncated) before a turn that would pass it.
        trie: The actions' token tree (default: built from the env's actions).

    Returns:
        The episode, its tokens ready for GRPO.
    """
    start = time.perf_counter()
    obs, info = env.reset(seed=seed)
    meanings = action_choices(env)
    trie = trie if trie is not None else chat.trie(meanings)
    text = EpisodeChat.for_env(agent_template(), env, seed, turns=turns)
    result = EpisodeTokens(seed=seed, memory=len(memory.texts) if memory is not None else 0)
    system = text.system(memory)["content"]
    hint = _feedback(info, "guide")
    user = text.user(obs, hint)["content"]
    result.hints += hint is not None
    result.messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    result.prompt_ids = chat.encode(chat.turns.opening_text(chat.bos, system, user))
    stream = TokenStream(chat.model, chat.device)
    stream.feed(result.prompt_ids)
    done = False
    while not done:
        choice = choose_action(stream, trie, temperature=temperature, generator=generator)
        result.completion_ids += choice.tokens
        result.env_mask += choice.chosen
        result.logprobs += choice.logprobs
        result.generated += len(choice.tokens)
        result.messages.append({"role": "assistant", "content": meanings[choice.action]})
        obs, reward, terminated, truncated, info = env.step(meanings[choice.action])
        result.length += 1
        result.episode_return += float(reward)
        result.env_return += float(info.get(ENV_REWARD, reward))
        done = terminated or truncated
        result.truncated = bool(truncated and not terminated)
        if done:
            break
        hint = _feedback(info, "guide")
        user = text.user(obs, hint)["content"]
        turn = chat.encode(chat.turns.next_text(user))
        if max_tokens is not None and (
            len(result.prompt_ids) + len(result.completion_ids) + len(turn) + trie.depth()
            > max_tokens
        ):
            result.truncated = True
            break
        result.hints += hint is not None
        result.messages.append({"role": "user", "content": user})
        result.completion_ids += turn
        result.env_mask += [0] * len(turn)
        result.logprobs += [0.0] * len(turn)
        stream.feed(turn)
    result.success = bool(info.get(IS_SUCCESS, False))
    result.outcome = str(info.get(OUTCOME, ""))
    result.review = _feedback(info, "review")
    result.computed = stream.computed
    result.seconds = time.perf_counter() - start
    return result
