"""Feedback as a separate service: ``feedbackgym serve-feedback`` and its client.

The service runs the generators in another process and answers over ZeroMQ
(ROUTER socket, loopback by default). A message is a JSON batch::

    {"id": 7, "batch": [{"kind": "hint", "library": [...], "progress": {...},
                         "step": 12, "lookahead": 2},
                        {"kind": "review", "library": [...], "records": [...],
                         "success": false, "initial_done": [], "options": {...}}]}

and the answer is ``{"id": 7, "results": [<Hint or Review dict>, ...]}``.
The client waits at most ``deadline_ms`` (default 50 ms); a late or missing
answer counts as a miss and the step goes on without feedback, so training is
never blocked. When the service is down, a warning is logged and misses keep
being counted.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import Any

from feedbackgym.core import Hint, Review, StepRecord, Subgoal
from feedbackgym.errors import DependencyNotInstalled
from feedbackgym.feedback.guide import SubgoalGuide
from feedbackgym.feedback.review import TrajectoryReviewer

try:
    import zmq
except ImportError as error:
    raise DependencyNotInstalled.for_extra("pyzmq", "remote") from error

__all__ = ["DEFAULT_ADDRESS", "RemoteFeedbackSource", "answer", "serve"]

logger = logging.getLogger(__name__)

DEFAULT_ADDRESS = "tcp://127.0.0.1:5557"
WARN_EVERY = 100
"""A warning is logged on the first miss and then every this many misses."""


def _never(state: Any) -> bool:
    return False


def _library(data: Sequence[dict[str, Any]]) -> list[Subgoal]:
    return [
        Subgoal(
            d["id"], d["description"], _never, tuple(d["requires"]), tuple(d["targets"]), d["kind"]
        )
        for d in data
    ]


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """Computes one request of a batch (the service's work, usable in-process too)."""
    library = _library(request["library"])
    if request["kind"] == "hint":
        guide = SubgoalGuide(int(request.get("lookahead", 2)))
        return guide.hint(library, request["progress"], int(request["step"])).to_dict()
    if request["kind"] == "review":
        reviewer = TrajectoryReviewer(**request.get("options", {}))
        records = [StepRecord.from_dict(r) for r in request["records"]]
        review = reviewer.review(
            records, library, success=bool(request["success"]), initial_done=request["initial_done"]
        )
        return review.to_dict()
    raise ValueError(f"unknown request kind {request['kind']!r}")


def serve(
    address: str = DEFAULT_ADDRESS, *, delay_ms: float = 0.0, max_messages: int | None = None
) -> None:
    """Answers feedback requests on ``address`` until interrupted.

    Args:
        address: ZeroMQ address to bind (loopback by default).
        delay_ms: Extra delay before each answer (to test deadlines).
        max_messages: Stop after this many messages (``None``: run forever).
    """
    context: Any = zmq.Context.instance()
    socket = context.socket(zmq.ROUTER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.bind(address)
    logger.info("serving feedback on %s", address)
    served = 0
    try:
        while max_messages is None or served < max_messages:
            identity, payload = socket.recv_multipart()
            message = json.loads(payload)
            try:
                results: Any = [answer(r) for r in message["batch"]]
                reply = {"id": message["id"], "results": results}
            except (KeyError, ValueError, TypeError) as error:
                reply = {"id": message.get("id"), "error": f"{type(error).__name__}: {error}"}
            if delay_ms:
                time.sleep(delay_ms / 1000.0)
            socket.send_multipart([identity, json.dumps(reply).encode()])
            served += 1
    finally:
        socket.close()


class RemoteFeedbackSource:
    """Client of the feedback service, with a deadline per call.

    Args:
        address: The service's ZeroMQ address.
        deadline_ms: Longest wait for an answer before going on without it.

    Attributes:
        calls: Requests sent.
        misses: Requests not answered within the deadline (or answered with an error).
    """

    def __init__(self, address: str, *, deadline_ms: float = 50.0) -> None:
        if deadline_ms <= 0:
            raise ValueError(f"deadline_ms must be positive, got {deadline_ms}")
        self.address = address
        self.deadline_ms = deadline_ms
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
            self._socket = zmq.Context.instance().socket(zmq.DEALER)
            self._socket.setsockopt(zmq.LINGER, 0)
            self._socket.connect(self.address)
        return self._socket

    def request(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """Sends a batch and waits up to the deadline; returns the results or ``None``."""
        socket = self._connect()
        self.calls += 1
        self._next_id += 1
        request_id = self._next_id
        socket.send(json.dumps({"id": request_id, "batch": batch}).encode())
        deadline = time.perf_counter() + self.deadline_ms / 1000.0
        while (left := deadline - time.perf_counter()) > 0:
            if not socket.poll(max(1, int(left * 1000))):
                break
            reply = json.loads(socket.recv())
            if reply.get("id") != request_id:
                continue  # a late answer to an earlier request
            if "error" in reply:
                logger.warning("feedback service at %s: %s", self.address, reply["error"])
                break
            return list(reply["results"])
        self._miss()
        return None

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

    def hint(
        self, library: Sequence[Subgoal], progress: dict[str, bool], step: int, lookahead: int
    ) -> Hint | None:
        """Asks for a hint; ``None`` on a miss."""
        results = self.request(
            [
                {
                    "kind": "hint",
                    "library": [sg.to_dict() for sg in library],
                    "progress": progress,
                    "step": step,
                    "lookahead": lookahead,
                }
            ]
        )
        return Hint.from_dict(results[0]) if results else None

    def review(
        self,
        records: Sequence[StepRecord],
        library: Sequence[Subgoal],
        *,
        success: bool,
        initial_done: Sequence[str],
        options: dict[str, Any],
    ) -> Review | None:
        """Asks for a review; ``None`` on a miss."""
        results = self.request(
            [
                {
                    "kind": "review",
                    "library": [sg.to_dict() for sg in library],
                    "records": [r.to_dict() for r in records],
                    "success": success,
                    "initial_done": list(initial_done),
                    "options": options,
                }
            ]
        )
        return Review.from_dict(results[0]) if results else None

    def close(self) -> None:
        """Closes the socket (idempotent)."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
