"""The chat client: one call to a chat model behind an OpenAI-compatible API.

:class:`ChatClient` talks to a server (vLLM, llama.cpp's, Ollama); the agent
loop needs less than that, :class:`Replier` (a ``reply`` and a
``constrain``), which the expert's standard answers implement without a
server. The ``openai`` package (the ``llm`` extra) is imported on the first call.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from feedbackgym.chat.grammar import choice_grammar, compact_json
from feedbackgym.errors import (
    ChatError,
    ConfigError,
    ReplyError,
    requires_extra,
)

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "CONSTRAINTS",
    "CONSTRAIN_ENV",
    "DEFAULT_TIMEOUT_S",
    "MODEL_ENV",
    "TIMEOUT_ENV",
    "ChatClient",
    "Replier",
]

T = TypeVar("T")

BASE_URL_ENV = "FEEDBACKGYM_LLM_BASE_URL"
"""The chat server's base URL (``http://127.0.0.1:8000/v1``) when none is given."""
MODEL_ENV = "FEEDBACKGYM_LLM_MODEL"
"""The model name when none is given."""
API_KEY_ENV = "FEEDBACKGYM_LLM_API_KEY"
"""The API key, for servers that want one (local servers do not)."""
DEFAULT_TIMEOUT_S = 30.0
"""How long a call waits for the server's reply."""
TIMEOUT_ENV = "FEEDBACKGYM_LLM_TIMEOUT"
"""A generator's timeout in seconds when none is given (default :data:`DEFAULT_TIMEOUT_S`)."""
CONSTRAIN_ENV = "FEEDBACKGYM_LLM_CONSTRAIN"
"""A generator's constraint (one of :data:`CONSTRAINTS`) when none is given (default grammar)."""
CONSTRAINTS = ("grammar", "json", "none")
"""How :meth:`ChatClient.reply` holds a reply to its ``choices``: a llama.cpp ``grammar``
(llama.cpp's servers), a ``response_format`` JSON schema (``{"type": "json_object",
"schema": ...}``, llama-cpp-python's form), or not at all (the caller parses)."""


class Replier(Protocol):
    """What the agent loop asks of a chat model: a reply held to the actions.

    :class:`ChatClient` is one; so is a source of standard answers (the expert's
    replies the warm-up trains on), with no server behind it.
    """

    constrain: str
    """How replies are held to ``choices`` (one of :data:`CONSTRAINTS`)."""

    def reply(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        choices: Sequence[str] | None = None,
        max_tokens: int | None = None,
    ) -> str:
        """The reply to ``messages``, one of ``choices`` when they are given."""
        ...


def _openai() -> Any:
    with requires_extra("llm", "openai"):
        import openai
    return openai


def _setting(value: str | None, variable: str, what: str) -> str:
    value = value or os.environ.get(variable)
    if not value:
        raise ConfigError(f"no {what}: pass it, or set {variable}")
    return value


class ChatClient:
    """Calls a chat model behind an OpenAI-compatible API, with a cache of parsed replies.

    One call, no retries: a reply not back within ``timeout_s``, an HTTP error
    or a server that cannot be reached raises :class:`~feedbackgym.errors.ChatError`.
    :meth:`complete` caches what ``parse`` made of a reply, keyed on the
    messages; a reply that does not parse is not cached. Safe to call from
    several threads; pickles without its connection.

    Args:
        base_url: The API's base URL, e.g. ``http://127.0.0.1:8000/v1`` (default:
            ``$FEEDBACKGYM_LLM_BASE_URL``).
        model: The model name (default: ``$FEEDBACKGYM_LLM_MODEL``).
        api_key: The API key (default: ``$FEEDBACKGYM_LLM_API_KEY``, or none).
        timeout_s: How long a call waits for its reply.
        max_tokens: The most tokens a reply may have.
        cache_size: How many parsed replies are kept.
        constrain: How a reply asked with ``choices`` is held to them (one of
            :data:`CONSTRAINTS`): ``"grammar"`` (llama.cpp; servers that do not
            know the field may ignore it), ``"json"`` or ``"none"``.

    Attributes:
        calls: Requests sent to the server.
        cache_hits: Calls answered from the cache.

    Raises:
        ConfigError: No base URL or model, or a bad number.

    Example:
        >>> client = ChatClient("http://127.0.0.1:8000/v1", "llama3.2:1b", timeout_s=5)
        >>> client
        ChatClient('http://127.0.0.1:8000/v1', 'llama3.2:1b', timeout_s=5.0)
        >>> client.constraint(["wait", "restart db"])
        {'extra_body': {'grammar': 'root ::= "wait" | "restart db"'}}
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        *,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_tokens: int = 512,
        cache_size: int = 1024,
        constrain: str = "grammar",
    ) -> None:
        if timeout_s <= 0 or max_tokens < 1 or cache_size < 0:
            raise ConfigError(
                "timeout_s and max_tokens must be positive and cache_size at least 0, got "
                f"{timeout_s}, {max_tokens}, {cache_size}"
            )
        if constrain not in CONSTRAINTS:
            raise ConfigError(
                f"constrain must be one of {', '.join(CONSTRAINTS)}, got {constrain!r}"
            )
        self.constrain = constrain
        self.base_url = _setting(base_url, BASE_URL_ENV, "chat server base URL").rstrip("/")
        self.model = _setting(model, MODEL_ENV, "chat model name")
        self.api_key = api_key or os.environ.get(API_KEY_ENV) or "none"
        self.timeout_s = float(timeout_s)
        self.max_tokens = max_tokens
        self.cache_size = cache_size
        self.calls = 0
        self.cache_hits = 0
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._client: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_lock": None, "_client": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def __repr__(self) -> str:
        return f"ChatClient({self.base_url!r}, {self.model!r}, timeout_s={self.timeout_s})"

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        parse: Callable[[str], T],
        *,
        json_mode: bool = False,
        choices: Sequence[str] | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> T:
        """``parse`` of the model's reply to ``messages`` (from the cache when it was asked before).

        Args:
            messages: The chat messages (``role``, ``content``).
            parse: Turns the reply's text into the result; raises
                :class:`~feedbackgym.errors.ReplyError` for a reply it rejects.
            json_mode: Ask the server for a JSON object (``response_format``).
            choices: Ask for exactly one of these strings (see :meth:`reply`).
            schema: Ask for a JSON object of this JSON schema (see :meth:`reply`).

        Raises:
            ChatError: The server failed, timed out or could not be reached.
            ReplyError: The reply has no text, or ``parse`` rejected it.
            DependencyNotInstalled: ``openai`` is not installed.
        """
        key = compact_json([json_mode, choices, schema, list(messages)])
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                self.cache_hits += 1
                return self._cache[key]
        result = parse(self.reply(messages, json_mode=json_mode, choices=choices, schema=schema))
        if self.cache_size:
            with self._lock:
                self._cache[key] = result
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return result

    def models(self) -> list[str]:
        """The model names the server lists (``GET /models``): a cheap check that it answers.

        Raises:
            ChatError: The server failed, timed out or could not be reached.
        """
        return [model.id for model in self._call(lambda client: client.models.list())]

    def reply(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        json_mode: bool = False,
        choices: Sequence[str] | None = None,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> str:
        """The model's reply to ``messages`` (no cache).

        Args:
            messages: The chat messages (``role``, ``content``).
            json_mode: Ask the server for a JSON object (``response_format``).
            choices: Ask for exactly one of these strings, held to them as
                :attr:`constrain` says (see :meth:`constraint`).
            schema: Ask for a JSON object of this JSON schema
                (``response_format`` ``{"type": "json_object", "schema": ...}``,
                llama.cpp's form), whatever :attr:`constrain` says; not with ``choices``.
            max_tokens: The most tokens this reply may have (default: the client's).
            temperature: Sampling temperature (0: the likeliest reply).
            seed: The server's sampling seed (``None``: the server's choice).

        Raises:
            ChatError: The server failed, timed out or could not be reached.
            ReplyError: The reply has no text.
        """
        extra: dict[str, Any] = {"response_format": {"type": "json_object"}} if json_mode else {}
        if schema is not None:
            extra["response_format"] = {"type": "json_object", "schema": dict(schema)}
        if choices is not None:
            extra.update(self.constraint(choices))
        if seed is not None:
            extra["seed"] = int(seed)
        self.calls += 1
        response = self._call(
            lambda client: client.chat.completions.create(
                model=self.model,
                messages=list(messages),
                temperature=float(temperature),
                max_tokens=max_tokens or self.max_tokens,
                **extra,
            )
        )
        choices = getattr(response, "choices", None)
        content = choices[0].message.content if choices else None
        if not isinstance(content, str):
            raise ReplyError(f"{self.base_url}: the reply has no text")
        return content

    def constraint(self, choices: Sequence[str]) -> dict[str, Any]:
        """The request fields that hold a reply to ``choices`` (:attr:`constrain`'s way).

        ``"grammar"``: llama.cpp's ``grammar`` (:func:`choice_grammar`);
        ``"json"``: ``response_format`` ``{"type": "json_object", "schema":
        {"enum": [...]}}`` (the reply is then a JSON string); ``"none"``: nothing.

        Raises:
            ValueError: There are no choices.
        """
        if not choices:
            raise ValueError("a constrained reply needs at least one choice")
        if self.constrain == "grammar":
            return {"extra_body": {"grammar": choice_grammar(choices)}}
        if self.constrain == "json":
            schema = {"type": "string", "enum": list(choices)}
            return {"response_format": {"type": "json_object", "schema": schema}}
        return {}

    def _call(self, request: Callable[[Any], T]) -> T:
        """``request(openai_client)``, with the client's failures as :class:`ChatError`."""
        openai = _openai()
        if self._client is None:
            self._client = openai.OpenAI(
                base_url=self.base_url,
                api_key=self.api_key,
                timeout=self.timeout_s,
                max_retries=0,
            )
        try:
            return request(self._client)
        except openai.APITimeoutError:
            raise ChatError(f"{self.base_url}: no reply within {self.timeout_s:g} s") from None
        except openai.APIStatusError as error:
            raise ChatError(
                f"{self.base_url}: HTTP {error.status_code}: {str(error.message)[:200]}"
            ) from None
        except openai.APIError as error:
            raise ChatError(f"{self.base_url}: {type(error).__name__}: {error}") from None

    def close(self) -> None:
        """Closes the connection (a later call opens a new one)."""
        if self._client is not None:
            self._client.close()
            self._client = None
