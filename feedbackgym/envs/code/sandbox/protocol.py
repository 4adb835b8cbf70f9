"""The sandbox contract: what a run asks for, what it reports, and the backend protocol.

A run is self-contained: it carries every project file and the tests to run.
The backend wipes its workdir (and scratch directories), writes the files,
runs the tests under limits in the in-sandbox supervisor
(:mod:`feedbackgym.envs.code.sandbox.supervisor`), kills whatever the code left
behind and returns one :class:`RunReport`. Nothing carries from one run (or
episode) to the next.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "FLAGS",
    "Limits",
    "RunReport",
    "RunRequest",
    "Sandbox",
    "TestResult",
    "lost_report",
    "parse_report",
    "supervisor_command",
]

SANDBOX_ENV: dict[str, str] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/work",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
}
"""The whole environment of a sandboxed run (a fixed hash seed keeps output deterministic)."""

WORKDIR = "/work"
"""Where the project lives inside every sandbox."""

GRACE_SECONDS = 5.0
"""How long past a run's timeout the host waits for the supervisor before giving up on it."""

FLAGS: tuple[str, ...] = (
    "timeout",
    "output_limit",
    "killed",
    "memory_error",
    "leftover_processes",
    "sandbox_lost",
)
"""What a run can flag, in the order of the ``flags`` vector:

* ``timeout``: the tests ran past the wall-clock limit and were killed;
* ``output_limit``: they printed more than the output cap and were killed;
* ``killed``: the test process died from a signal (CPU or file-size limit, a
  kill from the code itself);
* ``memory_error``: a test hit the memory limit (``MemoryError``);
* ``leftover_processes``: processes were still running after the tests ended
  and were killed;
* ``sandbox_lost``: the supervisor gave no report (the code killed it); the
  backend threw the sandbox away and starts a fresh one for the next run.
"""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run.

    Attributes:
        timeout: Wall-clock seconds for the tests.
        max_output: Bytes of output kept before the run is killed.
        memory: Address-space limit of the test process, in bytes.
        file_size: Largest file the tests may write, in bytes.
        open_files: Most open file descriptors.
        processes: ``RLIMIT_NPROC`` for the test process, or ``None`` to leave it
            to the backend (Docker uses a pids cgroup limit instead).
    """

    timeout: float = 10.0
    max_output: int = 64 * 1024
    memory: int = 256 * 1024 * 1024
    file_size: int = 4 * 1024 * 1024
    open_files: int = 64
    processes: int | None = None


@dataclass(frozen=True)
class RunRequest:
    """One test run.

    Attributes:
        files: Every project file, by name (no directories), with its text.
        tests: ``(test file, test function names)`` pairs, run in order.
        limits: The resource limits.
    """

    files: Mapping[str, str]
    tests: Sequence[tuple[str, Sequence[str]]]
    limits: Limits = field(default_factory=Limits)

    def payload(
        self, workdir: str, scratch: Sequence[str], processes: int | None, *, reaper: bool
    ) -> str:
        """The supervisor's argument: this request as a Python literal, for one backend.

        Args:
            workdir: Where the project goes.
            scratch: Other writable directories to wipe.
            processes: The backend's ``RLIMIT_NPROC``, unless the request sets one.
            reaper: Whether the supervisor must reap orphans (it is not the last
                process of a pid namespace that dies with it).
        """
        limits = self.limits
        return repr(
            {
                "workdir": workdir,
                "reaper": reaper,
                "scratch": list(scratch),
                "files": dict(self.files),
                "tests": [[name, list(tests)] for name, tests in self.tests],
                "timeout": limits.timeout,
                "max_output": limits.max_output,
                "limits": {
                    "as": limits.memory,
                    "cpu": int(limits.timeout) + 1,
                    "fsize": limits.file_size,
                    "nofile": limits.open_files,
                    "nproc": limits.processes if limits.processes is not None else processes,
                },
            }
        )


@dataclass(frozen=True)
class TestResult:
    """The result of one test function.

    Attributes:
        file: The test file.
        name: The test function.
        status: ``"pass"``, ``"fail"`` (an assertion), ``"error"`` (any other
            exception) or ``"not_run"`` (the run ended before reaching it).
        message: The exception, ``"Type: text"``; empty on a pass.
        frames: ``(file, line, function)`` of the traceback frames inside the
            project, outermost first.
    """

    __test__ = False  # not a pytest test class

    file: str
    name: str
    status: str
    message: str = ""
    frames: tuple[tuple[str, int, str], ...] = ()


@dataclass(frozen=True)
class RunReport:
    """What one run came to.

    Attributes:
        results: One result per requested test, in request order.
        output: What the tests printed (capped), normalised to text.
        flags: Each flag of :data:`FLAGS` that the run raised.
    """

    results: tuple[TestResult, ...]
    output: str = ""
    flags: frozenset[str] = frozenset()

    def flag_dict(self) -> dict[str, bool]:
        """Every flag of :data:`FLAGS`, true when raised."""
        return {flag: flag in self.flags for flag in FLAGS}


@runtime_checkable
class Sandbox(Protocol):
    """A place to run untrusted tests: one protocol, two backends.

    Implementations: :class:`~feedbackgym.envs.code.sandbox.local.LocalSandbox`
    (bubblewrap) and :class:`~feedbackgym.envs.code.sandbox.docker.DockerSandbox`.
    """

    kind: str
    """The backend's name, ``"local"`` or ``"docker"``."""

    def run(self, request: RunRequest) -> RunReport:
        """Runs the tests of ``request`` and reports; raises ``SandboxError`` on infra failure."""
        ...

    def reset(self) -> None:
        """Readies the sandbox for a new episode (replaces a broken one)."""
        ...

    def close(self) -> None:
        """Releases everything the sandbox holds; idempotent."""
        ...


def parse_report(stdout: str, request: RunRequest) -> RunReport:
    """Turns the supervisor's output into a report.

    Args:
        stdout: Everything the supervisor printed; its report is the last line.
        request: The request it ran, to order results and fill in tests that
            never reported.

    Returns:
        The report. A missing or garbled report line means the supervisor was
        killed: every test is ``not_run`` and ``sandbox_lost`` is flagged.
        Result lines come from the untrusted test process and are read as
        literals only; a malformed one is skipped.
    """
    lines = stdout.strip().splitlines()
    try:
        data = _literal(lines[-1]) if lines else None
        if not isinstance(data, dict) or not isinstance(data.get("results"), str):
            raise ValueError("no report")
    except ValueError:
        return lost_report(request)
    found: dict[tuple[str, str], TestResult] = {}
    for line in data["results"].splitlines():
        try:
            file, name, status, message, frames = _literal(line)
            result = TestResult(
                str(file),
                str(name),
                str(status),
                str(message),
                tuple((str(f), int(n), str(fn)) for f, n, fn in frames),
            )
        except (TypeError, ValueError):
            continue
        found.setdefault((result.file, result.name), result)
    flags = {str(f) for f in data.get("flags", ()) if f in FLAGS}
    results = _fill(found, request)
    if any(r.message.startswith("MemoryError") for r in results):
        flags.add("memory_error")
    return RunReport(results, str(data.get("output", "")), frozenset(flags))


def lost_report(request: RunRequest, *flags: str) -> RunReport:
    """The report of a run whose supervisor never answered: nothing ran, ``sandbox_lost``."""
    return RunReport(_fill({}, request), "", frozenset({"sandbox_lost", *flags}))


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (SyntaxError, MemoryError, RecursionError) as error:
        raise ValueError(str(error)) from error


def _fill(found: dict[tuple[str, str], TestResult], request: RunRequest) -> tuple[TestResult, ...]:
    return tuple(
        found.get((file, name), TestResult(file, name, "not_run"))
        for file, names in request.tests
        for name in names
    )


@functools.cache
def _supervisor_source() -> str:
    return Path(__file__).with_name("supervisor.py").read_text(encoding="utf-8")


def supervisor_command(python: str, payload: str) -> list[str]:
    """The command line that runs the supervisor with ``payload`` inside a sandbox."""
    return [python, "-S", "-s", "-B", "-c", _supervisor_source(), payload]
