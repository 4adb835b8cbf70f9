"""Prints OpsIncident steps/s (each difficulty, vector and text) beside CartPole-v1.

Both go through ``gym.make`` with their registered wrappers, take uniformly
random actions and reset when an episode ends, in the same run. The ratio is
OpsIncident's steps/s over CartPole's.

Usage:
    python benchmarks/ops_step.py [--steps 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import feedbackgym
from feedbackgym.envs.ops import DIFFICULTIES

gym.register_envs(feedbackgym)


def steps_per_second(env_id: str, steps: int, repeats: int, **kwargs: object) -> float:
    """Best steps/s over ``repeats`` runs of ``steps`` random steps."""
    env = gym.make(env_id, **kwargs)
    rng = np.random.default_rng(0)
    n_actions = int(env.action_space.n)  # type: ignore[attr-defined]
    best = 0.0
    for _ in range(repeats):
        env.reset(seed=0)
        actions = rng.integers(n_actions, size=steps)
        start = time.perf_counter()
        for action in actions:
            _, _, terminated, truncated, _ = env.step(int(action))
            if terminated or truncated:
                env.reset()
        best = max(best, steps / (time.perf_counter() - start))
    env.close()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cartpole = steps_per_second("CartPole-v1", args.steps, args.repeats)
    print(f"{'env':<34} {'obs':<7} {'steps/s':>10} {'vs CartPole':>12}")
    print(f"{'CartPole-v1':<34} {'-':<7} {cartpole:>10.0f} {1.0:>11.2f}x")
    for difficulty in DIFFICULTIES:
        for obs_mode in ("vector", "text"):
            rate = steps_per_second(
                "feedbackgym/OpsIncident-v0",
                args.steps,
                args.repeats,
                difficulty=difficulty,
                obs_mode=obs_mode,
            )
            name = f"OpsIncident-v0 ({difficulty})"
            print(f"{name:<34} {obs_mode:<7} {rate:>10.0f} {rate / cartpole:>11.2f}x")


if __name__ == "__main__":
    main()
