"""Trains the torch trainer 200k steps on CUDA and prints steps/s and the GPU's share.

On OpsIncident hard with the guide-then-review+shaping stack, 16 envs in this process,
``device="cuda"``: the learner on the GPU, the envs on the CPU. Per round it
samples :class:`~feedbackgym.training.common.system_metrics.SystemMonitor` (the GPU's
utilisation and used memory, through NVML); at the end it prints the overall steps/s, the wall
time, and the mean and peak GPU utilisation and memory. The goal on a machine
with a GPU: 200k steps in under 5 minutes. Without a CUDA GPU it says so and
exits with status 2 (no test needs a GPU).

Usage:
    python benchmarks/gpu_check.py [--steps 200000] [--num-envs 16]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from feedbackgym.training.torch_ppo.ppo import PPOConfig, train

ENV_ID = "feedbackgym/OpsIncidentHard-v0"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--num-envs", type=int, default=16)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU on this machine: nothing to check", file=sys.stderr)
        return 2
    config = PPOConfig(
        ENV_ID,
        "guide-then-review+shaping",
        total_steps=args.steps,
        n_envs=args.num_envs,
        device="cuda",
    )
    rounds: list[dict[str, float]] = []
    start = time.perf_counter()
    train(config, on_round=lambda _, metrics: rounds.append(metrics))
    wall = time.perf_counter() - start
    steps = config.rounds * config.n_envs * config.n_steps
    print(f"{torch.cuda.get_device_name()}: {steps} steps in {wall:.1f} s ({steps / wall:.0f}/s)")
    print(f"goal: 200k steps in under 5 minutes: {'met' if wall < 300 else 'missed'}")
    for key in ("gpu_util_percent", "gpu_memory_mb"):
        values = [r[key] for r in rounds if key in r]
        if values:
            print(f"{key}: mean {np.mean(values):.1f}, peak {np.max(values):.1f}")
        else:
            print(f"{key}: not reported (NVML: nvidia-ml-py, or the driver's library, missing)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
