"""The warm-up's examples: expert episodes as the prompts the agent sends, loss on its replies.

The supervised warm-up (:mod:`~.sft`) trains the model on what
``feedbackgym agent`` shows it, or the warm-up would not transfer. So its
episodes are played by the agent's own loop
(:class:`~feedbackgym.language.agent_loop.ChatAgent`, the arm's hints and
reviews in the prompt) with the expert answering in the model's place
(:class:`ExpertReplies`), or read from ``feedbackgym datasets export-chat``
transcripts. Each step's prompt is then what the agent sent: the system
message and the last steps that fit the prompt budget
(:class:`~feedbackgym.language.prompt_window.PromptWindow`, tokens counted
by the model's own tokenizer as the server counts them), rendered by the
server's chat template (:func:`~feedbackgym.chat.turns.render_chat`)
and tokenized as the server tokenizes it.

Consecutive steps whose prompts grow by the reply and the next turn (the
window dropped nothing in between) share one sequence: the last prompt with
each earlier reply inside it. A sequence's labels are ``-100`` everywhere
but on each reply's action tokens: the server ends a reply itself once a
whole action is spelled (the choice mask), so the end of turn is not
trained on, as the LLM trainer leaves out forced tokens. Where the
window drops steps, or a prompt's tokens are not the previous sequence's
continued (a token spanning a boundary), a new sequence starts: every
labelled token sees exactly the tokens the agent's prompt would give it.

Hints come with the arms' dropout (:class:`~feedbackgym.config.GuideConfig`'s
``dropout``, per episode by default), so the model also learns to play
without them.

Example:
    >>> TrainingSequence([1, 2, 3], [-100, 2, 3]).label_tokens
    2
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from feedbackgym.chat.turns import render_chat
from feedbackgym.config import GuideConfig
from feedbackgym.errors import ConfigError
from feedbackgym.experts import held_out_seeds
from feedbackgym.language.agent_arms import DEFAULT_AGENT_ARM, LabelAttempt
from feedbackgym.language.agent_loop import DEFAULT_MEMORY, ChatAgent
from feedbackgym.language.episode_chat import DEFAULT_TURNS
from feedbackgym.language.prompt_window import PromptWindow

__all__ = [
    "IGNORE",
    "ExpertReplies",
    "TokenizerCounter",
    "TrainingSequence",
    "expert_chats",
    "read_chats",
    "step_prompts",
    "training_sequences",
]

IGNORE = -100
"""The label of a token that carries no loss (PyTorch's ``ignore_index``)."""
_GUIDE = GuideConfig()


@dataclass
class TrainingSequence:
    """One sequence to train on.

    Attributes:
        input_ids: Its tokens.
        labels: ``input_ids`` where the loss is taken (the replies), :data:`IGNORE` elsewhere.
    """

    input_ids: list[int]
    labels: list[int]

    @property
    def label_tokens(self) -> int:
        """How many tokens carry loss."""
        return sum(label != IGNORE for label in self.labels)


class ExpertReplies:
    """Answers every prompt with the env's expert action (the standard answer), no server.

    A :class:`~feedbackgym.chat.Replier`, so the agent's own loop plays the
    expert's episodes and writes the prompts the warm-up trains on.

    Args:
        env: The env being played (its ``unwrapped.expert_action()`` is asked at each reply).
    """

    constrain = "none"
    """Replies are the expert's words: nothing to hold them to."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        self.env = env

    def reply(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        choices: Sequence[str] | None = None,
        max_tokens: int | None = None,
    ) -> str:
        """The expert's action in words (the env's ``action_meanings``)."""
        unwrapped: Any = self.env.unwrapped
        return str(unwrapped.action_meanings[unwrapped.expert_action()])


class TokenizerCounter:
    """Counts tokens as llama.cpp's server does (BOS included), with a Hugging Face tokenizer.

    Args:
        tokenizer: The model's tokenizer.
        cache_size: Texts whose counts are kept.
    """

    name = "the model's tokenizer"

    def __init__(self, tokenizer: Any, cache_size: int = 4096) -> None:
        self.tokenizer = tokenizer
        self.cache_size = cache_size
        self._cache: OrderedDict[str, int] = OrderedDict()

    def count(self, text: str) -> int:
        """The number of tokens of ``text``, special tokens parsed and BOS added."""
        if text not in self._cache:
            self._cache[text] = len(self.tokenizer.encode(text))
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return self._cache[text]


def expert_chats(
    env_id: str,
    episodes: int,
    *,
    seed: int = 0,
    arm: str = DEFAULT_AGENT_ARM,
    memory: int = DEFAULT_MEMORY,
    turns: str = DEFAULT_TURNS,
    dropout: float = _GUIDE.dropout,
    dropout_scope: str = _GUIDE.dropout_scope,
    level: str = _GUIDE.level,
    window: PromptWindow | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> Iterator[list[dict[str, str]]]:
    """The chats of ``episodes`` expert episodes played by the agent's loop, one at a time.

    The env is made as ``feedbackgym agent`` makes it (text observations, the
    built-in guide and reviewer on ``info``), the hints withheld with
    ``dropout``; seeds ``seed, seed + 1, ...`` (never a held-out one), one
    attempt each in ``arm``.

    Args:
        env_id: A registered env with a text mode and an expert.
        episodes: How many.
        seed: The first seed.
        arm: The agent's arm (its hints and the reviews its system message carries).
        memory: Reviews the system message carries.
        turns: What a later user turn carries (``"delta"`` or ``"full"``).
        dropout: Chance a hint is withheld (per ``dropout_scope``: step or episode).
        dropout_scope: ``"episode"`` or ``"step"``.
        level: What the hints and reviews disclose (``"phase"``, ``"target"``, ``"action"``).
        window: The agent's prompt window (it sizes the reviews in the system message).
        env_kwargs: More keyword arguments for ``gym.make``.

    Raises:
        ValueError: A seed is held out.
    """
    from feedbackgym.wrappers import AddGuide, AddReview

    env: gym.Env[Any, Any] = gym.make(env_id, **{"obs_mode": "text", **(env_kwargs or {})})
    try:
        try:
            held = set(held_out_seeds(env))
        except ValueError:  # an env without held-out seeds
            held = set()
        if getattr(env.unwrapped, "split", None) is not None:
            held = set()  # the split, not the seed, keeps train and test apart
        clash = set(range(seed, seed + episodes)) & held
        if clash:
            raise ValueError(f"expert seeds must avoid the held-out seeds, {min(clash)} is one")
        env = hinted = AddGuide(
            env, channels=("info",), dropout=dropout, dropout_scope=dropout_scope, level=level
        )
        env = reviewed = AddReview(env, channels=("info",), level=level)
        agent = ChatAgent(
            ExpertReplies(env), memory=memory, arm=arm, retries=0, window=window, turns=turns
        )
        hinted.set_weight(1.0 if agent.arm.hints_on(1) else 0.0)
        reviewed.set_weight(1.0 if agent.arm.reviews else 0.0)
        for n in range(episodes):
            yield agent.play(LabelAttempt(env, agent.arm.name, 1), seed + n).messages
    finally:
        env.close()


def read_chats(path: str | os.PathLike[str]) -> list[list[dict[str, str]]]:
    """The chats of a JSONL file of ``export-chat`` records (each with ``messages``).

    Raises:
        ConfigError: The file cannot be read, or a line is not a chat.
    """
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as error:
        raise ConfigError(f"chats {path}: {error.strerror}") from None
    chats = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            messages = json.loads(line)["messages"]
            roles = [m["role"] for m in messages]
        except (ValueError, KeyError, TypeError) as error:
            raise ConfigError(
                f"chats {path}:{number}: not an export-chat record ({error})"
            ) from None
        if roles[:1] != ["system"] or roles[1:] != ["user", "assistant"] * ((len(roles) - 1) // 2):
            raise ConfigError(
                f"chats {path}:{number}: messages must be system, then user and assistant in turn"
            )
        chats.append(messages)
    return chats


def step_prompts(
    messages: Sequence[Mapping[str, str]], window: PromptWindow | None
) -> Iterator[tuple[list[dict[str, str]], str]]:
    """Each step's prompt as the agent sent it (through ``window``), and the reply it got."""
    if window is not None:
        window.reset()
    for user in range(1, len(messages) - 1, 2):
        chat = messages[: user + 1]
        prompt = window.fit(chat) if window is not None else [dict(m) for m in chat]
        yield prompt, str(messages[user + 1]["content"])


def training_sequences(
    chats: Iterable[Sequence[Mapping[str, str]]],
    encode: Any,
    *,
    window: PromptWindow | None,
    template: str = "gemma",
) -> list[TrainingSequence]:
    """The chats as sequences to train on (see the module docstring).

    Args:
        chats: Episodes' messages (system, then user and assistant in turn).
        encode: Text to token ids, special tokens in the text parsed, none added.
        window: The agent's prompt window (``None``: the whole chat each step).
        template: The server's chat template.
    """
    sequences: list[TrainingSequence] = []
    for messages in chats:
        current: TrainingSequence | None = None
        text = ""
        for prompt, reply in step_prompts(messages, window):
            prompt_text = render_chat(prompt, template)
            ids = encode(prompt_text)
            gap = encode(prompt_text[len(text) :]) if prompt_text.startswith(text) else []
            if current is not None and gap and current.input_ids + gap == ids:
                current.input_ids += gap
                current.labels += [IGNORE] * len(gap)
            else:
                current = TrainingSequence(list(ids), [IGNORE] * len(ids))
                sequences.append(current)
            answer = encode(reply)
            current.input_ids += answer
            current.labels += answer
            text = prompt_text + reply
    return sequences
