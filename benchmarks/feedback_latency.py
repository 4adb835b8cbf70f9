"""Prints feedback latency (in-process and through the service) and the full stack's step cost.

* hint and review latency, p50 and p99, generated in-process and asked of a
  ``feedbackgym serve-feedback`` process over loopback;
* an async guide in-process (run off the step, on the background event loop);
* the service under load: 16 concurrent clients (threads, one socket each, six
  task families) with 1 and 4 workers, and with an async guide that awaits
  20 ms per hint (an LLM server stand-in) on one worker: p50, p99 and answers/s;
* OpsIncident (hard) steps/s raw and under the full stack (shaping + guide on
  every channel, a hint every 4 steps and every step + review on
  every channel + schedule, mid-fade), in the same run, with the ratio.

Usage:
    python benchmarks/feedback_latency.py [--calls 2000] [--steps 5000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import gymnasium as gym
import numpy as np

import feedbackgym
from feedbackgym.core import Hint, StepRecord
from feedbackgym.feedback import GuideRequest, ReviewRequest, SubgoalGuide, TrajectoryReviewer
from feedbackgym.feedback.generators import OffStepCall
from feedbackgym.wrappers import AddGuide, AddReview, FadeGuideToReview, ShapeWithSubgoals

gym.register_envs(feedbackgym)
ENV_ID = "feedbackgym/OpsIncidentHard-v0"
CLIENTS = 16


class AsyncGuide:
    """The built-in guide behind an ``await`` of ``latency_s`` (an LLM server stand-in)."""

    latency_s = 0.0

    def __init__(self) -> None:
        self._guide = SubgoalGuide()

    async def hint(self, request: GuideRequest) -> Hint:
        """The built-in guide's hint, after ``latency_s``."""
        await asyncio.sleep(self.latency_s)
        return self._guide.hint(request)


class SlowAsyncGuide(AsyncGuide):
    """:class:`AsyncGuide` answering after 20 ms."""

    latency_s = 0.02


def percentiles(call: Callable[[], object], n: int) -> tuple[float, float]:
    """p50 and p99 of ``call`` in milliseconds over ``n`` calls."""
    times = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000.0)
    return float(np.percentile(times, 50)), float(np.percentile(times, 99))


def episode_inputs() -> tuple[tuple, dict[str, bool], tuple[StepRecord, ...]]:
    """A hard episode's library, a mid-episode progress and a 20-step window."""
    env = gym.make(ENV_ID)
    _, info = env.reset(seed=0)
    records = []
    for step in range(20):
        action = env.unwrapped.expert_action() if step % 3 else 0
        _, _, _, _, info = env.step(action)
        done = tuple(k for k, v in info["subgoals"].items() if v)
        records.append(StepRecord(step, action, 0.0, done, harmful=bool(info["harmful"])))
    return tuple(env.unwrapped.subgoals), info["subgoals"], tuple(records)


def free_address() -> str:
    """A loopback address nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


@contextmanager
def service(*flags: str) -> Iterator[str]:
    """A ``feedbackgym serve-feedback`` process with ``flags``; yields its address."""
    from feedbackgym.feedback.remote import RemoteFeedbackSource

    address = free_address()
    server = subprocess.Popen(
        [sys.executable, "-m", "feedbackgym", "serve-feedback", "--address", address, *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = RemoteFeedbackSource(address, deadline_ms=5000)
        client.stats()  # connected and serving
        client.close()
        yield address
    finally:
        server.terminate()
        server.wait()


def concurrent_hints(
    address: str, library: tuple, progress: dict[str, bool], calls: int
) -> tuple[float, float, float, int]:
    """p50, p99 (ms), answers/s and misses of :data:`CLIENTS` clients asking at once."""
    from feedbackgym.feedback.remote import RemoteFeedbackSource

    times: list[list[float]] = [[] for _ in range(CLIENTS)]
    misses = [0] * CLIENTS

    def play(index: int) -> None:
        client = RemoteFeedbackSource(address, deadline_ms=5000)
        request = GuideRequest(library, progress, 5, task=f"family-{index % 6}")
        client.hint(request)  # connect
        for _ in range(calls):
            start = time.perf_counter()
            client.hint(request)
            times[index].append((time.perf_counter() - start) * 1000.0)
        misses[index] = client.misses
        client.close()

    threads = [threading.Thread(target=play, args=(i,)) for i in range(CLIENTS)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    flat = np.concatenate(times)
    p50, p99 = np.percentile(flat, [50, 99])
    return float(p50), float(p99), len(flat) / elapsed, sum(misses)


def steps_per_second(env: gym.Env, steps: int) -> float:
    """Random-action steps/s, resetting at episode ends."""
    rng = np.random.default_rng(0)
    actions = rng.integers(70, size=steps)
    env.reset(seed=0)
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def full_stack(every: int) -> gym.Env:
    """Shaping, a hint every ``every`` steps and reviews on every channel, a schedule."""
    env = gym.make(ENV_ID, obs_mode="both")
    env = ShapeWithSubgoals(env, terminal="zero")
    env = AddGuide(env, every=every, channels=("text", "vector", "info"), dropout=0.0)
    env = AddReview(env, window=20, channels=("text", "vector", "info", "credit"))
    env = FadeGuideToReview(env, schedule={"total": 100, "switch_at": 0.4, "fade": 5})
    env.set_progress(42)  # mid-fade: both guide and review active
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    library, progress, records = episode_inputs()
    guide, reviewer = SubgoalGuide(), TrajectoryReviewer()
    request = GuideRequest(library, progress, 5)
    # Alternating two progress states makes every call a cache miss (the guide reuses
    # its last choice while the progress stays the same, which is the common case).
    requests = itertools.cycle([request, GuideRequest(library, dict.fromkeys(progress, False), 5)])
    review_request = ReviewRequest(records, library, success=False)
    off_step = OffStepCall(AsyncGuide(), "hint")
    rows = [
        ("hint, in-process", percentiles(lambda: guide.hint(request), args.calls)),
        (
            "hint, in-process, new progress",
            percentiles(lambda: guide.hint(next(requests)), args.calls),
        ),
        (
            "review (20 steps), in-process",
            percentiles(lambda: reviewer.review(review_request), args.calls),
        ),
        (
            "hint, in-process, async guide",
            percentiles(lambda: off_step.settle(off_step.submit(request), 5.0), args.calls),
        ),
    ]
    off_step.close()
    from feedbackgym.feedback.remote import RemoteFeedbackSource

    with service() as address:
        client = RemoteFeedbackSource(address, deadline_ms=5000)
        rows += [
            ("hint, service", percentiles(lambda: client.hint(request), args.calls)),
            (
                "review (20 steps), service",
                percentiles(lambda: client.review(review_request), args.calls),
            ),
        ]
        misses = client.misses
        client.close()
    print(f"{'feedback latency':<32} {'p50 ms':>8} {'p99 ms':>8}")
    for name, (p50, p99) in rows:
        print(f"{name:<32} {p50:>8.3f} {p99:>8.3f}")
    print(f"service misses: {misses}")
    per_client = max(1, args.calls // CLIENTS)
    loads = [
        ("built-in guide, 1 worker", ("--workers", "1")),
        ("built-in guide, 4 workers", ("--workers", "4")),
        (
            "async guide +20 ms, 1 worker",
            ("--workers", "1", "--generator", "benchmarks.feedback_latency:SlowAsyncGuide"),
        ),
    ]
    print()
    print(f"service, {CLIENTS} clients at once ({per_client} hints each)")
    print(f"{'generator, workers':<32} {'p50 ms':>8} {'p99 ms':>8} {'hints/s':>9} {'misses':>7}")
    for name, flags in loads:
        with service(*flags) as address:
            p50, p99, rate, missed = concurrent_hints(address, library, progress, per_client)
        print(f"{name:<32} {p50:>8.3f} {p99:>8.3f} {rate:>9.0f} {missed:>7}")
    envs = {
        "raw env": gym.make(ENV_ID, obs_mode="both"),
        "full stack, a hint every 4 steps": full_stack(4),
        "full stack, a hint every step": full_stack(1),
    }
    best = dict.fromkeys(envs, 0.0)
    for _ in range(args.repeats):  # interleaved, best of each: the machine is noisy
        for name, env in envs.items():
            best[name] = max(best[name], steps_per_second(env, args.steps))
    raw = best["raw env"]
    print()
    print(f"{'OpsIncident hard (both obs)':<36} {'steps/s':>10} {'step time vs raw':>17}")
    for name, rate in best.items():
        print(f"{name:<36} {rate:>10.0f} {raw / rate:>16.2f}x")


if __name__ == "__main__":
    main()
