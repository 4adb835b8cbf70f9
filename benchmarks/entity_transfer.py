"""A comparison's runs played on other presets with no further training.

Each run's last checkpoint (the weights its last validation scored) plays
``--episodes`` validation seeds of each ``--env`` (the test split, hints
masked), through :func:`~feedbackgym.training.torch_ppo.run_torch.play_checkpoint`
as ``feedbackgym play --checkpoint`` does. Prints one Markdown row per env: the
IQM over runs with its percentile bootstrap 95% CI, the mean and each run's score::

    python benchmarks/entity_transfer.py runs/v2_easy_entity --env
        feedbackgym/OpsIncidentEasy-v2 feedbackgym/OpsIncidentMedium-v2
        feedbackgym/OpsIncidentHard-v2

(one command line). The entity policy's weights do not depend on the number of
services, so an easy run plays medium's and hard's more positions.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from feedbackgym.training.experiments.stats import bootstrap_ci, iqm
from feedbackgym.training.torch_ppo.run_torch import play_checkpoint


def last_checkpoints(comparison: Path) -> list[Path]:
    """Each run's newest round checkpoint, run by run (``runs/*/checkpoints/round_*.pt``).

    Raises:
        FileNotFoundError: A run has no round checkpoint, or the comparison no run.
    """
    found = []
    for run in sorted((comparison / "runs").iterdir()):
        rounds = sorted((run / "checkpoints").glob("round_*.pt"), key=lambda p: int(p.stem[6:]))
        if not rounds:
            raise FileNotFoundError(f"{run}: no round checkpoint")
        found.append(rounds[-1])
    if not found:
        raise FileNotFoundError(f"{comparison}: no runs")
    return found


def main() -> None:
    """Plays every run on every env and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("comparison", type=Path, help="a compare --out folder of torch runs")
    parser.add_argument("--env", nargs="+", required=True, help="env ids to play")
    parser.add_argument("--episodes", type=int, default=30, help="validation seeds per env")
    args = parser.parse_args()
    checkpoints = last_checkpoints(args.comparison)
    print("| env | runs | IQM success [95% CI] | mean | each run |")
    print("|---|---|---|---|---|")
    for env_id in args.env:
        scores = [play_checkpoint(path, env_id, args.episodes)[0].success for path in checkpoints]
        low, high = bootstrap_ci(scores, "iqm")
        each = ", ".join(f"{s:.0%}" for s in scores)
        print(
            f"| {env_id} | {len(scores)} | {iqm(scores):.0%} [{low:.0%}, {high:.0%}] "
            f"| {sum(scores) / len(scores):.0%} | {each} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
