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

With ``--episodes N`` (``--episodes`` alone: 2,000) it plays N episodes instead, per
web family (``WebCheckout``, ``WebForm``, ``WebOrderAdmin``, ``MiniWoB``: its
``email-inbox`` page) and per CodeFix backend (``CodeFix-docker``, ``CodeFix-local``),
with each policy asked for (``random``: the timed mode's action mix; ``expert``: the
env's oracle). For each it prints the episodes, steps and success rate, the processes
this process left behind after ``close()`` (descendants), browsers and sandbox
containers (all three must be 0), the growth of resident memory, this process's and
the browser's, from episode 200 (half-way in a shorter run) to the last (goal: under
10%), and steps/s over the first and the last quarter of the episodes. ``--json FILE``
appends each row as a JSON line too.

Usage:
    python benchmarks/soak.py [--seconds 120] [--ids ID ...]
    python benchmarks/soak.py --episodes [N] [--targets TARGET ...] [--policies random expert]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import feedbackgym
from feedbackgym.envs.web.browser import OWNER_ENV, close_browser
from feedbackgym.errors import FeedbackGymError, InvalidAction

IDS = (
    "feedbackgym/OpsIncidentHard-v0",
    "feedbackgym/WebCheckout-v0",
    "feedbackgym/MiniWoB-email-inbox-v0",
    "feedbackgym/CodeFix-v0",
)
TARGETS: dict[str, tuple[str, dict[str, Any]]] = {
    "WebCheckout": ("feedbackgym/WebCheckout-v0", {}),
    "WebForm": ("feedbackgym/WebForm-v0", {}),
    "WebOrderAdmin": ("feedbackgym/WebOrderAdmin-v0", {}),
    "MiniWoB": ("feedbackgym/MiniWoB-email-inbox-v0", {}),
    "CodeFix-docker": ("feedbackgym/CodeFix-v0", {"sandbox": "docker"}),
    "CodeFix-local": ("feedbackgym/CodeFix-v0", {"sandbox": "local"}),
}
"""The ``--episodes`` mode's targets: each web family and each CodeFix backend."""
_STOP: list[int] = []
"""Set by SIGTERM: the episode loop stops, closes and counts what is left."""
WARM_EPISODE = 200
"""The episode whose resident memory the growth is measured from."""
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


def _owned_pids() -> list[int]:
    marker, pids = f"{OWNER_ENV}={os.getpid()}".encode(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def browser_rss_mb() -> float:
    """Resident memory of this process's browser, all its processes together, in MB."""
    total = 0
    for pid in _owned_pids():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def descendants() -> list[int]:
    """The live processes below this one (children, their children, ...), zombies excluded."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [os.getpid()]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


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


def random_action(env: Any, rng: random.Random, meanings: list[str]) -> Any:
    """The random policy's action: uniform, one step in ten a text action (half garbage).

    Returns ``None`` when the env refused the text (``InvalidAction``, as it must for garbage).
    """
    if rng.random() >= 0.1:
        return env.action_space.sample()
    text = rng.choice(GARBAGE) if rng.random() < 0.5 or not meanings else rng.choice(meanings)
    try:
        return env.unwrapped.parse_action(text)
    except InvalidAction:
        return None


def soak(env_id: str, seconds: float, rng: random.Random) -> dict[str, Any]:
    """Plays ``env_id`` for ``seconds``; returns the figures of one table row."""
    env = feedbackgym.make(env_id, "guide-then-review+shaping")
    meanings = list(getattr(env.unwrapped, "action_meanings", ()))
    steps = episodes = infra = refused = 0
    env.reset(seed=rng.randrange(10**6))
    start = time.perf_counter()
    rss_warm = None
    while time.perf_counter() - start < seconds:
        if rss_warm is None and time.perf_counter() - start > min(60.0, seconds / 4):
            rss_warm = rss_mb()
        action = random_action(env, rng, meanings)
        if action is None:
            refused += 1
            continue
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


def soak_episodes(
    target: str,
    policy: str,
    episodes: int,
    seed: int = 0,
    *,
    minutes: float | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Plays ``episodes`` episodes of ``target`` with ``policy``; returns one table row's figures.

    Args:
        target: A key of :data:`TARGETS`.
        policy: ``"random"`` (uniform indices, one step in ten a text action, half of
            them garbage) or ``"expert"`` (the env's oracle).
        episodes: Episodes to play (memory growth needs more than :data:`WARM_EPISODE`).
        seed: Seeds the episodes and the random policy.
        minutes: Stop after the episode that ends past this many minutes (the row
            then has fewer episodes); SIGTERM stops the same way.
        progress: Print the figures so far to stderr every 5% of the episodes.

    Example:
        >>> row = soak_episodes("CodeFix-local", "expert", 3)  # doctest: +SKIP
        >>> row["processes"], row["browsers"], row["containers"]  # doctest: +SKIP
        (0, 0, 0)
    """
    env_id, kwargs = TARGETS[target]
    rng = random.Random(seed)
    env = feedbackgym.make(env_id, "guide-then-review+shaping", **kwargs)
    meanings = list(getattr(env.unwrapped, "action_meanings", ()))
    steps = successes = infra = refused = 0
    memory: list[tuple[float, float]] = []  # (RSS, browser RSS) in MB after each episode
    marks: list[tuple[int, float]] = []  # (steps, time) at each episode's end
    failures: list[str] = []  # resets that raised (a browser that did not answer ...)
    env = _reset(env, env_id, kwargs, rng, failures)
    start = time.perf_counter()
    deadline = start + 60 * minutes if minutes else float("inf")
    done = 0
    while done < episodes and not _STOP:
        if policy == "expert":
            action: Any = env.unwrapped.expert_action()
        else:
            action = random_action(env, rng, meanings)
            if action is None:
                refused += 1
                continue
        _, _, terminated, truncated, info = env.step(action)
        steps += 1
        infra += bool(info.get("infra_error"))
        if terminated or truncated:
            done += 1
            successes += bool(info.get("is_success"))
            marks.append((steps, time.perf_counter()))
            if progress and done % max(1, episodes // 20) == 0:
                print(
                    f"  {target} {policy}: {done}/{episodes} episodes, {steps} steps, "
                    f"{steps / (marks[-1][1] - start):.1f} steps/s, RSS {rss_mb():.0f} MB, "
                    f"browser {browser_rss_mb():.0f} MB, {successes / done:.1%} success",
                    file=sys.stderr,
                    flush=True,
                )
            memory.append((rss_mb(), browser_rss_mb()))
            if time.perf_counter() > deadline:
                break
            if done < episodes:
                env = _reset(env, env_id, kwargs, rng, failures)
    # From episode 200 (or, in a shorter run, from half-way) to the last.
    warm = min(WARM_EPISODE, done // 2)
    rss = {"warm": memory[warm - 1] if warm else (rss_mb(), browser_rss_mb())}
    rss["end"] = memory[-1] if memory else rss["warm"]
    elapsed = time.perf_counter() - start
    env.close()
    close_browser()
    time.sleep(2.0)  # let closed renderers and containers go
    quarter = max(1, done // 4)

    def rate(first: int, last: int) -> float:
        if last <= first:
            return float("nan")
        (s0, t0), (s1, t1) = (marks[first - 1] if first else (0, start)), marks[last - 1]
        return (s1 - s0) / (t1 - t0)

    return {
        "target": target,
        "policy": policy,
        "episodes": done,
        "steps": steps,
        "seconds": elapsed,
        "success": successes / max(done, 1),
        "infra": infra,
        "reset_errors": failures,
        "refused": refused,
        "warm_episode": warm,
        "rss_mb": [rss["warm"][0], rss["end"][0]],
        "browser_rss_mb": [rss["warm"][1], rss["end"][1]],
        "rate_first_quarter": rate(0, quarter),
        "rate_last_quarter": rate(done - quarter, done),
        "processes": len(descendants()),
        "browsers": browser_processes(),
        "containers": sandbox_containers(),
    }


def _reset(
    env: Any, env_id: str, kwargs: dict[str, Any], rng: random.Random, failures: list[str]
) -> Any:
    """Resets ``env``; if that raises a feedbackgym error, notes it and plays on in a new env."""
    for _ in range(3):
        try:
            env.reset(seed=rng.randrange(10**6))
            return env
        except FeedbackGymError as error:
            failures.append(f"{type(error).__name__}: {error}")
            print(f"  reset failed, a new env: {failures[-1]}", file=sys.stderr, flush=True)
            env.close()
            env = feedbackgym.make(env_id, "guide-then-review+shaping", **kwargs)
    env.reset(seed=rng.randrange(10**6))  # a fourth failure in a row ends the run
    return env


def _growth(pair: list[float]) -> str:
    warm, end = pair
    return f"{warm:.0f} → {end:.0f} ({(end - warm) / warm:+.1%})" if warm else "-"


def main_episodes(args: argparse.Namespace) -> None:
    """The ``--episodes`` mode: one row per target and policy, printed as each ends."""
    print(
        f"soak: {args.episodes:,} episodes per target and policy, "
        "the guide-then-review+shaping stack"
    )
    print(
        "| target | policy | episodes | steps | success | infra errors (steps / resets) "
        "| processes / browsers / containers left "
        f"| RSS MB, episode {WARM_EPISODE} (or half-way) → last "
        "| browser RSS MB | steps/s first / last quarter |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
    for target in args.targets:
        for policy in args.policies:
            if _STOP:
                return
            row = soak_episodes(
                target, policy, args.episodes, minutes=args.minutes, progress=args.progress
            )
            if args.json:
                with open(args.json, "a") as file:
                    file.write(json.dumps(row) + "\n")
            print(
                f"| {target} | {policy} | {row['episodes']:,} | {row['steps']:,} "
                f"| {row['success']:.1%} | {row['infra']} / {len(row['reset_errors'])} "
                f"| {row['processes']} / {row['browsers']} / {row['containers']} "
                f"| {_growth(row['rss_mb'])} | {_growth(row['browser_rss_mb'])} "
                f"| {row['rate_first_quarter']:.1f} / {row['rate_last_quarter']:.1f} |",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--ids", nargs="+", default=list(IDS))
    parser.add_argument(
        "--episodes", type=int, nargs="?", const=2000, default=None, help="episodes mode"
    )
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    parser.add_argument(
        "--policies", nargs="+", default=["random", "expert"], choices=["random", "expert"]
    )
    parser.add_argument("--json", default=None, help="append each row to this file as JSON")
    parser.add_argument("--progress", action="store_true", help="figures so far, to stderr")
    parser.add_argument(
        "--minutes", type=float, default=None, help="at most this long a target and policy"
    )
    args = parser.parse_args()
    if args.episodes is not None:
        signal.signal(signal.SIGTERM, lambda *_: _STOP.append(1))
        main_episodes(args)
        return
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
