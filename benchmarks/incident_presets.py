"""OpsIncident's presets: distinct incidents, expert length, expert and random success.

Prints one Markdown row per preset of ``--version`` (2 by default; 1 for v1's
published table), measured in this run::

    python benchmarks/incident_presets.py --episodes 1000 --keys 20000

``--keys`` train-split seeds are drawn for the count of distinct incidents
(their task keys, read on the evaluator's side through
:func:`feedbackgym.protocol.task_key`, as ``compare`` reads them), and a
tenth as many test-split seeds, whose keys must not occur among the train
keys (the overlap column). Expert and random play run on the test split.
"""

from __future__ import annotations

import argparse

import numpy as np

from feedbackgym.envs.incident import DIFFICULTIES, IncidentEnv
from feedbackgym.envs.incident.v2 import IncidentEnvV2
from feedbackgym.rollout import run_episodes
from feedbackgym.training.experiments.task_overlap import task_keys

VERSIONS = {1: IncidentEnv, 2: IncidentEnvV2}


def main() -> None:
    """Measures every preset and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=1000, help="expert and random episodes")
    parser.add_argument("--keys", type=int, default=100_000, help="train seeds for the count")
    parser.add_argument("--version", type=int, default=2, choices=sorted(VERSIONS))
    args = parser.parse_args()
    version = VERSIONS[args.version]
    print(
        "| preset | step limit | distinct train incidents (seeds) | distinct test (seeds) "
        "| test keys in train | expert success | expert steps median [p90, max] "
        "| random success |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for difficulty in DIFFICULTIES:
        train, test = version(difficulty), version(difficulty, split="test")
        train_keys = set(task_keys(train, range(args.keys)))
        test_keys = set(task_keys(test, range(args.keys // 10)))
        expert = list(run_episodes(test, "expert", args.episodes))
        random = [r.success for r in run_episodes(test, "random", args.episodes)]
        lengths = [r.length for r in expert]
        print(
            f"| {difficulty} | {test.step_limit} | {len(train_keys):,} ({args.keys:,}) "
            f"| {len(test_keys):,} ({args.keys // 10:,}) | {len(train_keys & test_keys)} "
            f"| {np.mean([r.success for r in expert]):.1%} "
            f"| {np.median(lengths):.0f} [{np.percentile(lengths, 90):.0f}, {max(lengths)}] "
            f"| {np.mean(random):.1%} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
