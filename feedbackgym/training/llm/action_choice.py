"""Replies the model cannot get wrong: each one held to the env's actions, token by token.

A :class:`~feedbackgym.chat.token_trie.TokenTrie` holds the token sequences of
the env's actions, each followed by the turn's stop (:func:`action_trie`);
:func:`choose_action` walks it, sampling each
token from the model's distribution over the tokens that continue some
action (constrained decoding), so every reply names one action, by
construction. A token that is the only continuation is taken without asking
the model (a forced token): it is no choice, so it is left out of the loss.
:class:`TokenStream` feeds the model incrementally over a KV cache: the
episode's tokens are computed once each, however long the chat grows.

Example:
    >>> class Words:  # a tokenizer of whole words
    ...     vocab = {"wait": 5, "restart": 6, "db": 7, "<end>": 9}
    ...     def encode(self, text, add_special_tokens=False):
    ...         return [self.vocab[w] for w in text.replace("<end>", " <end>").split()]
    >>> trie = action_trie(Words(), ["wait", "restart db"], "<end>")
    >>> sorted(trie.root.next), trie.node([6, 7, 9]).choice
    ([5, 6], 1)
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from feedbackgym.chat.token_trie import TokenTrie
from feedbackgym.errors import requires_extra

with requires_extra("llm-train", "torch"):
    import torch

__all__ = [
    "Choice",
    "Chooser",
    "ModelChooser",
    "TokenStream",
    "action_trie",
    "choose_action",
    "rollout_threads",
]


@contextlib.contextmanager
def rollout_threads(device: torch.device) -> Iterator[None]:
    """Plays on one torch thread on the CPU, then restores the count (the update's).

    A rollout feeds the model a few tokens at a time: its small products gain
    nothing from more threads, and lose to their start-up (measured on 2
    cores: 142 tokens/s on one thread against 75 on two, while the update's
    long sequences went from 9 training tokens/s to 15).
    """
    if device.type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def action_trie(tokenizer: Any, meanings: Sequence[str], stop: str) -> TokenTrie:
    """The trie of ``meanings``, each as ``tokenizer`` encodes it followed by ``stop``.

    Raises:
        ConfigError: Two actions encode alike (the tokenizer cannot tell them apart).
    """
    return TokenTrie(
        [tokenizer.encode(m + stop, add_special_tokens=False) for m in meanings], prefix_free=True
    )


class TokenStream:
    """Feeds a causal LM one episode's tokens over a KV cache; gives the next token's logits.

    Args:
        model: A causal LM (a ``transformers`` model, or a PEFT model around one).
        device: Where the model is.

    Attributes:
        tokens: Every token fed so far.
        forwards: Model calls made.
        computed: Tokens the model computed (each once).
    """

    def __init__(self, model: Any, device: torch.device) -> None:
        self.model = model
        self.device = device
        self.tokens: list[int] = []
        self.forwards = 0
        self.computed = 0
        self._cache: Any = None
        self._pending: list[int] = []
        self._last: torch.Tensor | None = None
        self._cache_name = _cache_argument(model)

    def feed(self, tokens: Sequence[int]) -> None:
        """Appends ``tokens`` (computed at the next :meth:`logits`)."""
        self.tokens.extend(int(t) for t in tokens)
        self._pending.extend(int(t) for t in tokens)

    def logits(self) -> torch.Tensor:
        """The next token's logits (1-D), after every token fed.

        Raises:
            ValueError: Nothing was fed yet.
        """
        if not self._pending:
            if self._last is None:
                raise ValueError("feed tokens before asking for logits")
            return self._last
        ids = torch.tensor([self._pending], device=self.device)
        with torch.no_grad():
            out = self.model(
                input_ids=ids,
                use_cache=True,
                logits_to_keep=1,
                **{self._cache_name: self._cache},
            )
        self._cache = getattr(out, self._cache_name)
        self.forwards += 1
        self.computed += len(self._pending)
        self._pending = []
        self._last = out.logits[0, -1].float()
        return self._last


def _cache_argument(model: Any) -> str:
    """What the model's forward calls its KV cache: ``cache``, or ``past_key_values`` (older)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


@dataclass
class Choice:
    """One reply: the action chosen and its tokens.

    Attributes:
        action: The action's index.
        tokens: The reply's tokens, its stop included.
        chosen: 1 for each token the model chose, 0 for a forced one.
        logprobs: Each token's log-probability under the model (0.0 when forced).
    """

    action: int
    tokens: list[int]
    chosen: list[int]
    logprobs: list[float]


def choose_action(
    stream: TokenStream,
    trie: TokenTrie,
    *,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> Choice:
    """Samples one action's tokens from the model, each held to the trie; feeds them.

    Args:
        stream: The episode so far (it ends where the reply begins).
        trie: The actions the reply may name.
        temperature: Sampling temperature (0: the likeliest token each time).
        generator: The random generator sampling uses.

    Returns:
        The reply; its tokens are fed to ``stream``.
    """
    node = trie.root
    tokens: list[int] = []
    chosen: list[int] = []
    logprobs: list[float] = []
    while node.choice is None:
        options = list(node.next)
        if len(options) == 1:
            token, picked, logprob = options[0], 0, 0.0
        else:
            logits = stream.logits()
            scaled = logits / temperature if temperature > 0 else logits
            allowed = scaled[options]
            if temperature > 0:
                probs = torch.softmax(allowed, dim=-1)
                index = int(torch.multinomial(probs.cpu(), 1, generator=generator).item())
            else:
                index = int(torch.argmax(allowed).item())
            token, picked = options[index], 1
            logprob = float(torch.log_softmax(scaled, dim=-1)[token].item())
        stream.feed([token])
        tokens.append(token)
        chosen.append(picked)
        logprobs.append(logprob)
        node = node.next[token]
    return Choice(node.choice, tokens, chosen, logprobs)


class Chooser(Protocol):
    """Who picks an episode's replies: the model in this process, or the model server.

    Attributes:
        sampled_logprobs: Whether each :class:`Choice` carries its tokens'
            log-probabilities as sampled (else 0.0).
    """

    sampled_logprobs: bool

    @property
    def computed(self) -> int:
        """Tokens the model computed for the episode so far."""
        ...

    def feed(self, tokens: Sequence[int]) -> None:
        """Appends tokens of the chat that are not replies (the prompt, the env's turns)."""

    def choose(
        self,
        trie: TokenTrie,
        meanings: Sequence[str],
        messages: Sequence[dict[str, str]],
        *,
        temperature: float,
        generator: Any = None,
    ) -> Choice:
        """The next reply, one of ``meanings`` (``trie``'s), after ``messages``; fed too."""
        ...


class ModelChooser:
    """Replies chosen by the model in this process (:func:`choose_action` over a KV cache).

    Args:
        model: The causal LM.
        device: Where it is.
    """

    sampled_logprobs = True

    def __init__(self, model: Any, device: torch.device) -> None:
        self.stream = TokenStream(model, device)

    @property
    def computed(self) -> int:
        """Tokens the model computed (each once)."""
        return self.stream.computed

    def feed(self, tokens: Sequence[int]) -> None:
        """Appends ``tokens`` to the stream."""
        self.stream.feed(tokens)

    def choose(
        self,
        trie: TokenTrie,
        meanings: Sequence[str],
        messages: Sequence[dict[str, str]],
        *,
        temperature: float,
        generator: Any = None,
    ) -> Choice:
        """:func:`choose_action` on the stream (``meanings`` and ``messages`` are its tokens)."""
        return choose_action(self.stream, trie, temperature=temperature, generator=generator)
