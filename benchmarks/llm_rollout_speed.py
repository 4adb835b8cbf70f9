"""Times ``train-llm``'s rounds with the episodes played on the model server and in torch.

Back to back on this machine, the same run (env, arm, adapter, seed, rounds,
groups) trains once with ``rollouts="torch"`` (the model being trained plays,
one torch thread) and once with ``rollouts="server"`` (the packaged model's
llama.cpp server plays the adapter published each round), repeated
``--repeats`` times in alternation. Each run logs, per round, its rollout
phase's wall time and its update's (TensorBoard ``llm/rollout_seconds`` and
``llm/update_seconds``); the figures are, per way:

* rollout episodes/s: the episodes played over the rollout phases' seconds
  (the server's first round includes starting the server);
* round episodes/s: the episodes over the rollouts' and updates' seconds;
* the server's ratio to torch of each, over every round and over the rounds
  after the first (starting the server and loading the first adapter are paid
  once a run, so a longer run tends to the second).

Validations are left out (``eval_every`` past the last round still validates
the last round: its seconds are printed apart).

Usage:
    python benchmarks/llm_rollout_speed.py [--env feedbackgym/OpsIncidentEasy-v1]
        [--adapter runs/v1-sft-50/adapter] [--rounds 3] [--groups 2] [--group-size 4]
        [--max-turns 12] [--repeats 1] [--out runs/llm_rollout_speed] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

WAYS = ("torch", "server")


def _scalars(run_dir: Path) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, list[float]] = {}
    for folder in sorted((run_dir / "tb").iterdir()):
        events = EventAccumulator(str(folder))
        events.Reload()
        for tag in events.Tags()["scalars"]:
            out.setdefault(tag, []).extend(e.value for e in events.Scalars(tag))
    return out


def time_run(way: str, args: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    """Trains one run with ``way``'s rollouts; its per-round seconds and episodes."""
    from feedbackgym.training.llm.llm_settings import LLMRunConfig
    from feedbackgym.training.llm.run_llm import train_llm_run

    shutil.rmtree(out_dir, ignore_errors=True)
    config = LLMRunConfig(
        env_id=args.env,
        arm=args.arm,
        seed=args.seed,
        total_rounds=args.rounds,
        out_dir=str(out_dir),
        adapter=args.adapter,
        groups=args.groups,
        group_size=args.group_size,
        max_turns=args.max_turns,
        eval_every=args.rounds + 1,
        eval_episodes=args.eval_episodes,
        device="cpu",
        rollouts=way,
    )
    start = time.perf_counter()
    train_llm_run(config)
    wall = time.perf_counter() - start
    scalars = _scalars(out_dir)
    rollout = scalars["llm/rollout_seconds"]
    update = scalars["llm/update_seconds"]
    episodes = args.groups * args.group_size * len(rollout)
    curve = (out_dir / "curve.csv").read_text().splitlines()
    return {
        "way": way,
        "rounds": len(rollout),
        "episodes": episodes,
        "rollout_seconds": rollout,
        "update_seconds": update,
        "rollout_episodes_per_s": episodes / sum(rollout),
        "round_episodes_per_s": episodes / (sum(rollout) + sum(update)),
        "success": scalars["rollout/success_rate"],
        "wall_seconds": wall,
        "validation_row": curve[-1],
    }


def _row(runs: list[dict[str, Any]], first: int) -> dict[str, float]:
    """One way's episodes/s and seconds a round, over each run's rounds from ``first``."""
    rollout = [s for r in runs for s in r["rollout_seconds"][first:]]
    update = [s for r in runs for s in r["update_seconds"][first:]]
    episodes = sum(r["episodes"] // r["rounds"] * (r["rounds"] - first) for r in runs)
    return {
        "rollout_episodes_per_s": episodes / sum(rollout),
        "round_episodes_per_s": episodes / (sum(rollout) + sum(update)),
        "rollout_s_per_round": sum(rollout) / len(rollout),
        "update_s_per_round": sum(update) / len(update),
    }


def main() -> None:
    """Runs the comparison and prints its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="feedbackgym/OpsIncidentEasy-v1")
    parser.add_argument("--arm", default="guide-then-review+shaping")
    parser.add_argument("--adapter", default="runs/v1-sft-50/adapter")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=12)
    parser.add_argument("--eval-episodes", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", default="runs/llm_rollout_speed")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    from feedbackgym.registration import register_envs

    register_envs()
    results = []
    for repeat in range(args.repeats):
        for way in WAYS:
            result = time_run(way, args, Path(args.out) / f"{way}_{repeat}")
            results.append(result)
            print(json.dumps({k: v for k, v in result.items() if k != "validation_row"}))
    report: dict[str, Any] = {"runs": results}
    for rounds, first in (("every round", 0), ("after the first", 1)):
        table = {way: _row([r for r in results if r["way"] == way], first) for way in WAYS}
        print(f"\n{rounds}:")
        print("| way | rollout episodes/s | round episodes/s | rollout s/round | update s/round |")
        print("|---|---|---|---|---|")
        for way, row in table.items():
            print(
                f"| {way} | {row['rollout_episodes_per_s']:.3f} "
                f"| {row['round_episodes_per_s']:.3f} "
                f"| {row['rollout_s_per_round']:.1f} | {row['update_s_per_round']:.1f} |"
            )
        ratios = {
            key: table["server"][key] / table["torch"][key]
            for key in ("rollout_episodes_per_s", "round_episodes_per_s")
        }
        print(
            f"server / torch: rollout {ratios['rollout_episodes_per_s']:.2f}x, "
            f"round {ratios['round_episodes_per_s']:.2f}x"
        )
        report[rounds] = {"table": table, "ratios": ratios}
    if args.json:
        Path(args.json).write_text(json.dumps(report))


if __name__ == "__main__":
    main()
