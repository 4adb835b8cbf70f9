"""``LocalSandbox``: runs tests under bubblewrap, the embedded default without Docker.

Each run starts a fresh ``bwrap`` with every namespace unshared (so no
network, a private pid space, no view of host processes), a read-only root made
of the host's system directories only (``/usr`` and its links; no ``/home``,
``/root``, ``/etc`` or ``/var``), a private ``/tmp`` and workdir on size-capped
tmpfs, no capabilities, and, when started by root, an unprivileged uid of its
own (:func:`sandbox_uid`, so ``RLIMIT_NPROC`` bites). When the supervisor
ends, bwrap's init exits and the kernel kills everything left in the pid
namespace: nothing outlives a run.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence

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
from feedbackgym.errors import SandboxError

__all__ = ["SANDBOX_UID_BASE", "LocalSandbox", "find_interpreter", "sandbox_uid"]

SANDBOX_UID_BASE = 1 << 28
"""Sandbox uids start here, far above any account's."""

_TMPFS_BYTES = 16 * 1024 * 1024
_PROCESSES = 16
_SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


class LocalSandbox:
    r"""A bubblewrap sandbox; each run is a new, throw-away one.

    Args:
        uid: The uid (and gid) to run as when started by root (default:
            :func:`sandbox_uid`); ignored otherwise (an unprivileged caller
            runs as itself).
        processes: ``RLIMIT_NPROC`` of the tests. Counted per user namespace,
            so concurrent sandboxes do not share it.

    Raises:
        SandboxError: bubblewrap is not installed, or no Python interpreter is
            reachable by the sandbox user.

    Example:
        >>> from feedbackgym.envs.code.sandbox.protocol import RunRequest
        >>> files = {"test_x.py": "def test_one():\n    assert 1 + 1 == 2\n"}
        >>> box = LocalSandbox()
        >>> box.run(RunRequest(files, [("test_x.py", ["test_one"])])).results[0].status
        'pass'
        >>> box.close()

    Change logs:
     * v0.1.0 - Initially added
    """

    kind = "local"

    def __init__(self, *, uid: int | None = None, processes: int = _PROCESSES) -> None:
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxError(
                "bubblewrap is not installed (`apt-get install bubblewrap`); "
                "or use sandbox='docker'"
            )
        self._uid: int | None = None
        if os.geteuid() == 0:
            self._uid = sandbox_uid() if uid is None else uid
        python, prefix = find_interpreter(world_reachable=self._uid is not None)
        self._command = [bwrap, *_bwrap_arguments(prefix)]
        self._python = python
        self._processes = processes

    def run(self, request: RunRequest) -> RunReport:
        """Runs the tests in a new bubblewrap sandbox."""
        payload = request.payload(WORKDIR, ("/tmp", "/dev/shm"), self._processes, reaper=False)
        command = [*self._command, *supervisor_command(self._python, payload)]
        try:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env={},
                timeout=request.limits.timeout + GRACE_SECONDS,
                check=False,
                user=self._uid,
                group=self._uid,
                extra_groups=None if self._uid is None else [],
            )
        except subprocess.TimeoutExpired:
            # The supervisor itself was stopped (SIGSTOP from the code): bwrap was killed,
            # and with it, the whole pid namespace.
            return lost_report(request, "timeout")
        except OSError as error:
            raise SandboxError(f"cannot start bubblewrap: {error}") from error
        stdout = done.stdout.decode("utf-8", "replace")
        stderr = done.stderr.decode("utf-8", "replace").strip()
        report = parse_report(stdout, request)
        if "sandbox_lost" in report.flags and (
            stderr.startswith("bwrap:") or "Traceback" in stderr
        ):
            raise SandboxError(f"the bubblewrap sandbox failed: {stderr[-500:]}")
        return report

    def reset(self) -> None:
        """Nothing to do: every run is a new sandbox."""

    def close(self) -> None:
        """Nothing to release: no run outlives its call."""


def sandbox_uid() -> int:
    """The uid a root process's local sandboxes run as.

    It has no account and is unique to the calling process (a base plus the
    pid), so sandboxes of different processes (vector env workers, parallel
    test runs) never share a uid, and what runs under it is easy to find.
    """
    return SANDBOX_UID_BASE + os.getpid()


def _bwrap_arguments(prefix: str | None) -> list[str]:
    arguments = [
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
        "--clearenv",
        *(item for key, value in SANDBOX_ENV.items() for item in ("--setenv", key, value)),
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for name in _SYSTEM_DIRS:
        path = f"/{name}"
        if os.path.islink(path):
            arguments += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            arguments += ["--ro-bind", path, path]
    if prefix is not None:
        arguments += ["--ro-bind", prefix, prefix]
    size = str(_TMPFS_BYTES)
    arguments += ["--proc", "/proc", "--dev", "/dev"]
    for mount in ("/tmp", "/dev/shm", WORKDIR):
        arguments += ["--size", size, "--perms", "0700", "--tmpfs", mount]
    return [*arguments, "--remount-ro", "/", "--chdir", "/"]


def find_interpreter(*, world_reachable: bool) -> tuple[str, str | None]:
    """Picks the Python that runs inside the sandbox.

    The host's own interpreter when the sandbox user can reach it, else the
    system ``python3``.

    Args:
        world_reachable: Whether the sandbox runs as another user, who can only
            use files that every user may read and execute.

    Returns:
        The interpreter's path and the directory to bind read-only for it
        (``None`` when it lies under ``/usr``, which is always bound).

    Raises:
        SandboxError: No usable interpreter.
    """
    candidates: list[tuple[str, str]] = [
        (os.path.realpath(sys.executable), os.path.realpath(sys.base_prefix))
    ]
    system = shutil.which("python3", path="/usr/bin:/bin")
    if system is not None:
        candidates.append((os.path.realpath(system), "/usr"))
    for python, prefix in candidates:
        inside = prefix if python.startswith(prefix + os.sep) else os.path.dirname(python)
        if world_reachable and not _reachable_by_all([python, inside]):
            continue
        return python, None if _under(inside, "/usr") else inside
    raise SandboxError(
        "no Python interpreter that the unprivileged sandbox user can run; "
        "install Debian's python3 or use sandbox='docker'"
    )


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _reachable_by_all(paths: Sequence[str]) -> bool:
    """Whether every user can traverse to (and read and execute) each path."""
    for path in paths:
        parts = path.split(os.sep)
        for depth in range(2, len(parts) + 1):
            try:
                mode = os.stat(os.sep.join(parts[:depth])).st_mode
            except OSError:
                return False
            if not mode & stat.S_IXOTH or not mode & stat.S_IROTH:
                return False
    return True
