"""What the serve-env tests share: a route's JSON, a session's WebSocket URL and messages."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any


def get(url: str, path: str) -> Any:
    """The JSON a server's route answers."""
    with urllib.request.urlopen(f"{url}{path}", timeout=30) as response:
        return json.loads(response.read())


def ws_url(url: str) -> str:
    """The WebSocket URL of the server at ``url``."""
    return url.replace("http://", "ws://") + "/ws"


def send(ws: Any, message: dict[str, Any]) -> Any:
    """Sends one message on a session and returns its reply."""
    ws.send(json.dumps(message))
    return json.loads(ws.recv(timeout=60))


def wait_for(condition: Callable[[], bool], timeout_s: float) -> bool:
    """Whether ``condition`` holds within ``timeout_s`` (checked every 0.25 s and at the end)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.25)
    return condition()
