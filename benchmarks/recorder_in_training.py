"""Prints what recording costs the process that steps a trainer's envs, per env step.

On OpsIncident hard with the guide-then-review+shaping stack, ``--num-envs``
stacks are stepped as one :class:`~feedbackgym.training.workers.env_groups.EnvWorkers`
group (what an env worker process does each step, random actions, same-step
reset): without recording; with every episode recorded to a
:class:`~feedbackgym.datasets.TrajectoryStore` in the stepping process (one
shard per env, as worker processes given a path do); and recorded through a
writer process (``TrajectoryStore(path, writer="process")``, one store for the
group). The setups take turns, ``--block`` rounds at a time, and each is timed
by the median of its blocks, in wall time and in the stepping process's CPU
time (the machine's speed drifts, and other work on it stretches wall time;
turns measured side by side do not drift apart). The writer processes' CPU
time is read once they have exited. The stores' last seal at ``close()`` is
not counted in the stepping process: a training run pays it once.

Usage:
    python benchmarks/recorder_in_training.py [--rounds 2000] [--block 50] [--num-envs 32]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from functools import partial

import numpy as np

from feedbackgym.config import FeedbackConfig
from feedbackgym.datasets import TrajectoryStore
from feedbackgym.training.common.arms import arm_config
from feedbackgym.training.common.trainer_view import trainer_env
from feedbackgym.training.workers.env_groups import EnvWorkers

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
    blocks: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        records = {
            "stack": None,
            "stack + recorder": f"{tmp}/thread",
            "stack + writer process": TrajectoryStore(f"{tmp}/process", writer="process"),
        }
        setups = {
            name: EnvWorkers([partial(trainer_env, ENV_ID, config, 0, record)] * args.num_envs)
            for name, record in records.items()
        }
        blocks = {name: [] for name in setups}
        try:
            for envs in setups.values():
                envs.reset(seed=0)
            for turn in range(-1, args.rounds // args.block):  # turn -1 warms up
                for name, envs in setups.items():
                    start, cpu = time.perf_counter(), time.process_time()
                    for step in actions:
                        envs.step_async(0, step)
                        envs.step_wait(0)
                    if turn >= 0:
                        times = (time.perf_counter() - start, time.process_time() - cpu)
                        blocks[name].append(times)
                if turn == -1:
                    writer_start = _cpu_seconds(records["stack + writer process"])
            writer_steady = _cpu_seconds(records["stack + writer process"]) - writer_start
        finally:
            for envs in setups.values():
                envs.close()
            store = records["stack + writer process"]
            assert isinstance(store, TrajectoryStore)
            store.close()
    writer_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    steps = (args.rounds // args.block + 1) * args.block * args.num_envs
    timed_steps = (args.rounds // args.block) * args.block * args.num_envs
    per_step = {
        name: [
            statistics.median(t[i] for t in times) / (args.block * args.num_envs) * 1e6
            for i in (0, 1)
        ]
        for name, times in blocks.items()
    }
    print(f"{ENV_ID}, {ARM}, {args.num_envs} envs in one group, {args.rounds} rounds")
    print(f"{'setup':<24} {'wall us/step':>12} {'CPU us/step':>12}")
    for name, (wall, cpu) in per_step.items():
        print(f"{name:<24} {wall:12.1f} {cpu:12.1f}")
    plain = per_step["stack"]
    for name in ("stack + recorder", "stack + writer process"):
        wall, cpu = per_step[name]
        print(
            f"{name}: +{wall - plain[0]:.1f} us/step wall, +{cpu - plain[1]:.1f} us/step CPU "
            f"in the stepping process (keeps {plain[0] / wall:.2f}x wall, "
            f"{plain[1] / cpu:.2f}x CPU)"
        )
    children = (writer_cpu.ru_utime + writer_cpu.ru_stime) / steps * 1e6
    print(
        f"writer process CPU: {writer_steady / timed_steps * 1e6:.1f} us/step after the warm-up "
        f"turn; {children:.1f} us/step in all (start-up and the final seal included)"
    )


def _cpu_seconds(store: object) -> float:
    """CPU seconds the writer process of ``store`` has used so far (from ``/proc``; 0: none)."""
    assert isinstance(store, TrajectoryStore)
    if store._process is None:
        return 0.0
    with open(f"/proc/{store._process.pid}/stat") as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
