"""The learner's PPO update in a process of its own, so the next round's collection overlaps it.

With ``PPOConfig.overlap_update`` the learner hands each round to an
:class:`UpdateWorker` and collects the next round at once with the weights it
has (one update stale: round ``r + 1`` is played by the weights before round
``r``'s update, and PPO's ratio is taken against them). The worker owns the
trained weights and the optimizer; the learner keeps a copy of the weights to
act with, replaced by the worker's after each update. Rounds, weights and
checkpoints travel through a pipe as ``torch.save`` bytes (a round of 4,096
steps is a few MB, well under a millisecond a step).

A worker that raises reports :class:`UpdateWorkerError` with its traceback and
keeps serving; one that dies is reported as such; :meth:`UpdateWorker.close`
stops it, killing it if it does not stop.

Example:
    >>> from feedbackgym.training.torch_ppo.network import Agent, UpdateSettings
    >>> agent = Agent(obs_size=4, n_actions=3, hidden=8)
    >>> worker = UpdateWorker(agent, UpdateSettings(), threads=1)
    >>> batch = {"obs": np.zeros((8, 4), np.float32), "actions": np.zeros(8, np.int64),
    ...          "logprobs": np.full(8, -1.1, np.float32), "advantages": np.ones(8, np.float32),
    ...          "returns": np.ones(8, np.float32)}
    >>> worker.start(batch, learning_rate=3e-4)
    >>> losses, weights = worker.result()
    >>> sorted(weights) == sorted(agent.state_dict())
    True
    >>> worker.close()
"""

from __future__ import annotations

import io
import multiprocessing
import traceback
from typing import Any

import numpy as np

from feedbackgym.errors import FeedbackGymError, requires_extra
from feedbackgym.training.torch_ppo.network import (
    AnyAgent,
    UpdateSettings,
    build_agent,
    make_optimizer,
    ppo_update,
)

with requires_extra("baselines", "torch"):
    import torch

__all__ = ["UpdateWorker", "UpdateWorkerError"]

CLOSE_TIMEOUT_S = 10.0
"""How long :meth:`UpdateWorker.close` waits before it kills the worker."""


class UpdateWorkerError(FeedbackGymError, RuntimeError):
    """The update worker raised (the message holds its traceback) or died."""


def _dumps(value: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _loads(data: bytes) -> Any:
    return torch.load(io.BytesIO(data), weights_only=True)


def _serve(
    connection: Any, shape: dict[str, Any], layout: Any, settings: UpdateSettings, threads: int
) -> None:
    """The worker's loop: one command at a time, until ``close`` or a closed pipe."""
    torch.set_num_threads(threads)
    agent = build_agent(shape, layout)
    optimizer = make_optimizer(agent, learning_rate=0.0)
    while True:
        try:
            command, payload = connection.recv()
        except (EOFError, OSError):  # the learner is gone
            return
        if command == "close":
            connection.send(("ok", None))
            return
        try:
            if command == "update":
                learning_rate, data = payload
                optimizer.param_groups[0]["lr"] = learning_rate
                losses = ppo_update(agent, optimizer, _loads(data), settings)
                reply: Any = (losses, _dumps(agent.state_dict()))
            elif command == "state":
                reply = _dumps({"agent": agent.state_dict(), "optimizer": optimizer.state_dict()})
            elif command == "load":
                state = _loads(payload)
                agent.load_state_dict(state["agent"])
                optimizer.load_state_dict(state["optimizer"])
                reply = None
            else:
                raise ValueError(f"unknown command {command!r}")
        except Exception:  # reported to the learner, which raises it; the worker serves on
            connection.send(("error", traceback.format_exc()))
        else:
            connection.send(("ok", reply))


class UpdateWorker:
    """A process that trains the agent on the rounds it is given.

    Args:
        agent: The agent to start from (its shape, entity layout if any, and weights are copied).
        settings: The PPO update's settings.
        threads: Torch threads in the worker.
        optimizer: The optimizer state to start from (default: a new Adam's).

    Raises:
        UpdateWorkerError: The worker could not start.
    """

    def __init__(
        self,
        agent: AnyAgent,
        settings: UpdateSettings,
        *,
        threads: int,
        optimizer: torch.optim.Optimizer | None = None,
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self._connection, child = context.Pipe()
        self._process = context.Process(
            target=_serve,
            args=(child, agent.shape, getattr(agent, "layout", None), settings, threads),
            name="feedbackgym-update-worker",
            daemon=True,
        )
        self._process.start()
        child.close()
        self._busy = False
        start = optimizer if optimizer is not None else make_optimizer(agent, learning_rate=0.0)
        self.load_state_dict({"agent": agent.state_dict(), "optimizer": start.state_dict()})

    def start(self, batch: dict[str, np.ndarray], learning_rate: float) -> None:
        """Starts PPO's update on ``batch`` (see :func:`~.network.ppo_update`); returns at once.

        Raises:
            UpdateWorkerError: An update is in progress already, or the worker died.
        """
        if self._busy:
            raise UpdateWorkerError("an update is in progress: take its result() first")
        tensors = {key: torch.from_numpy(np.ascontiguousarray(a)) for key, a in batch.items()}
        self._send("update", (learning_rate, _dumps(tensors)))
        self._busy = True

    def result(self) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
        """Waits for the update :meth:`start` began: its mean losses and the new weights.

        Raises:
            UpdateWorkerError: No update was started, the update raised, or the worker died.
        """
        if not self._busy:
            raise UpdateWorkerError("no update in progress: start() one first")
        self._busy = False
        losses, weights = self._receive()
        return losses, _loads(weights)

    def state_dict(self) -> dict[str, Any]:
        """The trained agent's and the optimizer's state (``agent``, ``optimizer``)."""
        self._idle("state_dict")
        self._send("state", None)
        return dict(_loads(self._receive()))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replaces the worker's agent and optimizer state (``agent``, ``optimizer``)."""
        self._idle("load_state_dict")
        self._send("load", _dumps({"agent": state["agent"], "optimizer": state["optimizer"]}))
        self._receive()

    def close(self) -> None:
        """Stops the worker (killed if it has not stopped within :data:`CLOSE_TIMEOUT_S`)."""
        if self._process.is_alive():
            try:
                self._connection.send(("close", None))
            except (BrokenPipeError, OSError):
                pass
            self._process.join(CLOSE_TIMEOUT_S)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._connection.close()

    def _idle(self, what: str) -> None:
        if self._busy:
            raise UpdateWorkerError(f"{what}: an update is in progress: take its result() first")

    def _send(self, command: str, payload: Any) -> None:
        try:
            self._connection.send((command, payload))
        except (BrokenPipeError, OSError) as error:
            raise self._died() from error

    def _receive(self) -> Any:
        try:
            status, payload = self._connection.recv()
        except (EOFError, OSError) as error:
            raise self._died() from error
        if status == "error":
            raise UpdateWorkerError(f"the update worker raised:\n{payload}")
        return payload

    def _died(self) -> UpdateWorkerError:
        self._process.join(1.0)
        return UpdateWorkerError(f"the update worker died (exit code {self._process.exitcode})")
