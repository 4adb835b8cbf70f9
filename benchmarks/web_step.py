"""Prints web-suite figures: latency, throughput, the floor, expert success, MiniWoB++.

For each task family (through ``gym.make``): the expert's success rate and median
episode length, step latency p50/p99 (every expert step acts in the browser),
reset latency p50/p99, and steps/s of one env, resets included. Then steps/s of
4 envs in an ``AsyncVectorEnv`` (one Chromium per worker process), the floor (a
bare Playwright click plus a DOM read on a one-button page, from the env thread
through the same browser thread), and the same latencies on three MiniWoB++
pages, with a policy that picks uniformly among the actions that hit an
element in view (so every step acts in the browser).

Usage:
    python benchmarks/web_step.py [--episodes 50] [--vector-steps 400]
        [--miniwob-steps 200] [--floor 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

import feedbackgym
from feedbackgym.envs.web.actions import WebAction
from feedbackgym.envs.web.browser import BrowserHost, Page

gym.register_envs(feedbackgym)

FAMILIES = ("feedbackgym/WebCheckout-v0", "feedbackgym/WebForm-v0", "feedbackgym/WebOrderAdmin-v0")
MINIWOB = ("click-button", "click-checkboxes", "enter-text")
FLOOR_PAGE = (
    "<!doctype html><title>floor</title><button id=b onclick='this.textContent++'>0</button>"
)
Policy = Callable[[gym.Env[Any, Any]], int]


def ms(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` (seconds), in milliseconds."""
    return float(np.percentile(np.asarray(values) * 1000.0, q))


def play(env: gym.Env[Any, Any], policy: Policy, *, episodes: int, steps: int) -> dict[str, float]:
    """Plays whole episodes until ``episodes`` or ``steps`` is reached; times steps and resets."""
    step_times: list[float] = []
    reset_times: list[float] = []
    lengths: list[int] = []
    successes = 0
    env.reset(seed=0)  # launches the browser outside the timing,
    env.step(policy(env))  # and acts, so the first timed reset needs a new context too
    start = time.perf_counter()
    while len(lengths) < episodes and sum(lengths) < steps:
        tick = time.perf_counter()
        env.reset(seed=1000 + len(lengths))
        reset_times.append(time.perf_counter() - tick)
        length, done, info = 0, False, {}
        while not done:
            action = policy(env)
            tick = time.perf_counter()
            _, _, terminated, truncated, info = env.step(action)
            step_times.append(time.perf_counter() - tick)
            length += 1
            done = terminated or truncated
        lengths.append(length)
        successes += bool(info["is_success"])
    elapsed = time.perf_counter() - start
    return {
        "episodes": len(lengths),
        "success": successes / len(lengths),
        "median_length": statistics.median(lengths),
        "step_p50": ms(step_times, 50),
        "step_p99": ms(step_times, 99),
        "reset_p50": ms(reset_times, 50),
        "reset_p99": ms(reset_times, 99),
        "steps_per_s": sum(lengths) / elapsed,
    }


def expert(env: gym.Env[Any, Any]) -> int:
    """The env's oracle."""
    return int(env.unwrapped.expert_action())  # type: ignore[attr-defined]


def hitting(seed: int) -> Policy:
    """Uniform over the actions that act on an element in view (goal values only)."""
    rng = np.random.default_rng(seed)

    def act(env: gym.Env[Any, Any]) -> int:
        web = env.unwrapped
        table, fields = web.action_table, web.goal_fields  # type: ignore[attr-defined]
        choices = []
        for element in web.snapshot.elements:  # type: ignore[attr-defined]
            choices.append(table.index(WebAction("click", element.id)))
            verb = {"textbox": "type", "select": "select"}.get(element.role)
            values = table.type_values if verb == "type" else table.select_values
            choices += [table.index(WebAction(verb, element.id, v)) for v in values if v in fields]
        return int(rng.choice(choices or [table.index(WebAction("scroll", direction="down"))]))

    return act


def row(name: str, f: dict[str, float]) -> str:
    """A table row of figures."""
    return (
        f"| {name} | {f['success']:.0%} | {f['median_length']:.0f} | "
        f"{f['step_p50']:.1f} / {f['step_p99']:.1f} | "
        f"{f['reset_p50']:.1f} / {f['reset_p99']:.1f} | {f['steps_per_s']:.1f} |"
    )


HEADER = (
    "| env | success | median length | step p50 / p99 ms | reset p50 / p99 ms | steps/s (1 env) |\n"
    "| --- | --- | --- | --- | --- | --- |"
)


def vector_rate(env_id: str, num_envs: int, steps: int) -> float:
    """Steps/s of ``num_envs`` expert-driven envs in an ``AsyncVectorEnv``."""
    envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="async")
    envs.reset(seed=0)
    envs.step(np.array(envs.call("expert_action")))  # every worker's browser is up
    start = time.perf_counter()
    rounds = max(1, steps // num_envs)
    for _ in range(rounds):
        envs.step(np.array(envs.call("expert_action")))
    rate = rounds * num_envs / (time.perf_counter() - start)
    envs.close()
    return rate


def floor(repeats: int) -> dict[str, tuple[float, float]]:
    """A bare Playwright click plus DOM read, two ways, through the browser thread."""
    host = BrowserHost.acquire()

    async def open_page() -> Page:
        context = await (await host.browser()).new_context()
        page = await context.new_page()
        await page.set_content(FLOOR_PAGE)
        return page

    async def locator_click(page: Page) -> str:
        await page.click("#b")
        return await page.content()

    async def mouse_click(page: Page) -> str:
        await page.mouse.click(20, 15)
        return str(await page.evaluate("document.body.innerText"))

    def timed(call: Callable[[Page], Coroutine[Any, Any, str]], page: Page) -> list[float]:
        times = []
        for _ in range(repeats):
            tick = time.perf_counter()
            host.run(call(page))
            times.append(time.perf_counter() - tick)
        return times

    page = host.run(open_page())
    figures: dict[str, tuple[float, float]] = {}
    for name, call in (
        ("page.click + content", locator_click),
        ("mouse.click + innerText", mouse_click),
    ):
        times = timed(call, page)
        figures[name] = (ms(times, 50), ms(times, 99))
    host.run(page.context.close())
    host.release()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50, help="expert episodes per family")
    parser.add_argument("--vector-steps", type=int, default=400, help="4-env steps (0: skip)")
    parser.add_argument(
        "--miniwob-steps", type=int, default=200, help="steps per MiniWoB++ row (0: skip)"
    )
    parser.add_argument("--floor", type=int, default=300, help="repeats of the floor (0: skip)")
    args = parser.parse_args()
    print(f"load average at the start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)\n")

    print(f"## Task families: the expert, {args.episodes} episodes each\n\n{HEADER}")
    for env_id in FAMILIES:
        env = gym.make(env_id)
        figures = play(env, expert, episodes=args.episodes, steps=10**9)
        print(row(env_id.removeprefix("feedbackgym/"), figures))
        env.close()

    if args.vector_steps:
        print("\n## Steps/s, expert policy (1 env from above; 4 envs in an AsyncVectorEnv)\n")
        print("| env | steps/s (4 envs) |\n| --- | --- |")
        for env_id in FAMILIES:
            rate = vector_rate(env_id, 4, args.vector_steps)
            print(f"| {env_id.removeprefix('feedbackgym/')} | {rate:.1f} |")

    if args.floor:
        print(f"\n## The floor: one-button page, {args.floor} repeats\n")
        print("| call | p50 ms | p99 ms |\n| --- | --- | --- |")
        for name, (p50, p99) in floor(args.floor).items():
            print(f"| {name} | {p50:.1f} | {p99:.1f} |")

    if args.miniwob_steps:
        steps = args.miniwob_steps
        print(f"\n## MiniWoB++ pages: uniform over actions that hit an element, ~{steps} steps")
        print("(prefetch off: no page is made in the background, so steps never share the CPU")
        print("with it, and every reset makes its page)\n")
        print(HEADER)
        for task in MINIWOB:
            for prefetch in (True, False):
                env = gym.make(f"feedbackgym/MiniWoB-{task}-v0", prefetch=prefetch)
                figures = play(env, hitting(0), episodes=10**9, steps=steps)
                print(row(f"MiniWoB-{task}{'' if prefetch else ' (prefetch off)'}", figures))
                env.close()
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
