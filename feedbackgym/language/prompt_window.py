"""The agent's prompt, sized to the model's context: the system message, the last steps that fit.

An episode's chat grows a user and an assistant message a step; a long
episode would outgrow any context. :class:`PromptWindow` sends the system
message (the env, its actions, the review memory, the episode) and as many of
the latest steps as fit a budget in tokens, the current observation and its
hint always among them. When the next step would pass the budget it drops the
oldest steps, down to ``refill`` of the budget, so the prompt's beginning then
stays the same for a while and the server reuses what it computed for it
(llama.cpp keeps the longest common prefix of consecutive prompts).

Tokens are counted by the server's tokenizer when it has an endpoint for it
(:class:`ServerTokenCounter`: llama-cpp-python's ``POST /extras/tokenize/count``
or llama.cpp's ``POST /tokenize``), else by :class:`ByteBound`: UTF-8 bytes,
an upper bound on the tokens of any tokenizer whose every token covers at
least one byte (byte-level BPE, SentencePiece with byte fallback), loose by
about four times on English. Each message adds :data:`TURN_TOKENS` for its
chat-template markers.

Example:
    >>> window = PromptWindow(60, ByteBound(), refill=0.5)
    >>> chat = [{"role": "system", "content": "Act."}]
    >>> for step in range(4):
    ...     chat.append({"role": "user", "content": f"observation {step}"})
    ...     prompt = window.fit(chat)
    ...     chat.append({"role": "assistant", "content": "wait"})
    >>> [m["content"] for m in prompt]
    ['Act.', 'observation 3']
"""

from __future__ import annotations

import json
import urllib.request
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from feedbackgym.errors import ChatError, ConfigError

__all__ = [
    "FRAME_TOKENS",
    "TURN_TOKENS",
    "ByteBound",
    "PromptTooLong",
    "PromptWindow",
    "ServerTokenCounter",
    "TokenCounter",
    "token_counter",
]

TURN_TOKENS = 8
"""Tokens a chat template adds around each message (Gemma's ``<start_of_turn>user`` and
``<end_of_turn>`` take 5, ChatML's about as many)."""
FRAME_TOKENS = 8
"""Tokens a chat template adds once (BOS, the reply's opening turn)."""


class PromptTooLong(ConfigError):
    """The system message and the current step alone do not fit the prompt budget."""


class TokenCounter(Protocol):
    """Counts a text's tokens (or bounds them from above)."""

    name: str
    """How it counts, for reports (``"the server's tokenizer"``, ``"UTF-8 bytes (a bound)"``)."""

    def count(self, text: str) -> int:
        """The number of tokens of ``text``."""
        ...


class ByteBound:
    """Counts UTF-8 bytes: at least as many as the tokens of a byte-level tokenizer.

    Example:
        >>> ByteBound().count("héllo")
        6
    """

    name = "UTF-8 bytes (a bound)"

    def count(self, text: str) -> int:
        """The UTF-8 length of ``text``."""
        return len(text.encode())


class ServerTokenCounter:
    """Counts tokens with a server's own tokenizer, caching each text's count.

    Args:
        base_url: The OpenAI-compatible base URL (``http://HOST:PORT/v1``); the
            tokenizer endpoints sit beside ``/v1``.
        model: The model name (llama-cpp-python serves several by name).
        timeout_s: How long a count waits.
        cache_size: Texts whose counts are kept.

    Raises:
        ChatError: (from :meth:`count`) Neither endpoint answers.
    """

    name = "the server's tokenizer"

    def __init__(
        self, base_url: str, model: str, *, timeout_s: float = 10.0, cache_size: int = 4096
    ) -> None:
        self.root = base_url.rstrip("/").removesuffix("/v1")
        self.model = model
        self.timeout_s = timeout_s
        self.cache_size = cache_size
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._route: str | None = None

    def count(self, text: str) -> int:
        """The number of tokens the server's tokenizer makes of ``text``."""
        if text in self._cache:
            self._cache.move_to_end(text)
            return self._cache[text]
        routes = (self._route,) if self._route else ("/extras/tokenize/count", "/tokenize")
        problems = []
        for route in routes:
            assert route is not None
            try:
                count = self._ask(route, text)
            except (OSError, ValueError, KeyError, TypeError) as error:
                if isinstance(error, TimeoutError) or isinstance(
                    getattr(error, "reason", None), TimeoutError
                ):
                    raise ChatError(f"{self.root}: no reply within {self.timeout_s:g} s") from None
                problems.append(f"{route}: {error}")
                continue
            self._route = route
            self._cache[text] = count
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
            return count
        raise ChatError(f"{self.root}: cannot count tokens ({'; '.join(problems)})")

    def _ask(self, route: str, text: str) -> int:
        body: dict[str, Any] = (
            {"input": text, "model": self.model}
            if route.startswith("/extras")
            else {"content": text, "add_special": False}
        )
        request = urllib.request.Request(
            self.root + route,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            data = json.load(response)
        return int(data["count"]) if "count" in data else len(data["tokens"])


def token_counter(base_url: str, model: str, *, timeout_s: float = 10.0) -> TokenCounter:
    """The server's tokenizer when it offers one (llama.cpp's servers), else :class:`ByteBound`.

    Example:
        >>> token_counter("http://127.0.0.1:9/v1", "m", timeout_s=0.5).name  # nothing there
        'UTF-8 bytes (a bound)'
    """
    counter = ServerTokenCounter(base_url, model, timeout_s=timeout_s)
    try:
        counter.count("tokens")
    except ChatError:
        return ByteBound()
    return counter


class PromptWindow:
    """Keeps a chat's prompt within ``budget`` tokens: the system message and the last steps.

    Args:
        budget: The most tokens a prompt may have (the server's context less
            what the reply and a retry need).
        counter: How tokens are counted.
        refill: When a prompt would pass the budget, the oldest steps are
            dropped until it takes at most this share of it (in ``(0, 1]``).

    Attributes:
        first: The index of the first message after the system message that
            the prompt still holds (1 at an episode's start).
        trims: How many times steps were dropped.

    Raises:
        ConfigError: A bad budget or refill.
    """

    def __init__(self, budget: int, counter: TokenCounter, *, refill: float = 0.5) -> None:
        if budget < 1 or not 0.0 < refill <= 1.0:
            raise ConfigError(
                f"budget must be positive and refill in (0, 1], got {budget}, {refill}"
            )
        self.budget = budget
        self.counter = counter
        self.refill = refill
        self.first = 1
        self.trims = 0

    def reset(self) -> None:
        """Starts a new episode's chat."""
        self.first = 1

    def size(self, messages: Sequence[Mapping[str, str]]) -> int:
        """The tokens ``messages`` take in a prompt (template markers included)."""
        return FRAME_TOKENS + sum(
            self.counter.count(str(m["content"])) + TURN_TOKENS for m in messages
        )

    def fit(self, messages: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
        """The prompt for ``messages`` (system, then user and assistant in turn, user last).

        Raises:
            PromptTooLong: The system message and the last message alone pass the budget.
        """
        system, last = messages[0], len(messages) - 1
        self.first = min(max(self.first, 1), last)
        if self.size([system, *messages[self.first :]]) > self.budget:
            target = self.refill * self.budget
            sizes = [self.size([m]) - FRAME_TOKENS for m in messages]
            total = self.size([system, *messages[self.first :]])
            while self.first < last and total > target:
                total -= sizes[self.first] + sizes[self.first + 1]  # a step: user and assistant
                self.first += 2
            self.trims += 1
        kept = [dict(system), *(dict(m) for m in messages[self.first :])]
        if self.size(kept) > self.budget:
            raise PromptTooLong(
                f"the system message ({self.size([system]) - FRAME_TOKENS} tokens by "
                f"{self.counter.name}) and the current step ({self.size([messages[-1]])} tokens) "
                f"do not fit the prompt budget of {self.budget} tokens: give the model a larger "
                "context, or fewer reviews in memory"
            )
        return kept
