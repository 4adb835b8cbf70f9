"""Prints what recording costs the process that steps a trainer's envs, per env step.

On OpsIncident hard with the guide-then-review+shaping stack, ``--num-envs``
stacks are stepped as one :class:`~feedbackgym.baselines.env_workers.EnvWorkers`
group (what an env worker process does each step, random actions, same-step
reset), once without and once with every episode recorded to a
:class:`~feedbackgym.datasets.TrajectoryStore` (one shard per env, as in
worker processes). The two take turns, ``--block`` rounds at a time, and each
is timed by the median of its blocks (the machine's speed drifts; turns
measured side by side do not). The store's last seal at ``close()`` is not
counted: a training run pays it once.

Usage:
    python benchmarks/recorder_in_training.py [--rounds 2000] [--block 50] [--num-envs 32]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from functools import partial

import numpy as np

from feedbackgym.baselines.arms import arm_config
from feedbackgym.baselines.env_workers import EnvWorkers
from feedbackgym.baselines.flat import trainer_env
from feedbackgym.config import FeedbackConfig

ENV_ID = "feedbackgym/OpsIncidentHard-v0"
ARM = "guide-then-review+shaping"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000, help="group steps per setup")
    parser.add_argument("--block", type=int, default=50, help="group steps per turn")
    parser.add_argument("--num-envs", type=int, default=32)
    args = parser.parse_args()
    config = arm_config(ARM, FeedbackConfig(), 16)
    actions = np.random.default_rng(0).integers(0, 70, (args.block, args.num_envs))
    with tempfile.TemporaryDirectory() as tmp:
        setups = {
            name: EnvWorkers([partial(trainer_env, ENV_ID, config, 0, record)] * args.num_envs)
            for name, record in (("stack", None), ("stack + recorder", tmp))
        }
        blocks: dict[str, list[float]] = {name: [] for name in setups}
        try:
            for envs in setups.values():
                envs.reset(seed=0)
            for turn in range(-1, args.rounds // args.block):  # turn -1 warms up
                for name, envs in setups.items():
                    start = time.perf_counter()
                    for step in actions:
                        envs.step_async(0, step)
                        envs.step_wait(0)
                    if turn >= 0:
                        blocks[name].append(time.perf_counter() - start)
        finally:
            for envs in setups.values():
                envs.close()
    per_step = {
        name: statistics.median(times) / (args.block * args.num_envs) * 1e6
        for name, times in blocks.items()
    }
    print(f"{ENV_ID}, {ARM}, {args.num_envs} envs in one group, {args.rounds} rounds")
    for name, micros in per_step.items():
        print(f"{name:<18} {micros:7.1f} us/step")
    plain, recorded = per_step["stack"], per_step["stack + recorder"]
    print(
        f"recorder adds {recorded - plain:.1f} us/step: the stepping process keeps "
        f"{plain / recorded:.2f}x of its rate"
    )


if __name__ == "__main__":
    main()
