"""Finds the Chromium processes a given env process launched, through /proc."""

import os
from pathlib import Path

from feedbackgym.envs.web.browser import OWNER_ENV


def _table():
    parents, owners, commands = {}, {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            stat = (entry / "stat").read_text()
            environ = (entry / "environ").read_bytes().split(b"\0")
            commands[pid] = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        marker = f"{OWNER_ENV}=".encode()
        owners[pid] = next((int(e[len(marker) :]) for e in environ if e.startswith(marker)), None)
    return parents, owners, commands


def browser_processes(owner=None):
    """Pids of the browser processes launched for ``owner`` (default: this process).

    Those whose environment names the owner, and all their descendants.
    """
    owner = os.getpid() if owner is None else owner
    parents, owners, _ = _table()
    found = {pid for pid, who in owners.items() if who == owner}
    grew = True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in found} - found
        grew = bool(children)
        found |= children
    return found


def browser_main(owner=None):
    """The pid of the main Chromium process launched for ``owner``."""
    owner = os.getpid() if owner is None else owner
    _, owners, commands = _table()
    for pid, who in owners.items():
        command = commands.get(pid, [b""])
        if (
            who == owner
            and os.path.basename(command[0]) in (b"chromium", b"chromium-headless-shell")
            and not any(part.startswith(b"--type=") for part in command)
        ):
            return pid
    raise LookupError(f"no Chromium launched by {owner}")
