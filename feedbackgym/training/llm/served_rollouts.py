"""Rollouts on the model server: the trainer's adapter published each round, played by name.

The trainer updates the adapter in torch; the episodes are played by the
packaged model's llama.cpp server (:class:`~feedbackgym.language.model_server.ModelServer`),
the inference runtime apart from training. :class:`ServedAdapter` owns that
server for a run: before a round's rollouts (and before a validation) it
publishes the adapter as it stands as a version of the run's ``served/``
registry, which the server loads on its first request
(:mod:`~feedbackgym.language.served_versions`; the trainer writes the
adapter in llama.cpp's GGUF form beside PEFT's, so the server converts
nothing), and hands out a :class:`ServedChooser` per episode,
which asks the server for each reply held to the env's actions (the
server's choice decoding runs the model only where the actions branch, and
its cache keeps the chat's prefix, so each token is computed once).

The episode's tokens are the trainer's own: the reply the server chose is
encoded with the turn's stop, as the trie of
:func:`~feedbackgym.training.llm.action_choice.action_trie` holds it, and a
token is the model's choice where the trie branches. The server renders the
chat with the same turn format (``prompts/gemma.jinja``), so the prompt it
read is the one GRPO scores. What the server does not return is the sampled
tokens' log-probabilities (the loss recomputes them; the ``+failure-hints``
weights compute the hinted ones in torch), and its weights are the GGUF's
quantized ones: the rollouts are very slightly off-policy.

``served/`` keeps the adapters of the last :data:`KEPT_ADAPTERS` versions;
the registry lists every one published (the round checkpoints hold the
adapters).

Example:
    >>> branching([[5, 6, 9], [5, 7, 9]], [5, 7, 9])
    [0, 1, 0]
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from feedbackgym.chat.client import ChatClient
from feedbackgym.chat.token_trie import TokenTrie
from feedbackgym.errors import ConfigError, ReplyError
from feedbackgym.language.lora_gguf import export_lora_gguf
from feedbackgym.language.model_file import model_file
from feedbackgym.language.model_server import ModelServer
from feedbackgym.language.versions import VersionRegistry
from feedbackgym.training.llm.action_choice import Choice
from feedbackgym.training.llm.causal_lm import ChatModel

__all__ = ["KEPT_ADAPTERS", "ServedAdapter", "ServedChooser", "branching", "served_model_file"]

KEPT_ADAPTERS = 2
"""Published versions whose adapter folders ``served/`` keeps (the newest)."""

REPLY_TIMEOUT_S = 120.0
"""How long one reply may take (the server loads a new version on its first request)."""


def branching(sequences: Sequence[Sequence[int]], tokens: Sequence[int]) -> list[int]:
    """1 where ``tokens`` chose among the ``sequences``' continuations, 0 where it was forced.

    Args:
        sequences: The actions' token sequences (the trie's).
        tokens: One of them.

    Raises:
        ValueError: ``tokens`` is none of the sequences.
    """
    return _branching(TokenTrie(sequences, prefix_free=True), tokens)


def _branching(trie: TokenTrie, tokens: Sequence[int]) -> list[int]:
    node = trie.root
    chosen: list[int] = []
    for token in tokens:
        following = node.next.get(int(token))
        if following is None:
            raise ValueError(f"tokens {list(tokens)} leave the actions' trie")
        chosen.append(int(len(node.next) > 1))
        node = following
    if node.choice is None:
        raise ValueError(f"tokens {list(tokens)} end inside the actions' trie")
    return chosen


def served_model_file(model: str) -> Any:
    """The GGUF file the server plays for a run's ``model`` setting.

    Raises:
        ConfigError: ``model`` is a model folder (the server reads GGUF only).
    """
    if model == "packaged":
        return model_file(None)
    if not str(model).endswith(".gguf"):
        raise ConfigError(
            f"model {model!r}: rollouts on the model server need a GGUF model (packaged or a "
            ".gguf file); play a model folder with rollouts='torch'"
        )
    return model_file(model)


class ServedChooser:
    """One episode's replies, asked of the server by name; the tokens are the trainer's.

    Args:
        client: The server's client for the version being played.
        chat: The trainer's model (its tokenizer and turn markup).

    Attributes:
        computed: Tokens of the chat the server was given (it computes each once).
    """

    sampled_logprobs = False
    """The replies carry no log-probabilities (see the module's notes)."""

    def __init__(self, client: ChatClient, chat: ChatModel) -> None:
        self.client = client
        self.chat = chat
        self.computed = 0

    def feed(self, tokens: Sequence[int]) -> None:
        """Notes the chat's new tokens (the server reads them with the next request)."""
        self.computed += len(tokens)

    def choose(
        self,
        trie: TokenTrie,
        meanings: Sequence[str],
        messages: Sequence[dict[str, str]],
        *,
        temperature: float,
        generator: Any = None,
    ) -> Choice:
        """The server's reply to ``messages``, one of ``meanings``, as the trainer's tokens.

        Raises:
            ReplyError: The reply is none of the actions.
        """
        seed = None
        if generator is not None:
            import torch

            seed = int(torch.randint(2**31 - 1, (1,), generator=generator).item())
        reply = self.client.reply(
            messages, choices=list(meanings), temperature=temperature, seed=seed
        )
        if reply not in meanings:
            raise ReplyError(f"the server replied {reply!r}, none of the env's actions")
        tokens = self.chat.encode(reply + self.chat.turns.stop)
        chosen = _branching(trie, tokens)
        self.computed += len(tokens)
        return Choice(meanings.index(reply), tokens, chosen, [0.0] * len(tokens))


class ServedAdapter:
    """A run's model server, serving the adapter as the trainer last published it.

    The server starts on the first :meth:`publish` and stops on :meth:`close`
    (or leaving the ``with`` block); no process outlives the run.

    Args:
        chat: The model being trained (its adapter is what is published).
        root: The registry's folder (a run's ``served/``).
        model: The run's ``model`` setting (the GGUF the server plays).
        context: The server's context in tokens (the run's longest episode).
        threads: The server's CPU threads (default: one per core: the trainer
            waits while the server plays).

    Raises:
        ConfigError: ``model`` is no GGUF model.
    """

    def __init__(
        self,
        chat: ChatModel,
        root: str | Path,
        *,
        model: str = "packaged",
        context: int = 2048,
        threads: int | None = None,
    ) -> None:
        self.chat = chat
        self.model = served_model_file(model)
        self.registry = VersionRegistry(root)
        self.context = context
        self.threads = threads or os.cpu_count() or 1
        self.server: ModelServer | None = None
        self._published: tuple[int, ChatClient] | None = None

    def publish(self, key: int) -> ChatClient:
        """The client of the adapter published at ``key`` (publishing it if ``key`` is new).

        Args:
            key: Optimizer steps taken so far: the same key gives the same version.
        """
        if self._published is not None and self._published[0] == key:
            return self._published[1]
        version = self.registry.add(self._save, round=key, validation={}, passed=False)
        for old in self.registry.versions()[:-KEPT_ADAPTERS]:
            shutil.rmtree(self.registry.path(old.number), ignore_errors=True)
        if self.server is None:
            self.server = ModelServer(
                self.model, context=self.context, threads=self.threads, versions=self.registry.root
            )
            self.server.start()
        client = ChatClient(
            self.server.base_url,
            self.server.served_name(version.number),
            timeout_s=REPLY_TIMEOUT_S,
            max_tokens=64,
        )
        self._published = (key, client)
        return client

    def _save(self, folder: Path) -> None:
        """The adapter in PEFT's form and in llama.cpp's, so the server loads it unconverted."""
        self.chat.model.save_pretrained(folder)
        export_lora_gguf(folder, folder / "adapter.gguf", base=self.model.path)

    def forget(self) -> None:
        """The adapter changed outside training (a rollback): the next :meth:`publish` publishes."""
        self._published = None

    def chooser(self, key: int) -> Callable[[], ServedChooser]:
        """What makes each episode's chooser for the adapter at ``key``."""
        client = self.publish(key)
        return lambda: ServedChooser(client, self.chat)

    def close(self) -> None:
        """Stops the server (if it started)."""
        if self.server is not None:
            self.server.stop()
            self.server = None

    def __enter__(self) -> ServedAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
