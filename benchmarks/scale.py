"""Prints a comparison's throughput on a one-node and a two-node Ray cluster (1 CPU each).

The same small comparison (``--arms`` × ``--seeds`` runs of ``--steps`` env
steps on OpsIncident easy, the torch trainer) runs through
:func:`~feedbackgym.training.experiments.ray_runs.run_on_ray` on a fresh
``ray.cluster_utils.Cluster`` with one node, then on one with two; each node
has one CPU and each run asks for one. Before the clock starts, one task per
CPU imports the trainer, so that both clusters start with warm workers.
Throughput is env steps of all runs over the comparison's wall time; the
figure printed is the ratio, whose goal is >= 1.7x. Both nodes are on this
machine, so the ratio is only as good as its cores are free.

Usage:
    python benchmarks/scale.py [--arms sparse,shaping] [--seeds 2] [--steps 65536]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

from feedbackgym.training.experiments.compare import ComparisonConfig
from feedbackgym.training.experiments.ray_runs import RayOptions, run_on_ray

ENV_ID = "feedbackgym/OpsIncidentEasy-v0"
N_ENVS, N_STEPS = 4, 128


def _warm() -> str:
    import feedbackgym.training.torch_ppo.run_torch  # noqa: F401  (torch, the trainer, the envs)

    return ray.get_runtime_context().get_node_id()


def throughput(nodes: int, arms: list[str], seeds: int, steps: int) -> tuple[float, float]:
    """Env steps per second of the comparison on ``nodes`` one-CPU nodes, and its seconds."""
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        warm = ray.remote(num_cpus=1)(_warm)
        assert len(set(ray.get([warm.remote() for _ in range(nodes)]))) == nodes
        with tempfile.TemporaryDirectory() as out:
            config = ComparisonConfig(
                env_id=ENV_ID,
                arms=arms,
                seeds=seeds,
                steps=steps,
                out=out,
                n_envs=N_ENVS,
                n_steps=N_STEPS,
                eval_episodes=4,
            )
            runs = config.run_configs()
            started = time.perf_counter()
            run_on_ray(runs, RayOptions())
            seconds = time.perf_counter() - started
            assert all((Path(run.out_dir) / "state.json").exists() for run in runs)
        return len(runs) * config.steps / seconds, seconds
    finally:
        ray.shutdown()
        cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arms", default="sparse,shaping")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=65536, help="env steps per run")
    args = parser.parse_args()
    arms = args.arms.split(",")
    runs = len(arms) * args.seeds
    print(f"{runs} runs of {args.steps} steps ({ENV_ID}, {N_ENVS} envs x {N_STEPS} steps a round)")
    results = {}
    for nodes in (1, 2):
        rate, seconds = throughput(nodes, arms, args.seeds, args.steps)
        results[nodes] = rate
        print(f"{nodes} node(s), 1 CPU each: {seconds:6.1f} s, {rate:7.0f} steps/s")
    print(f"2 nodes / 1 node: {results[2] / results[1]:.2f}x (goal >= 1.7x)")


if __name__ == "__main__":
    main()
