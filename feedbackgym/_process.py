"""Process helpers shared by the envs that own outside processes (browsers, containers)."""

from __future__ import annotations

import os
import threading
import time

__all__ = ["exit_with_parent", "pid_alive"]


def pid_alive(pid: int) -> bool:
    """Whether a process with id ``pid`` exists on this machine (someone else's counts).

    Example:
        >>> pid_alive(os.getpid())
        True
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def exit_with_parent(poll_s: float = 0.5) -> threading.Thread:
    """Ends this process soon after its parent dies (a worker must not outlive its pool).

    A daemon thread watches the parent's pid; when the process is orphaned
    (its parent killed, even with ``kill -9``) it exits with status 1 without
    cleanup: what a run saved (its checkpoints, its state, its trajectory
    store's log) is kept, and ``--resume`` continues from there.

    Returns:
        The watching thread.
    """
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    thread = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    thread.start()
    return thread
