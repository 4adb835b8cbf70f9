"""Prints steps/s of 1 web env and of 4 in worker processes, lockstep and as ready, and the ratios.

Every env is the same stack: the web env, a wrapper that plays the env's own
expert whatever action it is given (so every step acts in the browser and no
action crosses a pipe for the policy), and the torch trainer's
:class:`~feedbackgym.training.common.trainer_view.TrainerView` (one flat observation). Rows:

* ``1 env``: stepped in this process (its own Chromium);
* ``4 envs, AsyncVectorEnv``: Gymnasium's vector env in worker processes
  (shared memory, same-step autoreset), stepped in lockstep: every step waits
  for the slowest of the four;
* ``4 envs, EnvWorkers, lockstep``: the torch trainer's workers, one env a
  worker, each step waiting for all four (the loop's old order);
* ``4 envs, EnvWorkers, as ready``: the same workers, each env stepped again as
  soon as its last step is back (``EnvWorkers.step_wait_any``, what the torch
  trainer's rounds do).

The rows take turns ``--repeats`` times (a block of ``--seconds`` each, the order
rotated), so a change in the machine's load falls on every row; each row's best
block is printed with the ratio to the best ``1 env`` block. Each worker has its
own Chromium; they are up and warm before any timing. Beside steps/s, each row
gives the CPU time its processes (this one, the workers, Playwright's drivers,
the Chromiums) spent per step and how many cores that kept busy: on a machine
shared with other work, more processes win a larger share of the cores, so the
ratio there is higher than on an idle machine, where ``cores / (1 env's cores
busy)`` bounds it.

With ``--browsers`` the rows are instead, for each of Debian's Chromium builds
installed (the full browser, ``/usr/bin/chromium``, and the headless shell,
``/usr/bin/chromium-headless-shell``): ``1 env`` and ``4 envs as ready``, each in
worker processes launched with that build; the ratios are to the first row
(the full browser's ``1 env`` when it is installed).

Usage:
    python benchmarks/web_vector.py [--env feedbackgym/WebCheckout-v0] [--seconds 15]
        [--repeats 3] [--envs 4] [--browsers]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

import feedbackgym
from feedbackgym.envs.web.executable import CHROMIUM_ENV, DEFAULT_CHROMIUM, HEADLESS_SHELL
from feedbackgym.training.common.trainer_view import TrainerView
from feedbackgym.training.workers.env_groups import EnvWorkers

gym.register_envs(feedbackgym)


class ExpertActs(gym.ActionWrapper[Any, Any, Any]):
    """Replaces every action with the env's expert action (a stand-in for a policy)."""

    def action(self, action: Any) -> int:
        """The expert's next action, whatever was asked."""
        return int(self.env.unwrapped.expert_action())  # type: ignore[attr-defined]


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds of ``root`` and its descendants, the exited ones included (Linux ``/proc``).

    A process's exited children count in its ``cutime``/``cstime`` once it has
    reaped them, so a Chromium renderer that closed during a block still counts.
    """
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                stat = file.read()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(value) for value in fields[11:15]) / tick
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo += [child for child, parent in parents.items() if parent == pid]
    return total


def build(env_id: str) -> TrainerView:
    """The benchmarked stack: the env, the expert in place of the policy, the trainer's view."""
    return TrainerView(ExpertActs(gym.make(env_id)))


def one_env(env_id: str) -> Callable[[float], float]:
    """A timed block of one env in this process (steps/s)."""
    env = build(env_id)
    env.reset(seed=0)

    def block(seconds: float) -> float:
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            _, _, terminated, truncated, _ = env.step(0)
            steps += 1
            if terminated or truncated:
                env.reset()
        return steps / (time.perf_counter() - start)

    block(2.0)  # the browser up, spare pages made
    block.close = env.close  # type: ignore[attr-defined]
    return block


def async_vector(env_id: str, n: int) -> Callable[[float], float]:
    """A timed block of Gymnasium's ``AsyncVectorEnv`` of ``n`` envs (lockstep)."""
    envs = gym.vector.AsyncVectorEnv(
        [partial(build, env_id)] * n, context="spawn", autoreset_mode="SameStep"
    )
    envs.reset(seed=0)
    actions = np.zeros(n, np.int64)

    def block(seconds: float) -> float:
        rounds, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            envs.step(actions)
            rounds += 1
        return rounds * n / (time.perf_counter() - start)

    block(2.0)
    block.close = envs.close  # type: ignore[attr-defined]
    return block


def env_workers(
    env_id: str, n: int, *, as_ready: bool, chromium: str | None = None
) -> Callable[[float], float]:
    """A timed block of :class:`EnvWorkers` (one env a worker), lockstep or as ready.

    ``chromium``: the executable the workers launch (default: the configured one).
    """
    before = os.environ.get(CHROMIUM_ENV)
    if chromium:
        os.environ[CHROMIUM_ENV] = chromium  # the workers inherit it
    try:
        envs = EnvWorkers([partial(build, env_id)] * n, groups=n, processes=n)
    finally:
        if before is None:
            os.environ.pop(CHROMIUM_ENV, None)
        else:
            os.environ[CHROMIUM_ENV] = before
    envs.reset(seed=0)
    action = np.zeros(1, np.int64)

    def block(seconds: float) -> float:
        steps, start = 0, time.perf_counter()
        for group in range(n):
            envs.step_async(group, action)
        while time.perf_counter() - start < seconds:
            if as_ready:
                group, _ = envs.step_wait_any()
                envs.step_async(group, action)
                steps += 1
            else:
                for group in range(n):
                    envs.step_wait(group)
                for group in range(n):
                    envs.step_async(group, action)
                steps += n
        elapsed = time.perf_counter() - start
        for group in range(n):  # the steps in flight are not counted
            envs.step_wait(group)
        return steps / elapsed

    block(2.0)
    block.close = envs.close  # type: ignore[attr-defined]
    return block


def main(argv: list[str] | None = None) -> None:
    """Measures each row in turns and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="feedbackgym/WebCheckout-v0")
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds a block")
    parser.add_argument("--repeats", type=int, default=3, help="blocks a row")
    parser.add_argument("--envs", type=int, default=4, help="envs in worker processes")
    parser.add_argument(
        "--browsers", action="store_true", help="compare Debian's full Chromium and headless shell"
    )
    args = parser.parse_args(argv)
    n = args.envs
    print(f"{args.env}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    rows: dict[str, Callable[[float], float]] = {}
    try:
        if args.browsers:
            for label, path in (("full", DEFAULT_CHROMIUM), ("headless shell", HEADLESS_SHELL)):
                if not os.path.isfile(path):
                    print(f"{label}: not installed at {path}, left out")
                    continue
                rows[f"1 env, {label}"] = env_workers(args.env, 1, as_ready=True, chromium=path)
                rows[f"{n} envs as ready, {label}"] = env_workers(
                    args.env, n, as_ready=True, chromium=path
                )
            if not rows:
                raise SystemExit("web_vector.py --browsers: neither Chromium build is installed")
        else:
            rows["1 env"] = one_env(args.env)
            rows[f"{n} envs, AsyncVectorEnv (lockstep)"] = async_vector(args.env, n)
            rows[f"{n} envs, EnvWorkers, lockstep"] = env_workers(args.env, n, as_ready=False)
            rows[f"{n} envs, EnvWorkers, as ready"] = env_workers(args.env, n, as_ready=True)
        rates: dict[str, list[float]] = {name: [] for name in rows}
        cpu: dict[str, list[tuple[float, float, float]]] = {name: [] for name in rows}
        names = list(rows)
        for repeat in range(args.repeats):
            turn = names[repeat % len(names) :] + names[: repeat % len(names)]
            for name in turn:
                used, start = tree_cpu_seconds(os.getpid()), time.perf_counter()
                rate = rows[name](args.seconds)
                wall = time.perf_counter() - start
                rates[name].append(rate)
                cpu[name].append((tree_cpu_seconds(os.getpid()) - used, wall, rate * wall))
    finally:
        for block in rows.values():
            block.close()  # type: ignore[attr-defined]
    base = max(next(iter(rates.values())))
    print(
        f"\n| run | steps/s (best of {args.repeats}) | each block | ratio to {names[0]} "
        "| CPU ms/step | cores busy |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for name, values in rates.items():
        each = ", ".join(f"{v:.1f}" for v in values)
        seconds, wall, steps = (sum(block[k] for block in cpu[name]) for k in range(3))
        print(
            f"| {name} | {max(values):.1f} | {each} | {max(values) / base:.2f}x "
            f"| {1000 * seconds / steps:.0f} | {seconds / wall:.2f} |"
        )
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
