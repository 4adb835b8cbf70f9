"""A stand-in chat server for fault injection in tests: NOT a language model.

The real model is the packaged one (:mod:`~feedbackgym.language.model_server`,
``feedbackgym serve-model``); this stand-in answers known replies and misbehaves
on request, so the loop's handling of errors, hangs and garbage is tested
against a real server process.

It speaks the OpenAI-compatible API that vLLM, llama.cpp's server and Ollama
speak (``POST /v1/chat/completions``, ``GET /v1/models``) on loopback, and
answers from the request JSON that the built-in prompts carry
(:func:`~feedbackgym.chat.request_block`):

* a guide prompt: the built-in :class:`~feedbackgym.feedback.SubgoalGuide`'s
  hint, as a :class:`~feedbackgym.feedback.llm.GuideAnswer`;
* a review prompt: the built-in :class:`~feedbackgym.feedback.TrajectoryReviewer`'s
  review, as a :class:`~feedbackgym.feedback.llm.ReviewAnswer`;
* an agent prompt (:mod:`feedbackgym.language.agent_loop`): the env's expert action, found
  by replaying the episode (its id, seed and keyword arguments, then the
  conversation's actions: give it the whole chat, ``context=None``, since a
  prompt window that dropped steps makes it replay the wrong ones);
* an OpenEnv turn as verifiers' ``OpenEnvTaskset`` words it (a JSON object with
  ``observation`` and ``action_schema``) from a ``feedbackgym serve-env``
  server: the first of the observation's ``actions`` (a scripted reply, to
  test the plumbing: no expert, the episode is not named).

So the LLM generators and the agent loop run end to end against a real
server process, with known answers. The model name asks for misbehaviour:
``stand-in`` answers well; ``stand-in:bad-json`` answers text that is neither
JSON nor an action; ``stand-in:off-schema`` answers JSON of the wrong shape;
``stand-in:slow`` answers well after :data:`SLOW_S` seconds
(``stand-in:slow=0.2`` for 0.2 s); ``stand-in:error`` answers HTTP 500.

Usage::

    python -m feedbackgym.language.stand_in_server [--host 127.0.0.1] [--port 0]

It prints ``listening on http://HOST:PORT/v1`` as its first line and serves
until SIGTERM or SIGINT. From Python, :func:`stand_in_server` starts one as a
child process and stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import gymnasium as gym

from feedbackgym.chat import request_block
from feedbackgym.errors import FeedbackGymError
from feedbackgym.feedback import GuideRequest, ReviewRequest, SubgoalGuide, TrajectoryReviewer
from feedbackgym.feedback.llm import GuideAnswer, ReviewAnswer
from feedbackgym.rollout import make_policy

__all__ = ["MODEL", "SLOW_S", "answer", "main", "stand_in_server"]

MODEL = "stand-in"
"""The model name that answers well (``stand-in:MODE`` misbehaves, see the module docstring)."""
SLOW_S = 5.0
"""How long ``stand-in:slow`` waits before answering."""
BAD_JSON = "Sure! The answer is {subgoal"
"""What ``stand-in:bad-json`` answers: neither JSON nor an action."""


class BadRequest(FeedbackGymError, ValueError):
    """A request the stand-in cannot answer (HTTP 400)."""


def answer(messages: Sequence[dict[str, Any]]) -> str:
    """The stand-in's reply to a chat, from the request JSON its last prompt carries.

    Raises:
        BadRequest: No message carries a request, or the request is malformed.

    Example:
        >>> from feedbackgym.core import Subgoal
        >>> from feedbackgym.feedback.llm import LLMGuide
        >>> lib = (Subgoal("a", "reach A", bool), Subgoal("b", "reach B", bool, ("a",)))
        >>> guide = LLMGuide("http://127.0.0.1:1/v1", MODEL)
        >>> answer(guide.messages(GuideRequest(lib, {"a": True, "b": False}, step=5)))
        '{"subgoal_ids":["b"]}'
    """
    served = _served_turn(messages)
    if served is not None:
        return served
    for message in reversed(messages):
        block = request_block(str(message.get("content", "")))
        if block is not None:
            break
    else:
        raise BadRequest("no message carries a request block (```json with a 'kind')")
    kind = block.pop("kind")
    try:
        if kind == "hint":
            hint = SubgoalGuide().hint(GuideRequest.from_dict({**block, "step": 0}))
            return GuideAnswer.from_hint(hint).model_dump_json()
        if kind == "review":
            review = TrajectoryReviewer().review(ReviewRequest.from_dict(block))
            return ReviewAnswer.from_review(review).model_dump_json()
        if kind == "episode":
            return _expert_action(block, messages)
    except (KeyError, TypeError, ValueError, gym.error.Error) as error:
        raise BadRequest(f"a malformed {kind} request: {type(error).__name__}: {error}") from None
    raise BadRequest(f"unknown request kind {kind!r} (hint, review, episode)")


def _served_turn(messages: Sequence[dict[str, Any]]) -> str | None:
    """The first listed action when the last message is a served env's turn, else ``None``.

    Example:
        >>> turn = {"observation": {"actions": ["wait", "escalate"]}, "action_schema": {}}
        >>> _served_turn([{"role": "user", "content": json.dumps(turn)}])
        'wait'
    """
    try:
        turn = json.loads(str(messages[-1].get("content", "")))
        return str(turn["observation"]["actions"][0]) if "action_schema" in turn else None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def _expert_action(episode: dict[str, Any], messages: Sequence[dict[str, Any]]) -> str:
    """The expert's action after the conversation's actions, replayed from the episode's reset."""
    env = gym.make(episode["env_id"], **episode.get("kwargs", {}))
    try:
        env.reset(seed=episode["seed"])
        unwrapped: Any = env.unwrapped
        for message in messages:
            if message.get("role") == "assistant":
                env.step(unwrapped.parse_action(str(message["content"])))
        return str(unwrapped.action_meanings[make_policy(env, "expert", 0)()])
    finally:
        env.close()


class _Handler(BaseHTTPRequestHandler):
    server_version = "feedbackgym-stand-in/1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        """Quiet: tests start many requests."""

    def do_GET(self) -> None:  # noqa: N802 (the base's name)
        if self.path.rstrip("/") == "/v1/models":
            models = [{"id": MODEL, "object": "model", "owned_by": "feedbackgym"}]
            self._send(HTTPStatus.OK, {"object": "list", "data": models})
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}")

    def do_POST(self) -> None:  # noqa: N802 (the base's name)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(HTTPStatus.NOT_FOUND, f"no route {self.path}")
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            model, messages = str(body["model"]), list(body["messages"])
        except (ValueError, KeyError, TypeError) as error:
            self._error(HTTPStatus.BAD_REQUEST, f"not a chat completion request: {error}")
            return
        name, _, mode = model.partition(":")
        if name != MODEL:
            self._error(HTTPStatus.NOT_FOUND, f"no model {model!r} (try {MODEL!r})")
            return
        mode, _, value = mode.partition("=")
        if mode == "error":
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, "the stand-in was asked to fail")
            return
        if mode == "slow":
            time.sleep(float(value or SLOW_S))
        try:
            content = {"bad-json": BAD_JSON, "off-schema": '{"answer": 42}'}.get(mode) or answer(
                messages
            )
        except BadRequest as error:
            self._error(HTTPStatus.BAD_REQUEST, str(error))
            return
        self._send(
            HTTPStatus.OK,
            {
                "id": "chatcmpl-stand-in",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            },
        )

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._send(status, {"error": {"message": message, "type": status.phrase, "code": status}})

    def _send(self, status: HTTPStatus, data: dict[str, Any]) -> None:
        body = json.dumps(data).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout): nothing to answer


def main(argv: Sequence[str] | None = None) -> int:
    """Serves until SIGTERM or SIGINT; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m feedbackgym.language.stand_in_server",
        description="A stand-in OpenAI-compatible chat server (not a language model).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer((args.host, args.port), _Handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    host, port = server.server_address[:2]
    print(f"listening on http://{host!s}:{port}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


@contextlib.contextmanager
def stand_in_server() -> Iterator[str]:
    """Runs the stand-in as a child process on a free loopback port; yields its base URL.

    The process is stopped (SIGTERM, then SIGKILL after 10 s) when the block ends.

    Raises:
        FeedbackGymError: It did not start.

    Example:
        >>> from feedbackgym.chat import ChatClient
        >>> with stand_in_server() as url:  # doctest: +ELLIPSIS
        ...     ChatClient(url, "stand-in").reply([{"role": "user", "content": "hello"}])
        Traceback (most recent call last):
        ...
        feedbackgym.errors.ChatError: http://127.0.0.1:.../v1: HTTP 400: ...
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "feedbackgym.language.stand_in_server", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the child exits (empty line) if it cannot start
        if not line.startswith("listening on "):
            raise FeedbackGymError(f"the stand-in chat server did not start: {line!r}")
        yield line.removeprefix("listening on ").strip()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


if __name__ == "__main__":
    sys.exit(main())
