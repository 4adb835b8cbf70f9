"""The ``serve-env`` app: OpenEnv's own server over :class:`~.session.FeedbackSession`.

:func:`create_env_app` builds the FastAPI app with ``openenv``'s
``create_app`` (its WebSocket protocol, error codes, session limit and idle
reaper), in OpenEnv's production mode: OpenEnv's HTTP ``/reset`` and ``/step``
make a fresh env per request, which fits no episode, so episodes are played
over ``/ws`` only. Routes: ``/ws``, ``/health``, ``/schema``, ``/metadata``
(OpenEnv's), ``/settings`` (what is served) and ``/sessions`` (the envs open
now). :func:`serve` runs it with uvicorn until SIGTERM or Ctrl-C; every
session's env is closed on the way out.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import sys
from typing import Any

import gymnasium as gym

from feedbackgym.errors import requires_extra
from feedbackgym.experts import held_out_seeds
from feedbackgym.serving.connections import CloseIdleSockets
from feedbackgym.serving.session import FeedbackSession, SessionBook
from feedbackgym.serving.settings import ServeSettings
from feedbackgym.serving.wire import FeedbackAction, FeedbackObservation, FeedbackSessionState

with requires_extra("server", "openenv"):
    import uvicorn
    from fastapi import FastAPI
    from openenv.core.env_server import create_app
    from openenv.core.env_server.types import ConcurrencyConfig, ServerMode

__all__ = ["create_env_app", "serve", "serve_app"]


def create_env_app(settings: ServeSettings) -> FastAPI:
    """The app that serves ``settings``' env, one env and its feedback per WebSocket session.

    Example:
        >>> from fastapi.testclient import TestClient
        >>> app = create_env_app(ServeSettings("feedbackgym/OpsIncidentEasy-v1"))
        >>> TestClient(app).get("/schema").json()["action"]["required"]
        ['action']
    """
    book = SessionBook()
    described = {**settings.describe(), "validation_seeds": _validation_seeds(settings)}
    app = create_app(
        functools.partial(FeedbackSession, settings, book),
        FeedbackAction,
        FeedbackObservation,
        env_name=settings.env_id.rsplit("/", 1)[-1],
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=settings.max_sessions, session_timeout=settings.idle_timeout_s
        ),
        state_cls=FeedbackSessionState,
        mode=ServerMode.PRODUCTION,
    )

    app.add_middleware(CloseIdleSockets)  # a session closed by the reaper closes its socket

    @app.get("/settings", tags=["Environment Info"], summary="What this server serves")
    def served() -> dict[str, Any]:
        """The env id, its ``gym.make`` kwargs, held-out seeds, the arm, level and limits."""
        return described

    @app.get("/sessions", tags=["Health"], summary="Envs open now")
    def sessions() -> dict[str, Any]:
        """The sessions whose env is open, the most allowed, envs made so far, the server's pid."""
        return {
            "open": book.open,
            "max_sessions": settings.max_sessions,
            "started": book.started,
            "pid": os.getpid(),
        }

    return app


def _validation_seeds(settings: ServeSettings) -> list[int] | None:
    """The served env's held-out validation seeds (``None``: it has none)."""
    env = gym.make(settings.env_id, **settings.env_arguments())
    try:
        return list(held_out_seeds(env))
    except ValueError:
        return None
    finally:
        env.close()


def serve(settings: ServeSettings, *, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serves ``settings`` on ``host:port`` (port 0: a free one) until SIGTERM or Ctrl-C.

    Prints ``listening on http://HOST:PORT`` once connections are accepted.
    """
    serve_app(create_env_app(settings), host=host, port=port)


def serve_app(app: FastAPI, *, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Runs any OpenEnv app as :func:`serve` runs ours (the benchmark's echo env too).

    WebSocket compression is off: deflating each observation (a few kB of text)
    cost the server about 0.04 ms of CPU a step (0.34 against 0.29 ms, measured
    with ``benchmarks/env_server.py``'s clients), and each connection's zlib
    state memory; a trainer reaches the server over a LAN or loopback.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    bound = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        ws_per_message_deflate=False,
        backlog=2048,
        timeout_graceful_shutdown=10,
    )
    server = uvicorn.Server(config)
    # uvicorn re-raises a SIGTERM it caught once it has shut down (every session's env closed
    # by then); exiting by that signal would skip the interpreter's exit handlers, which
    # remove the code sandbox's warm containers. Ours turns it into a clean exit.
    signal.signal(signal.SIGTERM, _exit)
    print(f"listening on http://{host}:{bound}", flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        sys.stdout.flush()


def _exit(signum: int, frame: Any) -> None:
    """SIGTERM after uvicorn's graceful shutdown: a normal exit (``atexit`` handlers run)."""
    raise SystemExit(0)
