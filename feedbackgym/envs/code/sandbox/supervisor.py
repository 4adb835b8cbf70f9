"""The in-sandbox supervisor: runs a project's tests under limits and prints one report line.

Both backends start it the same way, inside the sandbox, as an unprivileged
user::

    python3 -S -s -B -c <this file's source> <payload>

It wipes the workdir and scratch directories, writes the project files, forks
a test process (new session; rlimits on memory, CPU, file size, open files
and, where asked, processes), collects its results and output until it exits,
the wall clock runs out or the output passes its cap, then kills every
process left in the sandbox and prints the report as its last line. In
Docker it is a child subreaper first, so that orphans come back to it and are
reaped; under bubblewrap the pid namespace dies with it.

The payload is a Python literal written by the host (trusted); the report and
the test process's result lines are Python literals too, read on the host
with ``ast.literal_eval`` by
:func:`feedbackgym.envs.code.sandbox.protocol.parse_report`. It imports only
``os``, ``resource``, ``select`` and ``time`` (and ``ctypes`` in Docker),
which keeps a run close to a bare ``python3`` start.
"""

from __future__ import annotations

import sys

sys.path[:] = [p for p in sys.path if p]  # never import from the workdir

import os  # noqa: E402
import resource  # noqa: E402
import select  # noqa: E402
import time  # noqa: E402

_SIGKILL = 9
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_MESSAGE_CHARS = 300
_RESULT_BYTES = 1 << 20


def main(argv: list[str]) -> None:
    """Runs the request in ``argv[1]`` and prints the report."""
    payload = eval(argv[1], {"__builtins__": {}})  # a literal from the host
    if payload["reaper"]:
        _become_reaper()
    workdir = payload["workdir"]
    for directory in (workdir, *payload["scratch"]):
        _wipe(directory)
    for name, text in payload["files"].items():
        _write(workdir, name, text)
    report = _supervise(payload)
    sys.stdout.write(repr(report) + "\n")
    sys.stdout.flush()


def _become_reaper() -> None:
    """Makes the supervisor a child subreaper (orphans come back to it) and non-dumpable."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass


def _wipe(directory: str) -> None:
    """Removes everything inside ``directory`` (best effort, also unreadable leftovers)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, 0o700)
                _wipe(entry.path)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def _write(workdir: str, name: str, text: str) -> None:
    if "/" in name or name.startswith("."):
        raise ValueError(f"bad file name {name!r}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    fd = os.open(os.path.join(workdir, name), flags, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _supervise(payload: dict) -> dict:
    sys.stdout.flush()
    out_r, out_w = os.pipe()
    res_r, res_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(res_r)
        _child(payload, out_w, res_w)
    os.close(out_w)
    os.close(res_w)
    flags: set[str] = set()
    output, results = _collect(pid, out_r, res_r, payload, flags)
    status = _finish(pid, flags)
    if status is not None and os.WIFSIGNALED(status) and not flags & {"timeout", "output_limit"}:
        flags.add("killed")
    return {"results": results, "output": output, "flags": sorted(flags)}


def _collect(pid: int, out_r: int, res_r: int, payload: dict, flags: set[str]) -> tuple[str, str]:
    """Reads output and results until the test process exits or a limit is hit."""
    deadline = time.monotonic() + float(payload["timeout"])
    cap = int(payload["max_output"])
    chunks: dict[int, bytearray] = {out_r: bytearray(), res_r: bytearray()}
    try:
        exited: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        exited = None
    open_fds = {out_r, res_r}
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            flags.add("timeout")
            break
        watched = list(open_fds) + ([exited] if exited is not None else [])
        if not watched:
            break
        ready, _, _ = select.select(watched, [], [], min(remaining, 0.05 if exited is None else 1))
        if (exited in ready) if exited is not None else _has_exited(pid):
            _drain(open_fds, chunks)
            break
        for fd in ready:
            data = os.read(fd, 65536)
            if not data:
                open_fds.discard(fd)
            else:
                chunks[fd] += data
        if len(chunks[out_r]) > cap:
            break
        if len(chunks[res_r]) > _RESULT_BYTES:
            break
    if len(chunks[out_r]) > cap:
        flags.add("output_limit")
    for fd in (out_r, res_r):
        os.close(fd)
    if exited is not None:
        os.close(exited)
    output = bytes(chunks[out_r][:cap]).decode("utf-8", "replace")
    results = bytes(chunks[res_r][:_RESULT_BYTES]).decode("utf-8", "replace")
    return output, results


def _has_exited(pid: int) -> bool:
    """Whether the test process has exited, leaving it to be reaped later."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _drain(open_fds: set[int], chunks: dict[int, bytearray]) -> None:
    """Reads what is already in the pipes without waiting for writers that live on."""
    for fd in list(open_fds):
        os.set_blocking(fd, False)
        try:
            while len(chunks[fd]) <= _RESULT_BYTES:
                data = os.read(fd, 65536)
                if not data:
                    break
                chunks[fd] += data
        except BlockingIOError:
            pass


def _finish(pid: int, flags: set[str]) -> int | None:
    """Kills the test process and every leftover, reaps them; returns the test's status."""
    status: int | None = None
    try:
        waited, raw = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            status = raw
    except ChildProcessError:
        pass
    if _others():
        if status is not None:
            flags.add("leftover_processes")
        for _ in range(200):
            try:
                os.kill(-1, _SIGKILL)
            except ProcessLookupError:
                break
            _reap()
            if not _others():
                break
    if status is None:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    _reap()
    return status


def _others() -> list[int]:
    """Pids in this sandbox other than its init and the supervisor."""
    me = os.getpid()
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (1, me):
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    state = handle.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != b"Z":
                pids.append(int(name))
    return pids


def _reap() -> None:
    while True:
        try:
            waited, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if waited == 0:
            return


def _child(payload: dict, out_w: int, res_w: int) -> None:
    """The test process: limits, then every requested test; never returns."""
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        os.dup2(res_w, 3)
        for fd in (null, out_w, res_w):
            if fd > 3:
                os.close(fd)
        limits = payload["limits"]
        _limit(resource.RLIMIT_AS, limits["as"])
        _limit(resource.RLIMIT_CPU, limits["cpu"])
        _limit(resource.RLIMIT_FSIZE, limits["fsize"])
        _limit(resource.RLIMIT_NOFILE, limits["nofile"])
        _limit(resource.RLIMIT_CORE, 0)
        if limits.get("nproc") is not None:
            _limit(resource.RLIMIT_NPROC, limits["nproc"])
        os.chdir(payload["workdir"])
        _run_tests(payload["workdir"], payload["tests"])
    finally:
        os._exit(0)


def _limit(kind: int, value: int) -> None:
    soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def _run_tests(workdir: str, tests: list) -> None:
    sys.path.insert(0, workdir)
    sys.stdout = os.fdopen(1, "w", buffering=1, encoding="utf-8", errors="replace")
    sys.stderr = sys.stdout
    for file, names in tests:
        try:
            module = __import__(file[:-3])
        except BaseException as error:  # noqa: B036 - a broken module fails its tests
            for name in names:
                _emit(file, name, "error", error, workdir)
            continue
        for name in names:
            function = getattr(module, name, None)
            if not callable(function):
                _emit(file, name, "error", NameError(f"no test {name}"), workdir)
                continue
            try:
                function()
            except AssertionError as error:
                _emit(file, name, "fail", error, workdir)
            except BaseException as error:  # noqa: B036 - SystemExit too must not end the run
                _emit(file, name, "error", error, workdir)
            else:
                _emit(file, name, "pass", None, workdir)


def _emit(file: str, name: str, status: str, error: BaseException | None, workdir: str) -> None:
    """Writes one result line (a Python literal) to fd 3."""
    message, frames = "", []
    if error is not None:
        try:
            text = str(error)
        except Exception:  # a hostile __str__
            text = "?"
        message = f"{type(error).__name__}: {text}" if text else type(error).__name__
        tb = error.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if os.path.dirname(code.co_filename) == workdir:
                frames.append((os.path.basename(code.co_filename), tb.tb_lineno, code.co_name))
            tb = tb.tb_next
        if isinstance(error, SyntaxError) and error.filename and error.lineno:
            frames.append((os.path.basename(error.filename), error.lineno, "<module>"))
    line = repr((file, name, status, message[:_MESSAGE_CHARS], frames[-5:]))
    try:
        os.write(3, (line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


if __name__ == "__main__":
    main(sys.argv)
