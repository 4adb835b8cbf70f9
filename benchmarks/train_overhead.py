"""Prints SB3 PPO's wall time with the full feedback stack and the recorder beside plain PPO.

Both run on OpsIncident in the same process, interleaved, best of ``--repeats``,
with two policy networks: SB3's default (64, 64) and the (128, 128) that
``feedbackgym compare`` trains (``runner.DEFAULT_NET_ARCH``).

The full stack is the guide-then-review+shaping arm (shaping, hints, reviews, the schedule
driven by a :class:`~feedbackgym.control.FeedbackController` through
:func:`~feedbackgym.training.sb3.callbacks.feedback_callbacks`) with every
episode recorded to an HDF5 store by ``RecordTrajectories``.

Usage:
    python benchmarks/train_overhead.py [--steps 8192] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import gymnasium as gym
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

import feedbackgym
from feedbackgym.config import FeedbackConfig, merge_config
from feedbackgym.control import FeedbackController
from feedbackgym.datasets import TrajectoryStore
from feedbackgym.training.common.arms import arm_config
from feedbackgym.training.sb3.callbacks import feedback_callbacks
from feedbackgym.training.sb3.run_sb3 import DEFAULT_NET_ARCH

gym.register_envs(feedbackgym)
ENV_ID = "feedbackgym/OpsIncidentMedium-v0"
N_ENVS, N_STEPS = 8, 128
NETWORKS = {"SB3 default (64, 64)": (64, 64), f"compare's {DEFAULT_NET_ARCH}": DEFAULT_NET_ARCH}


def wall_time(full: bool, steps: int, store_dir: str, net_arch: list[int]) -> float:
    """Seconds PPO takes for ``steps`` env steps, raw or with the full stack."""
    rounds = steps // (N_ENVS * N_STEPS)
    store = TrajectoryStore(store_dir) if full else None
    fixed = merge_config(FeedbackConfig(), {"schedule": {"fade": 1, "adaptive": None}})
    config = arm_config("guide-then-review+shaping", fixed, rounds)

    def make() -> Any:
        if not full:
            return gym.make(ENV_ID)
        return feedbackgym.make(ENV_ID, config, record=store)

    venv = VecMonitor(DummyVecEnv([make] * N_ENVS))
    model = PPO(
        "MultiInputPolicy",
        venv,
        n_steps=N_STEPS,
        batch_size=256,
        policy_kwargs={"net_arch": net_arch},
        seed=0,
        device="cpu",
    )
    model.set_logger(Logger(None, []))  # SB3's default logger makes a folder per run in /tmp
    callback = feedback_callbacks(FeedbackController(config)) if full else None
    start = time.perf_counter()
    model.learn(steps, callback=callback)
    elapsed = time.perf_counter() - start
    venv.close()
    if store is not None:
        store.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    best = {(net, full): float("inf") for net in NETWORKS for full in (False, True)}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for run, (net, full) in enumerate(best):
                store_dir = f"{tmp}/store{repeat}-{run}"
                seconds = wall_time(full, args.steps, store_dir, list(NETWORKS[net]))
                best[net, full] = min(best[net, full], seconds)
    print(f"SB3 PPO, {ENV_ID}, {args.steps} steps, {N_ENVS} envs, 1 torch thread")
    print(f"{'policy network':<22} {'setup':<44} {'wall s':>8} {'vs raw':>8}")
    for net in NETWORKS:
        raw, full = best[net, False], best[net, True]
        print(f"{net:<22} {'plain PPO, raw env':<44} {raw:>8.2f} {1.0:>7.2f}x")
        name = "PPO + feedback stack + callback + recorder"
        print(f"{net:<22} {name:<44} {full:>8.2f} {full / raw:>7.2f}x")


if __name__ == "__main__":
    main()
