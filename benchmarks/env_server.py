"""Prints what one ``serve-env`` server holds, beside OpenEnv's own echo env in the same run.

All on this machine: each server is a child process, the clients are one asyncio
process (this one), every client its own WebSocket session. A client plays
``--episodes`` episodes back to back: a reset, then steps until the episode ends
or ``--max-steps`` steps, each action drawn at random from the observation's
``actions`` (the echo env: a short message), waiting ``--think-ms`` between a
reply and its next step (a language model's think time). An episode is
completed when every reply of it came, none an error, within ``--timeout`` s.

Figures, per concurrency level (the sessions at once):

* completed: the share of the episodes every client set out to play;
* step p50/p99: from a step's send to its reply, at the client (WebSocket,
  JSON, OpenEnv's server, the env with its feedback stack);
* beside it, in-process: the same step (:class:`~feedbackgym.serving.session.FeedbackSession`,
  the env with the stack and the wire observation) in this process, no server;
* with no think time: the steps per second one server holds, ``--busy`` clients
  stepping as fast as they get replies.

The levels go up until one completes under 95% of its episodes (or all pass).
Then one web family (``--web``, Chromium per session) at a few levels.

Usage:
    python benchmarks/env_server.py [--levels 64,128,256,384,512] [--think-ms 250]
        [--episodes 2] [--max-steps 20] [--busy 16] [--busy-s 10]
        [--web feedbackgym/WebForm-v0] [--web-levels 1,4,16,32,64] [--skip-web]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from websockets.asyncio.client import connect

from feedbackgym.serving.server_process import env_server
from feedbackgym.serving.session import FeedbackSession
from feedbackgym.serving.settings import ServeSettings
from feedbackgym.serving.wire import FeedbackAction

OPS = "feedbackgym/OpsIncident-v1"
ECHO_NAME = "echo_bench"


@dataclass
class Level:
    """What the clients of one concurrency level saw."""

    sessions: int
    attempted: int = 0
    completed: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def share(self) -> float:
        """Completed over attempted episodes."""
        return self.completed / max(1, self.attempted)

    def quantile(self, q: float) -> float:
        """The step latency at quantile ``q``, in milliseconds."""
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return (
        ordered[int(0.5 * len(ordered))] * 1000,
        ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000,
    )


def in_process_steps(env_id: str, steps: int, max_steps: int) -> list[float]:
    """The same steps as the clients take (random actions), timed in this process."""
    session = FeedbackSession(ServeSettings(env_id))
    rng = random.Random(1)
    samples: list[float] = []
    seed = 0
    while len(samples) < steps:
        observation = session.reset(seed=seed)
        seed += 1
        for _ in range(max_steps):
            action = FeedbackAction(action=rng.choice(observation.actions))
            start = time.perf_counter()
            observation = session.step(action)
            samples.append(time.perf_counter() - start)
            if observation.done:
                break
    session.close()
    return samples


def echo_action(rng: random.Random, observation: dict) -> dict:
    return {"message": rng.choice(("wait", "hello", "inspect logs web"))}


def env_action(rng: random.Random, observation: dict) -> dict:
    return {"action": rng.choice(observation["actions"])}


async def client(
    url: str,
    level: Level,
    index: int,
    args: argparse.Namespace,
    act: object,
    think_s: float,
    start_at: float,
) -> None:
    """One session: ``args.episodes`` episodes, then a clean close."""
    rng = random.Random(index)
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))
    episodes_left = args.episodes
    try:
        async with connect(url, max_size=None, open_timeout=args.timeout) as ws:

            async def ask(message: dict) -> dict:
                await ws.send(json.dumps(message))
                reply = json.loads(await asyncio.wait_for(ws.recv(), args.timeout))
                if reply["type"] == "error":
                    raise RuntimeError(reply["data"].get("code", "error"))
                return reply["data"]

            await asyncio.sleep(rng.random() * think_s)  # spread the first steps
            while episodes_left:
                level.attempted += 1
                episodes_left -= 1
                data = await ask({"type": "reset", "data": {"seed": index * 100 + episodes_left}})
                for _ in range(args.max_steps):
                    if think_s:
                        await asyncio.sleep(think_s)
                    start = time.perf_counter()
                    data = await ask({"type": "step", "data": act(rng, data["observation"])})  # type: ignore[operator]
                    level.latencies.append(time.perf_counter() - start)
                    if data["done"]:
                        break
                level.completed += 1
    except (TimeoutError, Exception) as error:  # noqa: BLE001 - every failure is counted
        name = type(error).__name__ if not isinstance(error, RuntimeError) else str(error)
        level.errors[name] = level.errors.get(name, 0) + 1
        level.attempted += episodes_left


async def run_level(url: str, sessions: int, args: argparse.Namespace, act: object) -> Level:
    level = Level(sessions)
    ws = url.replace("http://", "ws://") + "/ws"
    ramp = min(2.0, sessions / 200)  # connections opened over up to 2 s
    start = time.monotonic()
    await asyncio.gather(
        *(
            client(ws, level, i, args, act, args.think_ms / 1000, start + ramp * i / sessions)
            for i in range(sessions)
        )
    )
    level.seconds = time.monotonic() - start
    return level


async def busy(url: str, clients: int, seconds: float, act: object) -> float:
    """Steps per second ``clients`` sessions get with no think time."""
    ws_url = url.replace("http://", "ws://") + "/ws"
    steps = 0
    stop = time.monotonic() + seconds

    async def one(index: int) -> None:
        nonlocal steps
        rng = random.Random(index)
        async with connect(ws_url, max_size=None) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": index}}))
            data = json.loads(await ws.recv())["data"]
            while time.monotonic() < stop:
                await ws.send(json.dumps({"type": "step", "data": act(rng, data["observation"])}))  # type: ignore[operator]
                data = json.loads(await ws.recv())["data"]
                steps += 1
                if data["done"]:
                    await ws.send(json.dumps({"type": "reset", "data": {"seed": index}}))
                    data = json.loads(await ws.recv())["data"]

    start = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(clients)))
    return steps / (time.monotonic() - start)


def row(name: str, level: Level, in_process: tuple[float, float] | None) -> str:
    errors = ", ".join(f"{k} {v}" for k, v in sorted(level.errors.items())) or "-"
    here = f"{in_process[0]:6.2f} / {in_process[1]:6.2f}" if in_process else "      -        "
    return (
        f"| {name:<22} | {level.sessions:>8} | {level.completed:>5}/{level.attempted:<5} "
        f"({level.share():6.1%}) | {level.quantile(0.5):7.1f} / {level.quantile(0.99):7.1f} | "
        f"{here} | {len(level.latencies) / max(level.seconds, 1e-9):8.0f} | {errors} |"
    )


HEADER = (
    "| env                    | sessions | episodes completed     | step p50 / p99 ms | "
    "in-process p50 / p99 | steps/s  | errors |\n"
    "|---|---|---|---|---|---|---|"
)


def sweep(name: str, url: str, levels: list[int], args, act, here) -> list[Level]:
    done = []
    for sessions in levels:
        if get(url, "/sessions").get("open", 0):
            time.sleep(2)
        level = asyncio.run(run_level(url, sessions, args, act))
        done.append(level)
        print(row(name, level, here), flush=True)
        if level.share() < 0.95:
            break
    return done


def get(url: str, path: str) -> dict:
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=30) as response:
            return dict(json.loads(response.read()))
    except OSError:
        return {}


@contextlib.contextmanager
def echo_server(max_sessions: int) -> Iterator[str]:
    """OpenEnv's echo env (``openenv init``'s template) under the same server as ours."""
    with tempfile.TemporaryDirectory() as folder:
        init = [sys.executable, "-m", "openenv.cli", "init", ECHO_NAME, "-o", folder]
        subprocess.run(init, check=True, capture_output=True, timeout=120)
        command = [sys.executable, __file__, "--serve-echo", folder, "--max-sessions"]
        process = subprocess.Popen([*command, str(max_sessions)], stdout=subprocess.PIPE, text=True)
        try:
            line = process.stdout.readline()  # type: ignore[union-attr]
            assert line.startswith("listening on "), line
            yield line.removeprefix("listening on ").strip()
        finally:
            process.terminate()
            process.wait(timeout=30)


def serve_echo(folder: str, max_sessions: int) -> None:
    """The echo env's server: its own ``create_app`` call, our uvicorn settings."""
    from openenv.core.env_server import create_app
    from openenv.core.env_server.types import ServerMode

    from feedbackgym.serving.app import serve_app

    root = Path(folder) / ECHO_NAME
    sys.path[:0] = [str(root), str(Path(folder))]
    from models import EchoBenchAction, EchoBenchObservation  # type: ignore[import-not-found]
    from server.echo_bench_environment import (  # type: ignore[import-not-found]
        EchoBenchEnvironment,
    )

    app = create_app(
        EchoBenchEnvironment,
        EchoBenchAction,
        EchoBenchObservation,
        max_concurrent_envs=max_sessions,
        mode=ServerMode.PRODUCTION,
    )
    serve_app(app, port=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", default="64,128,256,384,512")
    parser.add_argument("--think-ms", type=float, default=250.0)
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--busy", type=int, default=16)
    parser.add_argument("--busy-s", type=float, default=10.0)
    parser.add_argument("--web", default="feedbackgym/WebForm-v0")
    parser.add_argument("--web-levels", default="1,4,16,32,64")
    parser.add_argument("--skip-web", action="store_true")
    parser.add_argument("--serve-echo", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--max-sessions", type=int, default=1024, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_echo:
        serve_echo(args.serve_echo, args.max_sessions)
        return
    levels = [int(n) for n in args.levels.split(",")]
    most = str(max(levels))
    try:  # the servers' loop too: uvicorn takes uvloop when it is installed
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        loop = "uvloop"
    except ImportError:
        loop = "asyncio"
    print(
        f"{os.cpu_count()} cores; server and clients on this machine; event loop: {loop}; "
        f"think {args.think_ms:g} ms; {args.episodes} episodes of at most {args.max_steps} "
        "steps per session, random actions",
        flush=True,
    )
    ops_here = percentiles(in_process_steps(OPS, 2000, args.max_steps))
    print(HEADER, flush=True)
    with env_server(OPS, "--max-sessions", most, "--idle-timeout", "120") as url:
        ops = sweep(OPS, url, levels, args, env_action, ops_here)
        ops_busy = asyncio.run(busy(url, args.busy, args.busy_s, env_action))
    with echo_server(max(levels)) as url:
        echo = sweep("OpenEnv echo (baseline)", url, levels, args, echo_action, None)
        echo_busy = asyncio.run(busy(url, args.busy, args.busy_s, echo_action))
    web_levels: list[Level] = []
    if not args.skip_web:
        web_here = percentiles(in_process_steps(args.web, 40, args.max_steps))
        web_sizes = [int(n) for n in args.web_levels.split(",")]
        options = ("--max-sessions", str(max(web_sizes)), "--idle-timeout", "120")
        with env_server(args.web, *options) as url:
            web_levels = sweep(args.web, url, web_sizes, args, env_action, web_here)

    def held(done: list[Level], p99: float | None = None) -> str:
        ok = [
            lv.sessions
            for lv in done
            if lv.share() >= 0.95 and (p99 is None or lv.quantile(0.99) <= p99)
        ]
        return str(max(ok)) if ok else "none"

    print()
    print(
        f"no think time, {args.busy} sessions: {OPS} {ops_busy:.0f} steps/s; "
        f"OpenEnv echo {echo_busy:.0f} steps/s"
    )
    print(
        f"most sessions with >= 95% episodes completed: {OPS} {held(ops)} "
        f"(and step p99 <= 50 ms: {held(ops, 50.0)}); OpenEnv echo {held(echo)} "
        f"(p99 <= 50 ms: {held(echo, 50.0)})"
        + (f"; {args.web} {held(web_levels)}" if web_levels else "")
    )


if __name__ == "__main__":
    main()
