"""``feedbackgym serve-feedback``: generators behind one ZeroMQ address, for many envs at once.

One ROUTER socket (loopback by default) takes requests from every env (the
wire format is in :mod:`feedbackgym.feedback.remote`). The main thread checks
each message and hands it to a *shard*: requests are sharded by task family
(the message's ``task``) over ``workers`` threads, and each shard keeps one
generator instance per family, so a generator never sees two threads and a
family's requests stay in order. A shard runs an event loop: a coroutine
generator (``async def hint``) has many requests in flight at once; a plain
one answers its shard's requests one at a time while the other shards go on.
Workers are threads: generators waiting on I/O (an LLM server) overlap;
CPU-bound generators share one core.

The service survives its clients: a message that is wrongly framed, larger
than ``max_bytes``, not JSON, not a request, of an unknown kind, or that makes
the generator fail gets an error reply naming what was wrong (see
:data:`~feedbackgym.feedback.remote.ERROR_CODES`), is counted and logged (the
first of each kind and then every 1000th), and the service keeps serving.
A frame larger than :data:`HARD_LIMIT_FACTOR` times ``max_bytes`` is dropped by
ZeroMQ before it is read (its sender is disconnected: no reply can be sent).

Bound to a non-loopback address, the service should use CURVE
(``curve_keys``): it then accepts only the clients whose public keys are in
``curve_keys/clients`` (see :func:`~feedbackgym.feedback.remote.create_curve_keys`);
without it, a warning is logged.

Example:
    >>> import threading
    >>> from feedbackgym.core import Subgoal
    >>> from feedbackgym.feedback import GuideRequest
    >>> from feedbackgym.feedback.remote import RemoteFeedbackSource
    >>> service = FeedbackService("tcp://127.0.0.1:5561", workers=2)
    >>> thread = threading.Thread(target=service.serve); thread.start()
    >>> client = RemoteFeedbackSource("tcp://127.0.0.1:5561", deadline_ms=2000)
    >>> lib = (Subgoal("a", "reach A", bool),)
    >>> client.hint(GuideRequest(lib, {"a": False}, step=0, task="demo")).text
    'Hint: first reach A'
    >>> client.close(); service.stop(); thread.join()
"""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import json
import logging
import threading
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from feedbackgym.core import Hint, Review
from feedbackgym.errors import GeneratorError
from feedbackgym.feedback.generators import (
    GuideRequest,
    ReviewRequest,
    load_generator,
)
from feedbackgym.feedback.guide import SubgoalGuide
from feedbackgym.feedback.remote import DEFAULT_ADDRESS, curve_pair, zmq
from feedbackgym.feedback.review import TrajectoryReviewer

__all__ = ["DEFAULT_MAX_BYTES", "HARD_LIMIT_FACTOR", "FeedbackService", "is_loopback"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 1 << 20
"""The largest message answered (1 MiB: a 1,000-step review window is ~150 kB)."""
HARD_LIMIT_FACTOR = 4
"""Frames past ``max_bytes`` times this are dropped by ZeroMQ unread (memory stays bounded)."""
LOG_EVERY = 1000
"""A bad message is logged the first time of its kind and then every this many."""
DRAIN_LIMIT = 256
"""Most messages read from one socket before looking at the other (a flood of requests
does not hold up the answers)."""
POLL_MS = 100
"""How often the main loop looks at :meth:`FeedbackService.stop`."""

_KINDS: dict[str, tuple[str, type, Any]] = {
    "hint": ("hint", Hint, GuideRequest.from_dict),
    "review": ("review", Review, ReviewRequest.from_dict),
}
"""Request kind → (generator method, result type, request parser)."""
_BUILT_IN: dict[str, type] = {"hint": SubgoalGuide, "review": TrajectoryReviewer}


class _Rejected(Exception):
    """A message the service does not answer with feedback: its code and reason."""

    def __init__(self, code: str, reason: str, request_id: Any = None) -> None:
        super().__init__(reason)
        self.code = code
        self.request_id = request_id


def is_loopback(address: str) -> bool:
    """Whether a ZeroMQ ``address`` can only be reached from this machine.

    Example:
        >>> is_loopback("tcp://127.0.0.1:5557"), is_loopback("tcp://0.0.0.0:5557")
        (True, False)
    """
    parts = urlsplit(address)
    if parts.scheme in ("ipc", "inproc"):
        return True
    host = (parts.hostname or "").strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # an interface name or host name: assume it is reachable


def _generator_classes(generators: Sequence[str | type]) -> dict[str, type]:
    """Request kind → the class answering it: the given ones, else the built-ins.

    Raises:
        GeneratorError: A generator does not load, is not a class, answers no
            kind, or two answer the same kind.
    """
    chosen: dict[str, type] = {}
    for spec in generators:
        cls = load_generator(spec) if isinstance(spec, str) else spec
        if not isinstance(cls, type):
            raise GeneratorError(f"generator {spec!r} is a {type(cls).__name__}, not a class")
        kinds = [kind for kind, (name, *_) in _KINDS.items() if callable(getattr(cls, name, None))]
        if not kinds:
            raise GeneratorError(f"{cls.__name__} has neither a hint nor a review method")
        for kind in kinds:
            if kind in chosen:
                raise GeneratorError(
                    f"both {chosen[kind].__name__} and {cls.__name__} answer {kind!r} requests"
                )
            chosen[kind] = cls
    return {**_BUILT_IN, **chosen}


class _Shard:
    """A worker thread with an event loop, holding one generator per task family it serves."""

    def __init__(self, index: int, context: Any, replies: str, classes: dict[str, type]) -> None:
        self._context = context
        self._replies = replies
        self._classes = classes
        self._instances: dict[tuple[str, type], Any] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.delay_s = 0.0
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(
            target=self._run, name=f"feedbackgym-shard-{index}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._push = self._context.socket(zmq.PUSH)
        self._push.setsockopt(zmq.LINGER, 0)
        self._push.connect(self._replies)
        self._ready.set()
        try:
            self.loop.run_forever()
        finally:
            self._push.close()
            self.loop.close()

    def submit(self, envelope: list[bytes], message: dict[str, Any]) -> None:
        """Answers ``message`` on this shard's thread (called from the main thread)."""
        self.loop.call_soon_threadsafe(self._start, envelope, message)

    def _start(self, envelope: list[bytes], message: dict[str, Any]) -> None:
        task = self.loop.create_task(self._answer(envelope, message))
        self._tasks.add(task)  # a strong reference until it is done
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, envelope: list[bytes], message: dict[str, Any]) -> None:
        request_id = message.get("id")
        family = message.get("task", "")
        code, reply = "ok", {"id": request_id}
        try:
            requests = [(item["kind"], _KINDS[item["kind"]][2](item)) for item in message["batch"]]
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            code, reply["error"] = "schema", f"not a request: {type(error).__name__}: {error}"
        else:
            try:
                results = [await self._generate(family, kind, r) for kind, r in requests]
            except Exception as error:
                code, reply["error"] = "generator", f"{type(error).__name__}: {error}"
            else:
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                reply["results"] = [None if r is None else r.to_dict() for r in results]
        if code != "ok":
            reply["code"] = code
        self._push.send_multipart([code.encode(), *envelope, json.dumps(reply).encode()])

    async def _generate(self, family: str, kind: str, request: Any) -> Any:
        cls = self._classes[kind]
        generator = self._instances.get((family, cls))
        if generator is None:  # one instance per task family (and class)
            generator = self._instances[family, cls] = cls()
        method, expected, _ = _KINDS[kind]
        result = getattr(generator, method)(request)
        if inspect.isawaitable(result):
            result = await result
        if result is not None and not isinstance(result, expected):
            raise GeneratorError(
                f"{cls.__name__}.{method} returned a {type(result).__name__}, "
                f"not a {expected.__name__} or None"
            )
        return result

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


class FeedbackService:
    """Answers feedback requests from many envs at once, until :meth:`stop`.

    Args:
        address: ZeroMQ address to bind (loopback by default).
        generators: Generator classes, or their ``"module:Class"`` names: each
            answers the request kinds it has a method for (``hint``,
            ``review``); the built-in guide and reviewer answer the others.
        workers: Shard threads; task families are spread over them.
        max_bytes: The largest message answered; a larger one gets an
            ``"oversized"`` error reply.
        delay_ms: Extra delay before each answer (to test deadlines; it does
            not hold up other requests).
        curve_keys: Directory with the service's ``server.key_secret`` and the
            accepted clients' public keys in ``clients/`` (see
            :func:`~feedbackgym.feedback.remote.create_curve_keys`), or ``None``.

    Attributes:
        counts: Messages ``received`` and ``answered``, and errors by code.

    Raises:
        GeneratorError: A generator does not load or answers no request kind.
        ValueError: A bad ``workers``, ``max_bytes`` or ``delay_ms``.
        FileNotFoundError: ``curve_keys`` lacks a key file.
    """

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        generators: Sequence[str | type] = (),
        workers: int = 1,
        max_bytes: int = DEFAULT_MAX_BYTES,
        delay_ms: float = 0.0,
        curve_keys: str | Path | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if max_bytes < 1024:
            raise ValueError(f"max_bytes must be at least 1024, got {max_bytes}")
        if delay_ms < 0:
            raise ValueError(f"delay_ms must not be negative, got {delay_ms}")
        self.address = address
        self.classes = _generator_classes(generators)
        self.workers = workers
        self.max_bytes = max_bytes
        self.delay_ms = delay_ms
        self.curve_keys = None if curve_keys is None else Path(curve_keys)
        if self.curve_keys is not None:
            curve_pair(self.curve_keys / "server.key_secret")  # fail now, not at bind
        self.counts: Counter[str] = Counter()
        self._stop = threading.Event()

    def stop(self) -> None:
        """Asks :meth:`serve` to return (from any thread; it does within 0.1 s)."""
        self._stop.set()

    def serve(self) -> None:
        """Binds the address and answers requests until :meth:`stop` is called."""
        context: Any = zmq.Context()
        authenticator = None
        frontend = context.socket(zmq.ROUTER)
        frontend.setsockopt(zmq.LINGER, 0)
        frontend.setsockopt(zmq.MAXMSGSIZE, self.max_bytes * HARD_LIMIT_FACTOR)
        if self.curve_keys is not None:
            from zmq.auth.thread import ThreadAuthenticator

            authenticator = ThreadAuthenticator(context)
            authenticator.start()
            authenticator.configure_curve(domain="*", location=str(self.curve_keys / "clients"))
            public, secret = curve_pair(self.curve_keys / "server.key_secret")
            frontend.curve_publickey, frontend.curve_secretkey = public, secret
            frontend.curve_server = True
        elif not is_loopback(self.address):
            logger.warning(
                "serving feedback on %s, reachable from other machines, without "
                "authentication: pass curve_keys (--curve-keys) to accept only known clients",
                self.address,
            )
        replies_address = f"inproc://feedbackgym-replies-{id(self)}"
        replies = context.socket(zmq.PULL)
        replies.bind(replies_address)
        shards = [_Shard(i, context, replies_address, self.classes) for i in range(self.workers)]
        try:
            frontend.bind(self.address)
            for shard in shards:
                shard.delay_s = self.delay_ms / 1000.0
                shard.start()
            logger.info(
                "serving feedback on %s: %s, %d worker(s)",
                self.address,
                ", ".join(f"{kind} by {cls.__name__}" for kind, cls in self.classes.items()),
                self.workers,
            )
            self._loop(frontend, replies, shards)
        finally:
            for shard in shards:
                if shard.thread.is_alive():
                    shard.stop()
            frontend.close()
            replies.close()
            if authenticator is not None:
                authenticator.stop()
            context.term()

    def _loop(self, frontend: Any, replies: Any, shards: list[_Shard]) -> None:
        poller = zmq.Poller()
        poller.register(frontend, zmq.POLLIN)
        poller.register(replies, zmq.POLLIN)
        while not self._stop.is_set():
            events = dict(poller.poll(POLL_MS))
            if replies in events:
                for frames in _drain(replies):
                    code = frames[0].decode()
                    if code == "ok":
                        self.counts["answered"] += 1
                    else:
                        self._count(code, frames[-1].decode())
                    _send(frontend, frames[1:])
            if frontend in events:
                for frames in _drain(frontend):
                    try:
                        self._receive(frontend, frames, shards)
                    except Exception:  # a bug of ours: log it and keep serving
                        self.counts["internal"] += 1
                        logger.exception("feedback service: could not handle a message")

    def _receive(self, frontend: Any, frames: list[bytes], shards: list[_Shard]) -> None:
        self.counts["received"] += 1
        identity, rest = frames[0], frames[1:]
        req_style = len(rest) >= 1 and rest[0] == b""
        envelope = [identity, b""] if req_style else [identity]
        try:
            payloads = rest[1:] if req_style else rest
            if len(payloads) != 1:
                raise _Rejected(
                    "framing",
                    f"expected one message frame (after an empty delimiter for REQ sockets), "
                    f"got {len(rest)} frames",
                )
            message = self._parse(payloads[0])
        except _Rejected as rejected:
            self._count(rejected.code, str(rejected))
            reply = {"id": rejected.request_id, "code": rejected.code, "error": str(rejected)}
            _send(frontend, [*envelope, json.dumps(reply).encode()])
            return
        if message.get("kind") == "stats":
            stats = {"id": message.get("id"), "stats": {"workers": self.workers, **self.counts}}
            _send(frontend, [*envelope, json.dumps(stats).encode()])
            self.counts["answered"] += 1
            return
        family = message.get("task", "")
        shards[zlib.crc32(family.encode()) % len(shards)].submit(envelope, message)

    def _parse(self, payload: bytes) -> dict[str, Any]:
        """The checked message in ``payload``; raises :class:`_Rejected` naming what is wrong."""
        if len(payload) > self.max_bytes:
            raise _Rejected(
                "oversized", f"a message of {len(payload)} bytes; the limit is {self.max_bytes}"
            )
        try:
            message = json.loads(payload)
        except (ValueError, RecursionError) as error:
            raise _Rejected("json", f"not JSON: {type(error).__name__}: {error}") from None
        if not isinstance(message, dict):
            raise _Rejected("schema", f"a message is a JSON object, got {type(message).__name__}")
        request_id = message.get("id")
        if message.get("kind") == "stats":
            return message
        batch = message.get("batch")
        if not isinstance(batch, list) or not batch:
            raise _Rejected("schema", "'batch' must be a non-empty list of requests", request_id)
        if not isinstance(message.get("task", ""), str):
            raise _Rejected("schema", "'task' must be a string", request_id)
        for item in batch:
            kind = item.get("kind") if isinstance(item, dict) else None
            if kind not in self.classes:
                raise _Rejected(
                    "kind",
                    f"unknown request kind {kind!r}; this service answers "
                    f"{', '.join(map(repr, self.classes))} (and 'stats' messages)",
                    request_id,
                )
        return message

    def _count(self, code: str, reason: str) -> None:
        self.counts[code] += 1
        if self.counts[code] % LOG_EVERY == 1:
            logger.warning(
                "feedback service: %s message (%d so far): %s",
                code,
                self.counts[code],
                reason[:300],
            )


def _drain(socket: Any, limit: int = DRAIN_LIMIT) -> list[list[bytes]]:
    """Up to ``limit`` messages waiting on ``socket`` (without blocking)."""
    messages: list[list[bytes]] = []
    while len(messages) < limit:
        try:
            messages.append(socket.recv_multipart(zmq.NOBLOCK))
        except zmq.Again:
            break
    return messages


def _send(frontend: Any, frames: list[bytes]) -> None:
    """Sends a reply; a client that is gone or not reading loses it (never blocks)."""
    try:
        frontend.send_multipart(frames, zmq.NOBLOCK)
    except zmq.Again:
        pass
