"""``DockerSandbox``: runs tests in warm, locked-down containers (docker SDK).

Containers run the image from :mod:`~feedbackgym.envs.code.sandbox.image` with
``network_mode="none"``, a read-only root, tmpfs ``/work`` and ``/tmp``,
memory, pids and CPU limits, no capabilities, ``no-new-privileges`` and user
``nobody``. Each run is one ``docker exec`` of the supervisor, which wipes the
workdir, writes the project and kills what the tests leave behind, so a
container is reused run after run and episode after episode with no state
carried over.

A process-wide :class:`ContainerPool` keeps idle containers warm for the next
env; it removes every container it started at interpreter exit (also in
multiprocessing workers), and on start it removes containers left by dead
processes of this host (a ``kill -9``). Names carry the pid, so the workers of
an ``AsyncVectorEnv`` never collide.
"""

from __future__ import annotations

import itertools
import multiprocessing.util
import os
import secrets
import select
import socket
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from feedbackgym._process import pid_alive
from feedbackgym.envs.code.sandbox.image import image_exists, image_tag
from feedbackgym.envs.code.sandbox.protocol import (
    GRACE_SECONDS,
    SANDBOX_ENV,
    WORKDIR,
    RunReport,
    RunRequest,
    lost_report,
    parse_report,
    supervisor_command,
)
from feedbackgym.errors import DependencyNotInstalled, SandboxError

try:
    import docker
    import docker.errors
    import requests.exceptions
except ImportError as _error:  # pragma: no cover - depends on the install
    raise DependencyNotInstalled.for_extra("docker", "code") from _error

__all__ = ["LABEL", "ContainerConfig", "ContainerPool", "DockerSandbox", "engine_answers"]

LABEL = "feedbackgym.sandbox"
"""Every sandbox container carries this label (value: ``host:pid`` of its owner)."""

_USER = "65534:65534"
_MAX_IDLE = 4
_CLIENT_TIMEOUT = 120
_names = itertools.count()


@dataclass(frozen=True)
class ContainerConfig:
    """How sandbox containers are started.

    Attributes:
        image: The image reference (default: the current recipe's tag).
        memory: Memory limit of the whole container (also its swap limit).
        pids: Most processes in the container.
        cpus: CPU share (1.0 is one core).
        tmpfs_size: Size of ``/work`` and of ``/tmp``.
    """

    image: str = ""
    memory: str = "512m"
    pids: int = 64
    cpus: float = 1.0
    tmpfs_size: str = "16m"

    def run_arguments(self) -> dict[str, Any]:
        """Keyword arguments of ``client.containers.run`` for one container."""
        return {
            "image": self.image or image_tag(),
            "command": ["sleep", "infinity"],
            "detach": True,
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {
                WORKDIR: f"size={self.tmpfs_size},uid=65534,gid=65534,mode=0700",
                "/tmp": f"size={self.tmpfs_size},mode=1777",
            },
            "shm_size": self.tmpfs_size,
            "user": _USER,
            "working_dir": "/",
            "mem_limit": self.memory,
            "memswap_limit": self.memory,
            "pids_limit": self.pids,
            "nano_cpus": int(self.cpus * 1e9),
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "environment": SANDBOX_ENV,
            "auto_remove": True,
            "labels": {LABEL: _owner()},
        }


def engine_answers(timeout: float = 3.0) -> bool:
    """Whether a Docker engine answers a ping (within ``timeout`` seconds)."""
    try:
        client = docker.from_env(timeout=max(1, int(timeout)))
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
        return False


def _host_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            boot = handle.read().strip()[:8]
    except OSError:
        boot = "noboot"
    return f"{socket.gethostname()}-{boot}"


def _owner() -> str:
    return f"{_host_id()}:{os.getpid()}"


class ContainerPool:
    """Warm sandbox containers of one configuration, shared by the envs of a process.

    Use :func:`pool_for`, which keeps one pool per configuration and process.
    """

    def __init__(self, config: ContainerConfig) -> None:
        self.config = config
        self.client = docker.from_env(timeout=_CLIENT_TIMEOUT)
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        self._started: dict[str, Any] = {}
        image = config.image or image_tag()
        if not image_exists(self.client, image):
            raise SandboxError(
                f"the sandbox image {image} is not built; run `feedbackgym sandbox build`"
            )
        self.remove_orphans()
        multiprocessing.util.Finalize(None, self.shutdown, exitpriority=10)

    def acquire(self) -> Any:
        """Returns a running container: a warm idle one, or a new one."""
        while True:
            with self._lock:
                container = self._idle.pop() if self._idle else None
            if container is None:
                break
            if self.running(container):
                return container
            self.discard(container)
        name = f"feedbackgym-sandbox-{os.getpid()}-{next(_names)}-{secrets.token_hex(3)}"
        try:
            container = self.client.containers.run(name=name, **self.config.run_arguments())
        except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
            raise SandboxError(f"cannot start a sandbox container: {error}") from error
        with self._lock:
            self._started[container.id] = container
        return container

    def release(self, container: Any) -> None:
        """Takes a container back for reuse (or removes it when enough are idle)."""
        with self._lock:
            keep = container.id in self._started and len(self._idle) < _MAX_IDLE
            if keep:
                self._idle.append(container)
        if not keep:
            self.discard(container)

    def discard(self, container: Any) -> None:
        """Removes a container for good (broken, tainted or surplus)."""
        with self._lock:
            self._started.pop(container.id, None)
        try:
            container.remove(force=True)
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            pass  # already gone (auto-removed when it stopped)

    def shutdown(self) -> None:
        """Removes every container this pool started; called at interpreter exit."""
        if os.getpid() != self._pid:
            return  # a forked child must not touch its parent's containers
        with self._lock:
            containers = list(self._started.values())
            self._idle.clear()
        for container in containers:
            self.discard(container)

    def remove_orphans(self) -> int:
        """Removes sandbox containers whose owner process on this host is gone."""
        host = _host_id()
        removed = 0
        try:
            containers = self.client.containers.list(all=True, filters={"label": LABEL})
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            return 0
        for container in containers:
            owner_host, _, pid = container.labels.get(LABEL, "").rpartition(":")
            if owner_host == host and pid.isdigit() and not pid_alive(int(pid)):
                try:
                    container.remove(force=True)
                    removed += 1
                except (docker.errors.DockerException, requests.exceptions.RequestException):
                    pass
        return removed

    @staticmethod
    def running(container: Any) -> bool:
        """Whether ``container`` is still running."""
        try:
            container.reload()
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            return False
        return bool(container.status == "running")


_POOLS: dict[ContainerConfig, ContainerPool] = {}
_POOLS_LOCK = threading.Lock()


def pool_for(config: ContainerConfig) -> ContainerPool:
    """The process's pool for ``config`` (created on first use)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(config)
        if pool is None:
            pool = _POOLS[config] = ContainerPool(config)
        return pool


def _forget_pools_after_fork() -> None:
    _POOLS.clear()


os.register_at_fork(after_in_child=_forget_pools_after_fork)


class DockerSandbox:
    r"""A sandbox on a warm Docker container, kept across episodes.

    Args:
        config: How containers are started (image, limits).

    Raises:
        SandboxError: No engine answers, or the image is not built.

    Example:
        >>> from feedbackgym.envs.code.sandbox.protocol import RunRequest
        >>> files = {"test_x.py": "def test_one():\n    assert 1 + 1 == 2\n"}
        >>> box = DockerSandbox()
        >>> box.run(RunRequest(files, [("test_x.py", ["test_one"])])).results[0].status
        'pass'
        >>> box.close()

    Change logs:
     * v0.1.0 - Initially added
    """

    kind = "docker"

    def __init__(self, config: ContainerConfig | None = None) -> None:
        self.config = config or ContainerConfig()
        try:
            self._pool = pool_for(self.config)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
            raise SandboxError(f"no Docker engine answers: {error}") from error
        self._container: Any = None
        self._lease: weakref.finalize[Any, Any] | None = None

    @property
    def container_name(self) -> str | None:
        """The name of the container in use, if any."""
        return None if self._container is None else str(self._container.name)

    def run(self, request: RunRequest) -> RunReport:
        """Runs the tests with one ``docker exec`` in the warm container."""
        container = self._ensure()
        payload = request.payload(WORKDIR, ("/tmp", "/dev/shm"), None, reaper=True)
        api = self._pool.client.api
        try:
            exec_id = api.exec_create(
                container.id,
                supervisor_command("python3", payload),
                user=_USER,
                workdir="/",
                environment=SANDBOX_ENV,
            )["Id"]
            stream = api.exec_start(exec_id, socket=True)
            stdout = _read_stdout(stream, request.limits.timeout + GRACE_SECONDS)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
            self._drop()
            raise SandboxError(f"the sandbox container failed: {error}") from error
        if stdout is None:
            # The supervisor never answered (the code stopped it): throw the container away.
            self._drop()
            return lost_report(request, "timeout")
        report = parse_report(stdout.decode("utf-8", "replace"), request)
        if "sandbox_lost" in report.flags:
            alive = self._pool.running(container)
            self._drop()
            if not alive:
                raise SandboxError(f"the sandbox container {container.name} died during a run")
        return report

    def reset(self) -> None:
        """Makes sure a running container is ready for the next episode."""
        self._ensure()

    def close(self) -> None:
        """Gives the container back to the warm pool; idempotent."""
        if self._lease is not None:
            self._lease()
        self._lease = None
        self._container = None

    def _ensure(self) -> Any:
        if self._container is None:
            self._container = self._pool.acquire()
            self._lease = weakref.finalize(self, self._pool.release, self._container)
        return self._container

    def _drop(self) -> None:
        """Throws the current container away (dead or tainted); the next run starts a new one."""
        if self._lease is not None:
            self._lease.detach()
        container, self._container, self._lease = self._container, None, None
        if container is not None:
            self._pool.discard(container)


def _read_stdout(stream: Any, seconds: float) -> bytes | None:
    """Reads an exec's multiplexed output until it ends; ``None`` past ``seconds``.

    The docker SDK's own reader waits without a deadline; this one does not.
    Each frame is an 8-byte header (stream id, three zero bytes, big-endian
    size) and a payload; only stdout (stream 1) is kept.
    """
    deadline = time.monotonic() + seconds
    data = bytearray()
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([stream], [], [], remaining)[0]:
                return None
            chunk = stream.read(65536)
            if not chunk:
                break
            data += chunk
    finally:
        for closable in (getattr(stream, "_response", None), stream):
            try:
                if closable is not None:
                    closable.close()
            except (OSError, ValueError):
                pass  # already closed with the response
    out = bytearray()
    at = 0
    while at + 8 <= len(data):
        kind, size = data[at], int.from_bytes(data[at + 4 : at + 8], "big")
        if kind == 1:
            out += data[at + 8 : at + 8 + size]
        at += 8 + size
    return bytes(out)
