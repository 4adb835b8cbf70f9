"""A run's versions on the model server, beside the base model, switched without a restart.

The server's process (:mod:`~feedbackgym.language.llama_process`, given
``--versions DIR``) serves, for the model ``NAME``:

* ``NAME``: the base model, as without versions;
* ``NAME@vN``: version ``N`` of the registry (any version it lists, for
  evaluation too; only promotion is gated on validation);
* ``NAME@current``: the current version, or the canary for its share of
  requests (:func:`~feedbackgym.language.versions.route`, keyed by the
  request's ``user`` field, so the same user always gets the same version; a
  request without one gets a fresh random key). The reply's ``model`` names the
  version that answered (``NAME@v2``), or ``NAME`` when none is promoted.

``registry.json`` is looked at on every request (one ``stat``): a promotion,
canary or rollback written by ``feedbackgym versions`` or the trainer takes
effect with the next request, in the same process. Each version is its own
llama.cpp model with the version's LoRA applied (its PEFT folder converted by
:func:`~feedbackgym.language.model_server.served_adapter` on first use), loaded
on its first request and kept among the :data:`LOADED_VERSIONS` most recently
used; the base model stays loaded. ``GET /v1/models`` lists ``NAME``,
``NAME@current`` and every version.

The names are :func:`~feedbackgym.language.versions.version_name`'s.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

from feedbackgym.errors import FeedbackGymError
from feedbackgym.language.model_server import served_adapter
from feedbackgym.language.versions import (
    CURRENT,
    RegistryState,
    Serving,
    VersionRegistry,
    route,
    version_name,
    version_number,
)

__all__ = [
    "LOADED_VERSIONS",
    "RouteCurrent",
    "ServedVersions",
    "VersionProxy",
]

LOADED_VERSIONS = 3
"""Versions kept loaded at once (the most recently used), besides the base model."""

_Scope = MutableMapping[str, Any]
_Message = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[_Message]]
_Send = Callable[[_Message], Awaitable[None]]
_App = Callable[[_Scope, _Receive, _Send], Awaitable[None]]


class ServedVersions:
    """A registry as the server sees it: re-read whenever ``registry.json`` changes.

    Args:
        root: The registry's folder.
        model: The base model's served name.
    """

    def __init__(self, root: str | os.PathLike[str], model: str) -> None:
        self.registry = VersionRegistry(root)
        self.model = model
        self._signature: tuple[int, int, int] | None = None
        self._state = RegistryState()
        self._serving = Serving(None, None)

    def _refresh(self) -> None:
        try:
            stat = self.registry.file.stat()
        except FileNotFoundError:
            signature = None
        else:  # a rename gives a new inode: a rewrite within the mtime's resolution shows too
            signature = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if signature != self._signature:
            self._state, self._serving = self.registry.state, self.registry.serving()
            self._signature = signature

    @property
    def state(self) -> RegistryState:
        """``registry.json`` as it is now."""
        self._refresh()
        return self._state

    @property
    def serving(self) -> Serving:
        """What the registry serves now."""
        self._refresh()
        return self._serving

    def names(self) -> list[str]:
        """The served names: the base model, ``@current``, then every version, oldest first."""
        return [
            self.model,
            version_name(self.model, CURRENT),
            *(version_name(self.model, v.number) for v in self.state.versions),
        ]

    def resolve(self, name: str, key: str | None) -> str:
        """The name that answers a request for ``name`` keyed ``key`` (``@current`` routed)."""
        if name != version_name(self.model, CURRENT):
            return name
        number = route(self.serving, key if key is not None else uuid.uuid4().hex)
        return self.model if number is None else version_name(self.model, number)

    def adapter(self, number: int) -> Path:
        """Version ``number``'s LoRA in llama.cpp's GGUF form (converted on first use).

        Raises:
            VersionRejected: There is no such version.
            ConfigError: Its folder holds no adapter llama.cpp can load.
        """
        self._refresh()
        return served_adapter(self.registry.path(number))


class VersionProxy:
    """llama-cpp-python's model proxy with versions: the base model, and the versions' models.

    It stands in for the server's ``LlamaProxy`` (which keeps one model loaded and
    loads another in its place when a request names it): a request for
    ``NAME@vN`` gets version ``N``'s model, loaded on first use with the base
    model's settings and the version's LoRA, the :data:`LOADED_VERSIONS` most
    recently used kept; any other name goes to the base proxy.

    Args:
        base: The server's ``LlamaProxy``, the base model loaded.
        settings: The base model's ``ModelSettings``.
        versions: The registry it serves.
        loaded: How many versions to keep loaded.
    """

    def __init__(
        self, base: Any, settings: Any, versions: ServedVersions, loaded: int = LOADED_VERSIONS
    ) -> None:
        self.base = base
        self.settings = settings
        self.versions = versions
        self.loaded = loaded
        self._models: OrderedDict[int, Any] = OrderedDict()

    def __call__(self, model: str | None = None) -> Any:
        """The ``Llama`` that answers a request for ``model``.

        Raises:
            fastapi.HTTPException: 404, naming why: an unknown version, or one
                whose adapter does not load.
        """
        from fastapi import HTTPException

        try:  # @current without the middleware (tokenize, embeddings): a random key
            name = self.versions.resolve(model, None) if model else None
            number = version_number(name, self.versions.model) if name else None
            if number is None:
                return self.base(name)
            if number not in self._models:
                self._models[number] = self._load(number)
                while len(self._models) > self.loaded:
                    self._models.popitem(last=False)[1].close()
        except FeedbackGymError as error:  # an unknown version, an adapter that does not load
            raise HTTPException(status_code=404, detail=str(error)) from None
        self._models.move_to_end(number)
        return self._models[number]

    def _load(self, number: int) -> Any:
        from llama_cpp.server.model import LlamaProxy

        settings = self.settings.model_copy(
            update={
                "lora_path": str(self.versions.adapter(number)),
                "model_alias": version_name(self.versions.model, number),
            }
        )
        return LlamaProxy.load_llama_from_model_settings(settings)

    def __iter__(self) -> Iterator[str]:
        return iter(self.versions.names())

    def free(self) -> None:
        """Closes every loaded model."""
        while self._models:
            self._models.popitem()[1].close()
        self.base.free()


class RouteCurrent:
    """ASGI middleware: a request body's ``"model": "NAME@current"`` becomes the version routed.

    The key is the body's ``user`` (see :meth:`ServedVersions.resolve`); the
    rewritten name reaches the model proxy and comes back in the reply's ``model``.

    Args:
        app: The server's ASGI app.
        versions: The registry it serves.
    """

    def __init__(self, app: _App, versions: ServedVersions) -> None:
        self.app = app
        self.versions = versions

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """Reads a POST's body, routes its model, and hands the request on."""
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = self._routed(b"".join(chunks))
        scope = {
            **scope,
            "headers": [
                (name, str(len(body)).encode() if name.lower() == b"content-length" else value)
                for name, value in scope["headers"]
            ],
        }
        replayed = False

        async def replay() -> _Message:
            nonlocal replayed
            if replayed:
                return await receive()  # the client's disconnect, when it comes
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _routed(self, body: bytes) -> bytes:
        try:
            data = json.loads(body)
        except ValueError:
            return body  # the server answers it as it would
        if not isinstance(data, dict) or not isinstance(data.get("model"), str):
            return body
        user = data.get("user")
        name = self.versions.resolve(data["model"], user if isinstance(user, str) else None)
        if name == data["model"]:
            return body
        return json.dumps({**data, "model": name}).encode()
