"""Measures the LLM guide and reviewer on the packaged model: parse rate, agreement, latency.

The requests are the ones the wrappers make on OpsIncident easy (text
observations): the built-in guide and reviewer answer them while expert and
random episodes are played, and each request is kept. Then the packaged model
(Gemma 3 270M base, Q4_K_M, on the local llama.cpp server ``feedbackgym
agent`` starts) answers each with :class:`~feedbackgym.feedback.llm.LLMGuide`
and :class:`~feedbackgym.feedback.llm.LLMReviewer`, held to their schemas
(``--constrain``), no cache. Printed: the parse rate (replies that gave a hint
or review), the agreement of the LLM guide's first subgoal (and whole answer)
with the built-in guide's, latency p50/p99/max, and how many replies came
within ``--deadline`` seconds.

Usage:
    PYTHONPATH=. python benchmarks/llm_feedback.py [--episodes 2] [--max-steps 6]
        [--guides 12] [--reviews 4] [--constrain grammar] [--deadline 30] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import gymnasium as gym
import numpy as np

import feedbackgym  # noqa: F401 (registers the envs)
from feedbackgym.core import Hint, Review
from feedbackgym.feedback import GuideRequest, ReviewRequest, SubgoalGuide, TrajectoryReviewer
from feedbackgym.feedback.llm import LLMGuide, LLMReviewer
from feedbackgym.language.model_server import ModelServer
from feedbackgym.wrappers import AddGuide, AddReview

ENV_ID = "feedbackgym/OpsIncidentEasy-v0"


class _Keeping:
    """The built-in guide and reviewer, keeping each request and answer."""

    def __init__(self) -> None:
        self.guide, self.reviewer = SubgoalGuide(), TrajectoryReviewer()
        self.hints: list[tuple[GuideRequest, Hint | None]] = []
        self.reviews: list[tuple[ReviewRequest, Review | None]] = []

    def hint(self, request: GuideRequest) -> Hint | None:
        hint = self.guide.hint(request)
        self.hints.append((request, hint))
        return hint

    def review(self, request: ReviewRequest) -> Review | None:
        review = self.reviewer.review(request)
        self.reviews.append((request, review))
        return review


def _requests(episodes: int, max_steps: int) -> _Keeping:
    """Plays ``episodes`` expert and as many random episodes; keeps the generators' requests."""
    keeping = _Keeping()
    for policy in ("expert", "random"):
        env = gym.make(ENV_ID, obs_mode="text", max_episode_steps=max_steps)
        env = AddReview(AddGuide(env, guide=keeping, dropout=0.0), reviewer=keeping)
        rng = np.random.default_rng(0)
        for seed in range(episodes):
            env.reset(seed=seed)
            done = False
            while not done:
                unwrapped: Any = env.unwrapped
                action = (
                    unwrapped.expert_action()
                    if policy == "expert"
                    else int(rng.integers(len(unwrapped.action_meanings)))
                )
                *_, terminated, truncated, _ = env.step(action)
                done = terminated or truncated
        env.close()
    return keeping


def _spread(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return f"p50 {statistics.median(ordered):.2f} s, p99 {p99:.2f} s, max {ordered[-1]:.2f} s"


def main() -> None:
    """Prints the figures, and one JSON line with them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2, help="expert and random episodes each")
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--guides", type=int, default=12, help="guide requests asked (at most)")
    parser.add_argument("--reviews", type=int, default=4, help="review requests asked (at most)")
    parser.add_argument("--constrain", default="grammar", choices=("grammar", "json", "none"))
    parser.add_argument("--deadline", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds a call may take")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()

    keeping = _requests(args.episodes, args.max_steps)
    seen: set[str] = set()
    hints = []
    for request, hint in keeping.hints:  # one of each prompt: the step is not in it
        key = json.dumps([request.progress, request.text], sort_keys=True)
        if hint is not None and key not in seen:
            seen.add(key)
            hints.append((request, hint))
    hints = hints[: args.guides]
    reviews = keeping.reviews[: args.reviews]
    with ModelServer(threads=args.threads) as server:
        print(server.describe(), flush=True)
        options = {"timeout_s": args.timeout, "cache_size": 0, "constrain": args.constrain}
        guide = LLMGuide(server.base_url, server.model.name, **options)  # type: ignore[arg-type]
        reviewer = LLMReviewer(server.base_url, server.model.name, **options)  # type: ignore[arg-type]
        guide_times, first, whole, parsed = [], 0, 0, 0
        for request, reference in hints:
            start = time.perf_counter()
            got = guide.hint(request)
            guide_times.append(time.perf_counter() - start)
            if got is not None:
                parsed += 1
                first += got.subgoal_ids[0] == reference.subgoal_ids[0]
                whole += got.subgoal_ids == reference.subgoal_ids
            print(
                f"guide: {list(got.subgoal_ids) if got else None} built-in "
                f"{list(reference.subgoal_ids)} {guide_times[-1]:.2f} s",
                flush=True,
            )
        review_times, reviewed = [], 0
        for request, _ in reviews:
            start = time.perf_counter()
            review = reviewer.review(request)
            review_times.append(time.perf_counter() - start)
            reviewed += review is not None
            print(
                f"review: {review.text[:160] if review else None!r} {review_times[-1]:.2f} s",
                flush=True,
            )
    figures = {
        "constrain": args.constrain,
        "guide_calls": len(hints),
        "guide_parsed": parsed,
        "guide_first_agrees": first,
        "guide_whole_agrees": whole,
        "guide_latency": _spread(guide_times),
        "guide_within_deadline": sum(t <= args.deadline for t in guide_times),
        "review_calls": len(reviews),
        "review_parsed": reviewed,
        "review_latency": _spread(review_times),
        "review_within_deadline": sum(t <= args.deadline for t in review_times),
        "guide_failures": dict(guide.failures),
        "review_failures": dict(reviewer.failures),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
