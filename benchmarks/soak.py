"""Soaks envs with the whole feedback stack: random and garbage actions for a while, then leaks.

For each id, one env built by ``feedbackgym.make(id, "guide-then-review+shaping")``
(shaping, hints, reviews, the schedule) plays for ``--seconds``: each step an
action index drawn uniformly, and one step in ten a text action drawn from the
env's own meanings or a garbage string (which must raise ``InvalidAction`` and
leave the episode playable). It prints steps, episodes, steps/s, infrastructure
errors (``info["infra_error"]``: a crashed browser or sandbox the env recovered
from), garbage refused, the process's resident memory after the first minute's
worth of warm-up and at the end, and, after ``close()``, the browser processes
and sandbox containers left (both must be 0).

Usage:
    python benchmarks/soak.py [--seconds 120] [--ids ID ...]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import feedbackgym
from feedbackgym.envs.web.browser import OWNER_ENV, close_browser
from feedbackgym.errors import InvalidAction

IDS = (
    "feedbackgym/OpsIncidentHard-v0",
    "feedbackgym/WebCheckout-v0",
    "feedbackgym/MiniWoB-email-inbox-v0",
    "feedbackgym/CodeFix-v0",
)
GARBAGE = ("", "Action:", "click", 'type 99 "x"', 'edit nowhere.py 1 "x"', "\x00\x01", "é" * 50)


def rss_mb() -> float:
    """This process's resident memory in MB (from /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def browser_processes() -> int:
    """Processes whose environment names this process as their browser's owner."""
    marker, count = f"{OWNER_ENV}={os.getpid()}".encode(), 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                count += marker in (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
    return count


def sandbox_containers() -> int:
    """Running containers of the code suite's sandbox image (0 without Docker)."""
    try:
        out = subprocess.run(
            ["docker", "ps", "-q", "--filter", "ancestor=feedbackgym/sandbox"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return len(out.split())


def soak(env_id: str, seconds: float, rng: random.Random) -> dict[str, Any]:
    """Plays ``env_id`` for ``seconds``; returns the figures of one table row."""
    env = feedbackgym.make(env_id, "guide-then-review+shaping")
    meanings = (
        list(env.unwrapped.action_meanings) if hasattr(env.unwrapped, "action_meanings") else []
    )
    steps = episodes = infra = refused = 0
    env.reset(seed=rng.randrange(10**6))
    start = time.perf_counter()
    rss_warm = None
    while time.perf_counter() - start < seconds:
        if rss_warm is None and time.perf_counter() - start > min(60.0, seconds / 4):
            rss_warm = rss_mb()
        if rng.random() < 0.1:
            text = (
                rng.choice(GARBAGE) if rng.random() < 0.5 or not meanings else rng.choice(meanings)
            )
            try:
                action: Any = env.unwrapped.parse_action(text)
            except InvalidAction:
                refused += 1
                continue
        else:
            action = env.action_space.sample()
        _, _, terminated, truncated, info = env.step(action)
        steps += 1
        infra += bool(info.get("infra_error"))
        if terminated or truncated:
            episodes += 1
            env.reset(seed=rng.randrange(10**6))
    elapsed = time.perf_counter() - start
    rss_end = rss_mb()
    env.close()
    close_browser()
    time.sleep(2.0)  # let closed renderers and containers go
    return {
        "steps": steps,
        "episodes": episodes,
        "rate": steps / elapsed,
        "infra": infra,
        "refused": refused,
        "rss": (rss_warm or rss_end, rss_end),
        "browsers": browser_processes(),
        "containers": sandbox_containers(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--ids", nargs="+", default=list(IDS))
    args = parser.parse_args()
    rng = random.Random(0)
    print(f"soak: {args.seconds:.0f} s an env, the guide-then-review+shaping stack")
    print(
        "| env | steps | episodes | steps/s | infra errors | garbage refused "
        "| RSS MB (warm → end) | browsers left | containers left |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for env_id in args.ids:
        row = soak(env_id, args.seconds, rng)
        warm, end = row["rss"]
        print(
            f"| {env_id.removeprefix('feedbackgym/')} | {row['steps']:,} | {row['episodes']:,} "
            f"| {row['rate']:.1f} | {row['infra']} | {row['refused']} | {warm:.0f} → {end:.0f} "
            f"| {row['browsers']} | {row['containers']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
