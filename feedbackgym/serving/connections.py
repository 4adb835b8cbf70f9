"""Which WebSocket a session plays on, so that closing a session closes its socket too.

OpenEnv's idle reaper closes a silent session's env but leaves its WebSocket
open (the client would learn at its next message). :class:`CloseIdleSockets`
(ASGI middleware around the app) gives each WebSocket connection a
:class:`Connection`; a session takes its connection at its first reset (it runs
in the connection's task) and, when its env is closed, asks the connection to
send a close frame: code :data:`SESSION_CLOSED` with the reason. After a close
by the client, the frame goes nowhere and nothing happens.

Example:
    >>> current_connection() is None  # outside a WebSocket connection
    True
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from contextvars import ContextVar
from typing import Any

__all__ = ["SESSION_CLOSED", "CloseIdleSockets", "Connection", "current_connection"]

SESSION_CLOSED = 4000
"""The close code of a socket whose session the server closed (idle past the timeout)."""

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_CONNECTION: ContextVar[Connection | None] = ContextVar("feedbackgym_connection", default=None)


def current_connection() -> Connection | None:
    """The WebSocket connection whose task is running, if any."""
    return _CONNECTION.get()


class Connection:
    """One WebSocket connection: what it takes to close it from any thread."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._loop = asyncio.get_running_loop()

    def close_soon(self, reason: str) -> None:
        """Sends a close frame (:data:`SESSION_CLOSED`, ``reason``) from the connection's loop."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: the server has stopped
            self._loop.call_soon_threadsafe(self._loop.create_task, self._close(reason))

    async def _close(self, reason: str) -> None:
        frame = {"type": "websocket.close", "code": SESSION_CLOSED, "reason": reason}
        with contextlib.suppress(Exception):  # the connection has ended already
            await self._send(frame)


class CloseIdleSockets:
    """ASGI middleware: each WebSocket connection runs with its :class:`Connection` set."""

    def __init__(self, app: Callable[[Message, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        """Runs the app; a WebSocket connection with its :class:`Connection` set."""
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        token = _CONNECTION.set(Connection(send))
        try:
            await self.app(scope, receive, send)
        finally:
            _CONNECTION.reset(token)
