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

:func:`rendered` writes the same episode's tokens again with other hints in
its user turns or other reviews in its system message, the replies' tokens
unchanged: the prompt a feedback mechanism trains on (hints hidden) or a
teacher reads (hints and reviews shown). An episode may also start from a
restart point: its replayed actions are turns of the chat, not trained on.

Example:
    >>> EpisodeTokens(seed=0).hinted
    False
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from feedbackgym.chat.token_trie import TokenTrie
from feedbackgym.errors import FeedbackGymError
from feedbackgym.language.episode_chat import (
    EpisodeChat,
    ReviewMemory,
    action_choices,
    agent_template,
)
from feedbackgym.protocol import ENV_REWARD, FEEDBACK, IS_SUCCESS, OUTCOME
from feedbackgym.training.llm.action_choice import Choice, Chooser, ModelChooser
from feedbackgym.training.llm.causal_lm import ChatModel

__all__ = ["EpisodeTokens", "play_episode", "rendered"]


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
        actions: The actions taken, as the env's action texts (the replayed ones first).
        observations: Each user turn's observation (what :func:`rendered` writes again).
        turn_hints: Each user turn's hint text from the env (``None``: none), shown or not.
        replies: Each reply's ``(start, end)`` in ``completion_ids``.
        replayed: Steps replayed from a restart point before the model acted.
        hint_level: The level of hints a replay after a failed group was played with
            (trained on without them), or ``None``.
        sampled_logprobs: Whether ``logprobs`` are the replies' as sampled (the
            model server returns none: they are 0.0 then).
        token_weights: A weight per completion token on its GRPO advantage (empty: 1).
        teacher_options: At each completion token the model chose, the tokens it
            could choose from (empty elsewhere, and without a teacher).
        teacher_logprobs: The teacher's log-probabilities of those tokens.
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
    actions: list[str] = field(default_factory=list)
    observations: list[Any] = field(default_factory=list)
    turn_hints: list[str | None] = field(default_factory=list)
    replies: list[tuple[int, int]] = field(default_factory=list)
    replayed: int = 0
    hint_level: str | None = None
    sampled_logprobs: bool = True
    token_weights: list[float] = field(default_factory=list)
    teacher_options: list[list[int]] = field(default_factory=list)
    teacher_logprobs: list[list[float]] = field(default_factory=list)

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
            "replayed": self.replayed,
            "hint_level": self.hint_level,
            "messages": self.messages,
        }

    def chosen_positions(self) -> list[int]:
        """The positions in the whole sequence (prompt, then completion) of the model's choices."""
        start = len(self.prompt_ids)
        return [start + j for j, chosen in enumerate(self.env_mask) if chosen]


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
    show_hints: bool = True,
    prefix: Sequence[Any] = (),
    on_end: Callable[[list[str], dict[str, Any]], None] | None = None,
    chooser: Callable[[], Chooser] | None = None,
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
        show_hints: Whether the user turns carry the env's hints (they are
            kept in ``turn_hints`` either way).
        prefix: Actions (texts or indices) replayed after the reset before the
            model acts (a restart point): turns of the chat, never trained on.
        on_end: Called with the actions and the last step's info right after it.
        chooser: Makes the episode's :class:`~.action_choice.Chooser` (default:
            the model in this process; the model server's is
            :meth:`~.served_rollouts.ServedAdapter.chooser`).

    Returns:
        The episode, its tokens ready for GRPO.

    Raises:
        FeedbackGymError: The episode ended during the replayed ``prefix``.
    """
    start = time.perf_counter()
    obs, info = env.reset(seed=seed)
    meanings = action_choices(env)
    trie = trie if trie is not None else chat.trie(meanings)
    text = EpisodeChat.for_env(agent_template(), env, seed, turns=turns)
    result = EpisodeTokens(seed=seed, memory=len(memory.texts) if memory is not None else 0)
    system = text.system(memory)["content"]
    user = _user_turn(text, result, obs, info, show_hints)
    result.messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    result.prompt_ids = chat.encode(chat.turns.opening_text(chat.bos, system, user))
    stream = chooser() if chooser is not None else ModelChooser(chat.model, chat.device)
    result.sampled_logprobs = stream.sampled_logprobs
    stream.feed(result.prompt_ids)
    done = False
    while not done:
        begin = len(result.completion_ids)
        if result.length < len(prefix):
            action = _action_text(prefix[result.length], meanings)
            tokens = chat.encode(action + chat.turns.stop)
            choice = Choice(meanings.index(action), tokens, [0] * len(tokens), [0.0] * len(tokens))
            stream.feed(tokens)
            result.replayed += 1
        else:
            choice = stream.choose(
                trie, meanings, result.messages, temperature=temperature, generator=generator
            )
        result.completion_ids += choice.tokens
        result.env_mask += choice.chosen
        result.logprobs += choice.logprobs
        result.replies.append((begin, len(result.completion_ids)))
        result.generated += len(choice.tokens)
        result.actions.append(meanings[choice.action])
        result.messages.append({"role": "assistant", "content": meanings[choice.action]})
        obs, reward, terminated, truncated, info = env.step(meanings[choice.action])
        result.length += 1
        result.episode_return += float(reward)
        result.env_return += float(info.get(ENV_REWARD, reward))
        done = terminated or truncated
        result.truncated = bool(truncated and not terminated)
        if done:
            if result.replayed < len(prefix):
                raise FeedbackGymError(
                    f"the replay of seed {seed} ended at step {result.length} of {len(prefix)}"
                )
            break
        pending = EpisodeTokens(seed=seed)
        user = _user_turn(text, pending, obs, info, show_hints)
        turn = chat.encode(chat.turns.next_text(user))
        if max_tokens is not None and (
            len(result.prompt_ids) + len(result.completion_ids) + len(turn) + trie.depth()
            > max_tokens
        ):
            result.truncated = True
            break
        result.hints += pending.hints
        result.observations += pending.observations
        result.turn_hints += pending.turn_hints
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
    if on_end is not None:
        on_end(list(result.actions), info)
    return result


def _user_turn(
    text: EpisodeChat, episode: EpisodeTokens, obs: Any, info: dict[str, Any], show: bool
) -> str:
    """The next user turn's text; notes its observation and hint on ``episode``."""
    hint = _feedback(info, "guide")
    episode.observations.append(obs)
    episode.turn_hints.append(str(hint["text"]) if hint else None)
    episode.hints += bool(hint and show)
    return str(text.user(obs, hint if show else None)["content"])


def _action_text(action: Any, meanings: Sequence[str]) -> str:
    """An action (its text or its index) as the env's action text."""
    text = meanings[action] if isinstance(action, int) else str(action)
    if text not in meanings:
        raise FeedbackGymError(f"replayed action {action!r} is not one of the env's actions")
    return text


def rendered(
    chat: ChatModel,
    env: gym.Env[Any, Any],
    episode: EpisodeTokens,
    *,
    hints: Sequence[str | None],
    memory: ReviewMemory | None = None,
    turns: str = "delta",
) -> EpisodeTokens:
    """``episode`` with ``hints`` in its user turns and ``memory`` in its system message.

    The replies' tokens, their mask and their log-probabilities are the
    episode's; the env's turns are written again, so a position of the
    model's choices moves but its token does not.

    Args:
        chat: The model's tokenizer and turn markup.
        env: The env it was played on (its actions and description).
        episode: The episode, as :func:`play_episode` returned it.
        hints: One hint text (or ``None``) per user turn.
        memory: The reviews the system message carries (``None``: none).
        turns: What later user turns carry, as when it was played.

    Raises:
        ValueError: ``hints`` does not have one entry per user turn.
    """
    if len(hints) != len(episode.observations):
        raise ValueError(
            f"{len(hints)} hints for an episode of {len(episode.observations)} user turns"
        )
    text = EpisodeChat.for_env(agent_template(), env, episode.seed, turns=turns)
    users = [
        str(text.user(obs, {"text": hint} if hint else None)["content"])
        for obs, hint in zip(episode.observations, hints, strict=True)
    ]
    system = text.system(memory)["content"]
    prompt = chat.encode(chat.turns.opening_text(chat.bos, system, users[0]))
    completion: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    replies: list[tuple[int, int]] = []
    for index, (begin, end) in enumerate(episode.replies):
        replies.append((len(completion), len(completion) + end - begin))
        completion += episode.completion_ids[begin:end]
        mask += episode.env_mask[begin:end]
        logprobs += episode.logprobs[begin:end]
        if index + 1 < len(users):
            turn = chat.encode(chat.turns.next_text(users[index + 1]))
            completion += turn
            mask += [0] * len(turn)
            logprobs += [0.0] * len(turn)
    return dataclasses.replace(
        episode,
        prompt_ids=prompt,
        completion_ids=completion,
        env_mask=mask,
        logprobs=logprobs,
        replies=replies,
        memory=len(memory.texts) if memory is not None else 0,
        hints=sum(hint is not None for hint in hints),
    )
