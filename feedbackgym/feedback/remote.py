"""The client of ``feedbackgym serve-feedback``, the wire format, and CURVE keys.

A request is one JSON message (one ZeroMQ frame from a DEALER socket, or an
empty delimiter and the message from a REQ socket)::

    {"id": 7, "task": "feedbackgym/OpsIncidentEasy",
     "batch": [{"kind": "hint", <GuideRequest.to_dict() fields>},
               {"kind": "review", <ReviewRequest.to_dict() fields>}]}

and its answer ``{"id": 7, "results": [<Hint or Review dict, or null>, ...]}``.
A message the service cannot answer gets ``{"id": 7 or null, "code": C,
"error": "what was wrong"}`` where ``C`` is one of :data:`ERROR_CODES`.
``{"id": 8, "kind": "stats"}`` asks for the service's counters.

:class:`RemoteFeedbackSource` is a guide and a reviewer (see
:mod:`feedbackgym.feedback.generators`) that asks the service and waits at
most ``deadline_ms``; a late or missing answer counts as a miss and the step
goes on without feedback, so training is never blocked. When the service is
down, a warning is logged and misses keep being counted.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from feedbackgym.config import DEFAULT_DEADLINE_MS
from feedbackgym.core import Hint, Review
from feedbackgym.errors import requires_extra
from feedbackgym.feedback.generators import GuideRequest, ReviewRequest

with requires_extra("remote", "pyzmq"):
    import zmq
    import zmq.auth

__all__ = [
    "CURVE_KEYS_ENV",
    "DEFAULT_ADDRESS",
    "ERROR_CODES",
    "RemoteFeedbackSource",
    "create_curve_keys",
]

logger = logging.getLogger(__name__)

DEFAULT_ADDRESS = "tcp://127.0.0.1:5557"
WARN_EVERY = 100
"""A warning is logged on the first miss and then every this many misses."""
ERROR_CODES = ("framing", "oversized", "json", "schema", "kind", "generator", "internal")
"""Why the service could not answer a message: wrong frames, too large, not JSON,
not a request, an unknown request kind, the generator failed, a bug of the service."""
CURVE_KEYS_ENV = "FEEDBACKGYM_CURVE_KEYS"
"""Directory of a client's CURVE keys (``client.key_secret``, ``server.key``), when
the service uses CURVE and a client is not given ``curve_keys``."""


def create_curve_keys(directory: str | Path) -> Path:
    """Makes CURVE keys for a service and one client in ``directory``.

    Writes ``server.key`` / ``server.key_secret`` (the service's pair: pass the
    directory to ``serve-feedback --curve-keys``), ``client.key`` /
    ``client.key_secret`` (a client's pair: give the client the directory, or a
    copy holding ``client.key_secret`` and ``server.key``) and
    ``clients/client.key``: the service accepts the clients whose public keys
    are in ``clients/``.

    Example:
        >>> import tempfile
        >>> keys = create_curve_keys(tempfile.mkdtemp())
        >>> sorted(p.name for p in keys.iterdir())
        ['client.key', 'client.key_secret', 'clients', 'server.key', 'server.key_secret']
    """
    path = Path(directory)
    (path / "clients").mkdir(parents=True, exist_ok=True)
    zmq.auth.create_certificates(path, "server")
    public, _ = zmq.auth.create_certificates(path, "client")
    shutil.copy(public, path / "clients" / "client.key")
    return path


def curve_pair(path: Path) -> tuple[bytes, bytes]:
    """The ``(public, secret)`` keys in a ``*.key_secret`` file.

    Raises:
        FileNotFoundError: No such file, or it holds no secret key.
    """
    if not path.is_file():
        raise FileNotFoundError(f"no CURVE key file {path}")
    public, secret = zmq.auth.load_certificate(path)
    if secret is None:
        raise FileNotFoundError(f"{path} holds no secret key")
    return public, secret


class RemoteFeedbackSource:
    """Client of the feedback service, with a deadline per call: a guide and a reviewer.

    Args:
        address: The service's ZeroMQ address.
        deadline_ms: Longest wait for an answer before going on without it.
        curve_keys: Directory with this client's ``client.key_secret`` and the
            service's ``server.key`` (see :func:`create_curve_keys`), for a
            service using CURVE; default: ``$FEEDBACKGYM_CURVE_KEYS`` if set.

    Attributes:
        calls: Requests sent.
        misses: Requests not answered within the deadline (or answered with an error).
    """

    inline = True
    """Called in the step: it bounds its own wait by ``deadline_ms``."""

    def __init__(
        self,
        address: str,
        *,
        deadline_ms: float = DEFAULT_DEADLINE_MS,
        curve_keys: str | Path | None = None,
    ) -> None:
        if deadline_ms <= 0:
            raise ValueError(f"deadline_ms must be positive, got {deadline_ms}")
        self.address = address
        self.deadline_ms = deadline_ms
        keys = curve_keys if curve_keys is not None else os.environ.get(CURVE_KEYS_ENV)
        self.curve_keys = None if keys is None else Path(keys)
        self.calls = 0
        self.misses = 0
        self._next_id = 0
        self._socket: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_socket"] = None
        return state

    def _connect(self) -> Any:
        if self._socket is None:
            socket: Any = zmq.Context.instance().socket(zmq.DEALER)
            socket.setsockopt(zmq.LINGER, 0)
            if self.curve_keys is not None:
                public, secret = curve_pair(self.curve_keys / "client.key_secret")
                server, _ = zmq.auth.load_certificate(self.curve_keys / "server.key")
                socket.curve_publickey, socket.curve_secretkey = public, secret
                socket.curve_serverkey = server
            socket.connect(self.address)
            self._socket = socket
        return self._socket

    def ask(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Sends ``message`` (given an ``id``) and waits up to the deadline for its answer.

        Returns:
            The answer, or ``None`` on a miss (late, missing or an error answer).
        """
        socket = self._connect()
        self.calls += 1
        self._next_id += 1
        request_id = self._next_id
        socket.send(json.dumps({**message, "id": request_id}).encode())
        deadline = time.perf_counter() + self.deadline_ms / 1000.0
        while (left := deadline - time.perf_counter()) > 0:
            if not socket.poll(max(1, int(left * 1000))):
                break
            try:
                reply = json.loads(socket.recv())
            except ValueError:
                continue  # not the service's answer: keep waiting for it
            if not isinstance(reply, dict) or reply.get("id") != request_id:
                continue  # a late answer to an earlier request
            if "error" in reply:
                logger.warning(
                    "feedback service at %s: %s (%s)",
                    self.address,
                    reply["error"],
                    reply.get("code"),
                )
                break
            return reply
        self._miss()
        return None

    def _result(self, task: str, item: dict[str, Any]) -> Any:
        reply = self.ask({"task": task, "batch": [item]})
        return reply["results"][0] if reply is not None else None

    def _miss(self) -> None:
        self.misses += 1
        if self.misses % WARN_EVERY == 1:
            logger.warning(
                "feedback service at %s did not answer within %g ms; continuing without "
                "feedback (%d misses of %d calls)",
                self.address,
                self.deadline_ms,
                self.misses,
                self.calls,
            )

    def hint(self, request: GuideRequest) -> Hint | None:
        """Asks for a hint; ``None`` on a miss (or when the service's guide gives none)."""
        data = self._result(request.task, {"kind": "hint", **request.to_dict()})
        return Hint.from_dict(data) if data else None

    def review(self, request: ReviewRequest) -> Review | None:
        """Asks for a review; ``None`` on a miss (or when the service's reviewer gives none)."""
        data = self._result(request.task, {"kind": "review", **request.to_dict()})
        return Review.from_dict(data) if data else None

    def stats(self) -> dict[str, Any] | None:
        """The service's counters (messages received, answered, errors by code), or ``None``."""
        reply = self.ask({"kind": "stats"})
        return reply["stats"] if reply is not None else None

    def close(self) -> None:
        """Closes the socket (idempotent)."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
