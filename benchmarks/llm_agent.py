"""Prints the LLM agent's speed with the packaged model, beside the stand-in server's, in one run.

* the packaged model (Gemma 3 270M base, Q4_K_M) on the local llama.cpp server
  that ``feedbackgym agent`` starts: prompt processing and generation tokens/s
  (a prompt not seen before, then 128 tokens generated after it);
* ``feedbackgym agent``'s loop on OpsIncident easy (hints from the built-in
  guide, reviews from the built-in reviewer, replies held to the env's actions
  by a grammar, prompts sized to the context): step latency p50 and p99 (the
  model's reply), episodes per minute, invalid replies, fallbacks, success,
  the largest prompt in tokens and how often the prompt window dropped steps;
  once with the default ``--turns delta`` (later user turns carry only the
  observation's new lines, so each prompt extends the one before and
  llama.cpp's cache holds the episode so far) and once with ``--turns full``
  (every observation whole), the same seeds on the same server;
* the same loop against the stand-in chat server (not a language model: it
  answers the expert's action), whose figures are the loop's own cost.

Usage:
    python benchmarks/llm_agent.py [--episodes 3] [--max-steps N] [--threads N] [--seed 0]
        [--adapter PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import feedbackgym  # noqa: F401 (registers the envs)
from feedbackgym.chat import ChatClient
from feedbackgym.language.agent_loop import AgentResult, prompt_budget, run_agent
from feedbackgym.language.model_server import DEFAULT_CONTEXT, ModelServer, served_adapter
from feedbackgym.language.prompt_window import PromptWindow, token_counter
from feedbackgym.language.stand_in_server import stand_in_server

ENV_ID = "feedbackgym/OpsIncidentEasy-v0"
GENERATED = 128


class TimedClient(ChatClient):
    """A chat client that keeps each reply's wall time and each prompt's size in tokens."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.latencies: list[float] = []
        self.prompt_tokens: list[int] = []
        self._window = PromptWindow(1, token_counter(self.base_url, self.model))

    def reply(self, messages: Sequence[Mapping[str, str]], **kwargs: Any) -> str:
        """The reply, timed."""
        self.prompt_tokens.append(self._window.size(messages))  # before the clock starts
        start = time.perf_counter()
        try:
            return super().reply(messages, **kwargs)
        finally:
            self.latencies.append(time.perf_counter() - start)


def _post(base_url: str, route: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    request = urllib.request.Request(
        base_url + route, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as response:
        data = json.load(response)
    return data, time.perf_counter() - start


def token_speeds(base_url: str, model: str, repeats: int = 3) -> tuple[float, float]:
    """Prompt processing and generation tokens/s (medians of ``repeats``)."""
    prompt_speeds, generation_speeds = [], []
    for n in range(repeats):
        words = " ".join(
            f"incident {n}-{i} on host{i % 7} cleared after restart" for i in range(60)
        )
        body = {"model": model, "prompt": words, "max_tokens": 1, "temperature": 0.0}
        data, seconds = _post(base_url, "/completions", body)  # a prompt not seen before
        prompt_speeds.append(data["usage"]["prompt_tokens"] / seconds)
        body = {**body, "max_tokens": GENERATED, "stop": []}  # the prompt is cached now
        data, seconds = _post(base_url, "/completions", body)
        generation_speeds.append(data["usage"]["completion_tokens"] / seconds)
    return statistics.median(prompt_speeds), statistics.median(generation_speeds)


def play(
    client: TimedClient,
    episodes: int,
    seed: int,
    env_kwargs: dict[str, Any],
    context: int | None = DEFAULT_CONTEXT,
    turns: str = "delta",
) -> dict[str, Any]:
    """Plays the episodes; returns the loop's figures."""
    results: list[AgentResult] = []
    start = time.perf_counter()
    for result in run_agent(
        ENV_ID,
        client,
        episodes=episodes,
        seed=seed,
        env_kwargs=env_kwargs,
        context=context,
        turns=turns,
    ):
        results.append(result)
    minutes = (time.perf_counter() - start) / 60
    latencies = np.array(client.latencies) * 1000
    return {
        "counted_by": client._window.counter.name,
        "largest_prompt": max(client.prompt_tokens),
        "steps": sum(r.length for r in results),
        "p50_ms": float(np.percentile(latencies, 50)),
        "p99_ms": float(np.percentile(latencies, 99)),
        "episodes_per_min": len(results) / minutes,
        "invalid": sum(r.invalid_replies for r in results),
        "fallbacks": sum(r.fallbacks for r in results),
        "success": sum(r.success for r in results) / len(results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=None, help="cap each episode's length")
    parser.add_argument("--threads", type=int, default=None, help="the server's (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--adapter", default=None, help="a LoRA adapter the model plays with")
    args = parser.parse_args()
    env_kwargs = {} if args.max_steps is None else {"max_episode_steps": args.max_steps}
    print(f"{os.cpu_count()} CPU cores; {ENV_ID}, {args.episodes} episodes from seed {args.seed}")
    rows = []
    lora = served_adapter(args.adapter) if args.adapter else None
    with ModelServer(threads=args.threads, lora=lora) as server:
        print(server.describe())
        prompt_tps, generation_tps = token_speeds(server.base_url, server.model.name)
        print(
            f"packaged model: prompt processing {prompt_tps:.0f} tokens/s, "
            f"generation {generation_tps:.0f} tokens/s"
        )
        for turns in ("delta", "full"):
            client = TimedClient(server.base_url, server.model.name, timeout_s=120)
            row = play(client, args.episodes, args.seed, env_kwargs, turns=turns)
            rows.append((f"{server.model.name}, --turns {turns}", row))
    with stand_in_server() as url:
        client = TimedClient(url, "stand-in", timeout_s=120)
        # the whole chat: the stand-in replays it to find the expert's action
        row = play(client, args.episodes, args.seed, env_kwargs, context=None)
        rows.append(("stand-in (expert)", row))
    print(
        f"the packaged model's prompts sized to a {DEFAULT_CONTEXT}-token context "
        f"(at most {prompt_budget(DEFAULT_CONTEXT)} tokens a prompt); the stand-in gets the "
        "whole chat"
    )
    print(
        "| model | steps | step p50 ms | step p99 ms | episodes/min | invalid | fallbacks "
        "| success | largest prompt |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, row in rows:
        print(
            f"| {name} | {row['steps']} | {row['p50_ms']:.0f} | {row['p99_ms']:.0f} "
            f"| {row['episodes_per_min']:.1f} | {row['invalid']} | {row['fallbacks']} "
            f"| {row['success']:.0%} | {row['largest_prompt']} ({row['counted_by']}) |"
        )


if __name__ == "__main__":
    main()
