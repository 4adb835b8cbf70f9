"""A comparison's runs as Ray tasks across a cluster (``feedbackgym compare --backend ray``).

Each arm × seed run is one Ray task that asks for its resources
(:meth:`RayOptions.resources`: a CPU for the learner, one more per env worker
and for an overlapped update; GPUs if asked). A task trains in a temporary
directory on its node and, after a round, at most every
:attr:`RayOptions.ship_every_s` (and after its first and last round), ships what
changed in it (:mod:`~.dir_sync`) to a mailbox actor on the head; the
driver (the ``compare`` process, where ``--out`` is) takes the changes from
the mailbox and keeps ``--out/runs/ARM-seedS`` in step, so run directories
come back to ``--out`` even with ``ray://`` (the driver off the cluster). With
:attr:`RayOptions.shared`, ``--out`` is on a filesystem every node mounts and
runs write there directly.

A task lost with its node (or its worker process) is retried by Ray on another
node: it fetches its run directory as ``--out`` has it (rounds up to the last
one shipped) and goes on from there with the runner's resume, as
``compare --resume`` would. ``--out/ray.json`` records, per run, the nodes it
ran on, the round each retry resumed after and when each attempt started and
ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedbackgym.errors import requires_extra
from feedbackgym.training.common.run_files import read_state
from feedbackgym.training.common.run_settings import RunConfig, in_worker_processes
from feedbackgym.training.experiments.dir_sync import (
    Changes,
    DirChanges,
    apply_changes,
    restore,
    snapshot,
)
from feedbackgym.training.experiments.logged_run import train_logged
from feedbackgym.training.workers.env_groups import worker_layout

with requires_extra("ray"):
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

__all__ = ["RayOptions", "run_on_ray"]

_POLL_S = 0.5
"""Seconds between the driver's looks at the mailbox."""


@dataclass(frozen=True)
class RayOptions:
    """Where and how a comparison's runs go on Ray.

    Attributes:
        address: The cluster: ``None`` starts Ray on this machine, ``"auto"``
            joins the one started here with ``ray start``, ``"ray://HOST:PORT"``
            connects a client to a remote head.
        cpus_per_run: CPUs each run asks for (``None``: 1, plus one per process
            that steps its envs, 4 by default for web and code envs, and one for an
            overlapped update).
        gpus_per_run: GPUs each run asks for (``None``: 1 with ``device="cuda"``,
            else 0; fractions share a GPU).
        shared: ``--out`` is on a filesystem every node mounts: runs write there
            directly instead of shipping their files to the driver.
        max_retries: Times Ray reruns a run lost to a node or worker failure
            (from its last shipped round). A run's own error is not retried.
        ship_every_s: Seconds a run trains between shipping its directory's
            changes to ``--out`` (after a round; 0: after every round; the first
            and the last round, and a failed run's last state, always ship). Each
            shipment carries the round's checkpoint and holds the run until the
            head has it, so shipping every short round costs training time; a run
            lost with its node loses about this much training plus a round.

    Example:
        >>> run = RunConfig("feedbackgym/OpsIncidentEasy-v0", "sparse", 0, 1024, "runs/x",
        ...                 env_workers=2)
        >>> RayOptions(address="auto").resources(run)
        {'num_cpus': 3.0, 'num_gpus': 0.0}
        >>> web = RunConfig("feedbackgym/WebForm-v0", "sparse", 0, 1024, "runs/y")
        >>> RayOptions().resources(web)["num_cpus"]
        5.0
    """

    address: str | None = None
    cpus_per_run: float | None = None
    gpus_per_run: float | None = None
    shared: bool = False
    max_retries: int = 3
    ship_every_s: float = 2.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.ship_every_s) and self.ship_every_s >= 0):
            raise ValueError(f"ship_every_s must be finite and >= 0, got {self.ship_every_s}")
        if self.cpus_per_run is not None and self.cpus_per_run <= 0:
            raise ValueError(f"cpus_per_run must be positive, got {self.cpus_per_run}")
        if self.gpus_per_run is not None and self.gpus_per_run < 0:
            raise ValueError(f"gpus_per_run must be >= 0, got {self.gpus_per_run}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")

    def resources(self, run: RunConfig) -> dict[str, float]:
        """The Ray resources ``run`` asks for (``num_cpus``, ``num_gpus``)."""
        cpus = self.cpus_per_run
        if cpus is None:
            cpus = 1 + _worker_processes(run) + int(run.overlap_update)
        gpus = self.gpus_per_run
        if gpus is None:
            gpus = 1.0 if run.device == "cuda" else 0.0
        return {"num_cpus": float(cpus), "num_gpus": float(gpus)}


def _worker_processes(run: RunConfig) -> int:
    """The processes that step ``run``'s envs beside the learner (0: in its process).

    With ``env_backend="ray"`` the envs are Ray actors that ask for their own
    resources. SB3 steps each env in a process of its own (``SubprocVecEnv``) when the envs step
    in workers; the torch trainer lays its env workers out by
    :func:`~feedbackgym.training.workers.env_groups.worker_layout` (web and code envs get
    several by default).
    """
    if run.env_backend == "ray":  # its env actors ask for their own CPUs
        return 0
    if run.trainer == "sb3":
        return run.n_envs if in_worker_processes(run) else 0
    workers = run.env_workers or (2 if run.subprocess else None)
    return worker_layout(run.env_id, run.n_envs, workers)[0]


@ray.remote(num_cpus=0)
class _Mailbox:
    """The head's end of the runs: their shipped changes, progress, attempts and restores."""

    def __init__(self) -> None:
        self._pending: list[tuple[str, Changes]] = []
        self._steps: dict[str, int] = {}
        self._attempts: dict[str, list[dict[str, Any]]] = {}
        self._requests: list[str] = []
        self._ready: dict[str, asyncio.Event] = {}
        self._provided: dict[str, dict[str, bytes]] = {}

    async def begin(self, name: str, node: str) -> int:
        """Notes a run's start on ``node``; returns its attempt (0 the first time)."""
        attempts = self._attempts.setdefault(name, [])
        attempts.append(
            {"node": node, "resumed_after_round": None, "started": time.time(), "ended": None}
        )
        return len(attempts) - 1

    async def end(self, name: str, attempt: int) -> None:
        """Notes that an attempt of a run finished training (its CPUs are free)."""
        self._attempts[name][attempt]["ended"] = time.time()

    async def put(self, name: str, attempt: int, changes: Changes | None, steps: int) -> None:
        """Takes a run's changes and steps done (a superseded attempt's are dropped)."""
        if attempt != len(self._attempts[name]) - 1:
            return
        if changes is not None:
            self._pending.append((name, changes))
        self._steps[name] = steps

    async def restore(self, name: str, attempt: int, resume: bool) -> dict[str, bytes]:
        """Waits for the driver to send the run directory as ``--out`` has it."""
        ready = self._ready[name] = asyncio.Event()
        self._requests.append(name)
        await ready.wait()
        files = self._provided.pop(name)
        if resume:
            self._attempts[name][attempt]["resumed_after_round"] = json.loads(
                files.get("state.json", b"{}")
            ).get("round")
        return files

    async def provide(self, name: str, files: dict[str, bytes]) -> None:
        """The driver's answer to a :meth:`restore`."""
        self._provided[name] = files
        self._ready.pop(name).set()

    async def drain(self) -> tuple[list[tuple[str, Changes]], dict[str, int], list[str]]:
        """Hands the driver the changes and restore requests so far, and the steps done."""
        pending, self._pending = self._pending, []
        requests, self._requests = self._requests, []
        return pending, dict(self._steps), requests

    async def attempts(self) -> dict[str, list[dict[str, Any]]]:
        """Per run: each attempt's node, the round it resumed after, when it started and ended."""
        return self._attempts


def _train_task(
    config_json: str, mailbox: Any, resume: bool, shared: bool, ship_every_s: float
) -> dict[str, Any]:
    """One run on a cluster node (a Ray task); returns its final state.

    The run goes on a thread of its own. While a task's main thread waits in
    ``ray.get`` (here on the mailbox each round, and on env actors each step),
    Ray lends the task's CPUs back to the node and starts other runs on them, so
    every run would start at once and share the cores each was promised alone;
    waits on another thread keep them.
    """
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="feedbackgym-run")
    try:
        return pool.submit(_train_run, config_json, mailbox, resume, shared, ship_every_s).result()
    finally:  # a cancelled task does not wait for the run's thread (it ends with the worker)
        pool.shutdown(wait=False, cancel_futures=True)


def _train_run(
    config_json: str, mailbox: Any, resume: bool, shared: bool, ship_every_s: float
) -> dict[str, Any]:
    """The body of :func:`_train_task`: one attempt at the run, noted in the mailbox."""
    config = RunConfig.from_json(config_json)
    name = Path(config.out_dir).name
    node = ray.get_runtime_context().get_node_id()
    attempt = ray.get(mailbox.begin.remote(name, node))
    try:
        return _train_attempt(config, mailbox, attempt, resume or attempt > 0, shared, ship_every_s)
    finally:  # an attempt lost with its node has no end
        ray.get(mailbox.end.remote(name, attempt))


def _train_attempt(
    config: RunConfig,
    mailbox: Any,
    attempt: int,
    resume: bool,
    shared: bool,
    ship_every_s: float,
) -> dict[str, Any]:
    """Trains the run, writing to ``--out`` (shared) or shipping its directory there."""
    name = Path(config.out_dir).name
    if shared:

        def report(steps: int) -> None:
            ray.get(mailbox.put.remote(name, attempt, None, steps))

        return train_logged(config, resume=resume, progress=report)
    local = Path(tempfile.mkdtemp(prefix="feedbackgym-run-"))
    try:
        run_dir = local / name
        # Even a new run starts from what --out has: the runner then clears what a new
        # run clears there, and the deletions are shipped, as in a local comparison.
        restore(run_dir, ray.get(mailbox.restore.remote(name, attempt, resume)))
        watch = DirChanges(run_dir)
        watch.changes()  # what was restored, the driver has

        def send(steps: int, ship: bool) -> None:
            if ship:  # waits, so that a round shipped is a round kept
                ray.get(mailbox.put.remote(name, attempt, watch.changes(), steps))
            else:  # progress only: not waited for
                mailbox.put.remote(name, attempt, None, steps)

        shipments = Shipments(send, ship_every_s)
        run = dataclasses.replace(config, out_dir=str(run_dir))
        try:
            state = train_logged(run, resume=resume, progress=shipments.after_round)
        except BaseException:
            with contextlib.suppress(Exception):  # the run's own error is the one to see
                shipments.last()
            raise
        shipments.last(int(state.get("timesteps", 0)))
        return state
    finally:
        shutil.rmtree(local, ignore_errors=True)


class Shipments:
    """When a run on a node ships its directory: after a round, at most every ``every_s``.

    The first round always ships (a retry then resumes from this attempt's
    start, not from what ``--out`` held before it), and so does the end
    (:meth:`last`). Rounds in between only report their steps.

    Args:
        send: ``send(steps, ship)``: report the steps done, shipping the
            directory's changes when ``ship``.
        every_s: Seconds between shipments (0: every round).
        clock: Seconds, monotonic.

    Example:
        >>> sent, now = [], [0.0]
        >>> shipments = Shipments(lambda steps, ship: sent.append((steps, ship)), 2.0,
        ...                       clock=lambda: now[0])
        >>> for now[0], steps in [(0.5, 100), (1.0, 200), (2.6, 300), (3.0, 400)]:
        ...     shipments.after_round(steps)
        >>> shipments.last()
        >>> sent
        [(100, True), (200, False), (300, True), (400, False), (400, True)]
    """

    def __init__(
        self,
        send: Callable[[int, bool], None],
        every_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._every_s = every_s
        self._clock = clock
        self._shipped_at: float | None = None
        self._steps = 0

    def after_round(self, steps: int) -> None:
        """Reports a finished round's steps, shipping if it is time."""
        self._steps = steps
        now = self._clock()
        ship = self._shipped_at is None or now - self._shipped_at >= self._every_s
        self._send(steps, ship)
        if ship:
            self._shipped_at = self._clock()

    def last(self, steps: int | None = None) -> None:
        """Ships what is left (at the run's end, or after it failed)."""
        self._send(self._steps if steps is None else steps, True)


def _connect(address: str | None) -> bool:
    """Connects to (or starts) Ray; returns whether this call did (and so shuts it down)."""
    if ray.is_initialized():
        return False
    # Quiet: the comparison's progress bar has the terminal.
    if address is None:
        ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    else:
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    return True


def _head_node() -> str:
    """The head node's id (the driver's node if none says it is the head)."""
    for node in ray.nodes():
        if node.get("Alive") and "node:__internal_head__" in node.get("Resources", {}):
            return str(node["NodeID"])
    return str(ray.get_runtime_context().get_node_id())


def run_on_ray(
    runs: list[RunConfig],
    options: RayOptions,
    *,
    resume: bool = False,
    progress: Callable[[dict[str, int]], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Trains every run as a Ray task; their directories end up at their ``out_dir``.

    Args:
        runs: The runs (their ``out_dir`` is on the driver's machine, or on a
            shared filesystem with ``options.shared``).
        options: The cluster and the resources of each run.
        resume: Continue every run from its last checkpoint in its ``out_dir``.
        progress: Called about twice a second with the steps done per run
            directory.

    Returns:
        The final state of each run, by run directory.

    Raises:
        Exception: A run's error (the other runs are cancelled).
    """
    started = _connect(options.address)
    mailbox = _Mailbox.options(  # type: ignore[attr-defined]
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=_head_node(), soft=False)
    ).remote()
    try:
        by_name = {Path(run.out_dir).name: run for run in runs}
        task = ray.remote(_train_task)
        refs = {
            task.options(
                **options.resources(run),
                max_retries=options.max_retries,
                retry_exceptions=False,
                name=f"feedbackgym-{name}",
            ).remote(run.to_json(), mailbox, resume, options.shared, options.ship_every_s): run
            for name, run in by_name.items()
        }
        for run in runs:
            Path(run.out_dir).mkdir(parents=True, exist_ok=True)
        results: dict[str, dict[str, Any]] = {}
        pending = list(refs)
        try:
            while pending:
                finished, pending = ray.wait(pending, num_returns=len(pending), timeout=_POLL_S)
                _exchange(mailbox, by_name, progress)
                for ref in finished:
                    results[refs[ref].out_dir] = ray.get(ref)  # a run's error is raised here
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        _exchange(mailbox, by_name, progress)
        _write_record(runs, ray.get(mailbox.attempts.remote()))
        return results
    finally:
        ray.kill(mailbox)
        if started:
            ray.shutdown()


def _exchange(
    mailbox: Any,
    runs: dict[str, RunConfig],
    progress: Callable[[dict[str, int]], None] | None,
) -> None:
    """Applies the runs' shipped changes to their directories, answers restores, reports."""
    pending, steps, requests = ray.get(mailbox.drain.remote())
    for name, changes in pending:
        if "config.json" in changes["written"]:  # the node's has its own directory in it
            changes["written"]["config.json"] = runs[name].to_json().encode()
        apply_changes(runs[name].out_dir, changes)
    for name in requests:
        ray.get(mailbox.provide.remote(name, snapshot(runs[name].out_dir)))
    if progress is not None:
        progress({runs[name].out_dir: done for name, done in steps.items()})


def _write_record(runs: list[RunConfig], attempts: dict[str, list[dict[str, Any]]]) -> None:
    """``ray.json`` beside ``runs/``: per run, each attempt's node, resume point and times."""
    if not runs:
        return
    out = Path(runs[0].out_dir).parent.parent
    record = {
        Path(run.out_dir).name: {
            "attempts": attempts.get(Path(run.out_dir).name, []),
            "round": read_state(Path(run.out_dir)).get("round"),
        }
        for run in runs
    }
    (out / "ray.json").write_text(json.dumps(record, indent=2, sort_keys=True))
