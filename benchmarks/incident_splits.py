"""How much of OpsIncident's test split repeats training: maps, shapes, incidents, solutions.

For each preset it draws train seeds and test seeds (easy: 100,000 and 10,000;
the others 20,000 and 2,000 by default) of v1 and of v2 in the same run, and
prints, per version, how many test seeds share with some train seed their
service map (names and call graph), their shape (the role-labelled call graph
up to isomorphism), their incident key and their solution key (a *solution
twin*: solved by a train incident's actions, up to names). Counted on the
evaluator's side (:mod:`feedbackgym.envs.incident.overlap`)::

    python benchmarks/incident_splits.py
    python benchmarks/incident_splits.py --scale 0.1 --versions 2   # a quick look
"""

from __future__ import annotations

import argparse
import time

from feedbackgym.envs.incident import DIFFICULTIES, IncidentEnv
from feedbackgym.envs.incident.overlap import count_overlap
from feedbackgym.envs.incident.v2 import IncidentEnvV2

SEEDS: dict[str, tuple[int, int]] = {
    "easy": (100_000, 10_000),
    "medium": (20_000, 2_000),
    "hard": (20_000, 2_000),
    "extreme": (20_000, 2_000),
}
"""Train and test seeds per preset (the issue's counts)."""
ENVS = {"1": IncidentEnv, "2": IncidentEnvV2}


def main() -> None:
    """Counts every preset of every version asked for and prints one Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the seed counts")
    parser.add_argument("--versions", default="1,2", help="comma-separated: 1, 2")
    args = parser.parse_args()
    versions = args.versions.split(",")
    unknown = sorted(set(versions) - set(ENVS))
    if unknown:
        parser.error(f"unknown versions {unknown}; valid: {', '.join(ENVS)}")
    print(
        "| version | preset | train seeds | test seeds | test maps in train | test shapes in "
        "train | test incident keys in train | solution twins | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for difficulty in DIFFICULTIES:
        n_train, n_test = (max(1, int(n * args.scale)) for n in SEEDS[difficulty])
        for version in versions:
            cls = ENVS[version]
            start = time.perf_counter()
            o = count_overlap(
                lambda split, cls=cls, d=difficulty: cls(d, split=split),
                range(n_train),
                range(n_test),
            )
            print(
                f"| v{version} | {difficulty} | {n_train:,} | {n_test:,} "
                f"| {o.maps_shared:,} ({o.share('maps_shared'):.1%}) "
                f"| {o.shapes_shared:,} ({o.share('shapes_shared'):.1%}) "
                f"| {o.keys_shared:,} | {o.solution_twins:,} ({o.share('solution_twins'):.2%}) "
                f"| {time.perf_counter() - start:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
