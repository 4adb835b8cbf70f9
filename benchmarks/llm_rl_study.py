r"""The language-agent RL study: ``train-llm``'s arms from one warm-up, evaluated on the test split.

Every run starts from the same warm-up adapter (``--adapter``), trains the
same number of episodes (``--rounds`` x ``--groups`` x ``--group-size``, fixed
before the runs) at the same reward, and differs only in its arm and its
seed. ``--plan ARM:RUNS,...`` names the arms and how many training runs each
gets (the run is the unit: run ``r`` has seed ``r + 1``, training seeds
``(r + 1) * 1000`` on, all in the train split). The first arm is the baseline
the others are set against (GRPO without feedback: ``shaping``).

Each run's last validated version (``versions/``: the last round is always
validated) is then played greedily through the agent's loop on the local
llama.cpp server, on the first ``--eval-seeds`` test-split seeds, with hints
masked (``sparse``) and shown at ``--level`` (``guide``), each episode a line
of ``eval/ARM/episodes.jsonl`` in the run (see ``llm_agent_study.py``).

Everything resumes: a finished run is not trained again, a run cut short
goes on from its last round (``train-llm --resume``), an evaluation from its
first seed not played. ``--report`` writes, from what is there:

* ``results.md`` / ``results.csv``: by arm, the runs, success with hints
  masked (IQM and mean over runs, 95% stratified-bootstrap CIs), with hints
  shown, the reliance gap (shown minus masked), P(improvement) over the
  baseline with its CI, and the training episodes to 50% and 80% in-run
  validation success with hints masked (censored at the run's end: ``>N``);
* ``runs.tar.gz``: each run's small files (config, curve, state, the
  evaluations' episode lines), to commit beside the report.

Usage:
    python benchmarks/llm_rl_study.py --env feedbackgym/OpsIncidentEasy-v1 \
        --adapter runs/v1-sft-50/adapter --plan shaping:3,guide+shaping+failure-hints:3 \
        --rounds 16 --out runs/llm-rl-study
    python benchmarks/llm_rl_study.py --report runs/llm-rl-study
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tarfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llm_agent_study import play_cell  # noqa: E402

import feedbackgym  # noqa: E402, F401 (registers the envs)
from feedbackgym.core import DEFAULT_HINT_LEVEL, HINT_LEVELS  # noqa: E402
from feedbackgym.experts import held_out_seeds  # noqa: E402
from feedbackgym.training.common.run_files import read_curve  # noqa: E402
from feedbackgym.training.experiments.stats import (  # noqa: E402
    bootstrap_ci,
    iqm,
    probability_of_improvement,
    probability_of_improvement_ci,
)

EVAL_ARMS = {"masked": "sparse", "shown": "guide"}
"""How each evaluation plays: hints masked, and hints shown at the study's level."""
SMALL_FILES = ("config.json", "curve.csv", "state.json")


def parse_plan(text: str) -> list[tuple[str, int]]:
    """``ARM:RUNS,...`` as pairs, in order (the first is the baseline).

    Example:
        >>> parse_plan("shaping:3,guide+shaping+failure-hints:1")
        [('shaping', 3), ('guide+shaping+failure-hints', 1)]
    """
    plan = []
    for item in text.split(","):
        arm, sep, runs = item.strip().rpartition(":")
        if not sep or not arm or not runs.isdigit() or int(runs) < 1:
            raise argparse.ArgumentTypeError(f"a plan item is ARM:RUNS (RUNS >= 1), got {item!r}")
        plan.append((arm, int(runs)))
    return plan


def _safe(arm: str) -> str:
    return arm.replace("+", "_")


def train(args: argparse.Namespace, arm: str, run: int, out: Path) -> None:
    """Trains (or goes on training) one run."""
    from feedbackgym.training.llm.llm_settings import LLMRunConfig
    from feedbackgym.training.llm.run_llm import train_llm_run

    config = LLMRunConfig(
        env_id=args.env,
        arm=arm,
        seed=run + 1,
        total_rounds=args.rounds,
        out_dir=str(out),
        adapter=args.adapter,
        groups=args.groups,
        group_size=args.group_size,
        max_turns=args.max_turns,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        learning_rate=args.learning_rate,
        eval_every=args.eval_every,
        eval_episodes=args.eval_episodes,
        cpu_threads=args.cpu_threads,
        device="cpu",
        feedback_overrides={"guide": {"level": args.level}, "review": {"level": args.level}},
    )
    state = train_llm_run(config, resume=(out / "state.json").exists())
    print(f"{arm} run {run}: trained ({state.get('round')} rounds)", flush=True)


def evaluate(args: argparse.Namespace, out: Path) -> None:
    """Plays the run's last version on the test split, hints masked and shown."""
    from feedbackgym.chat import ChatClient
    from feedbackgym.language.model_server import ModelServer, served_adapter
    from feedbackgym.language.versions import VersionRegistry

    registry = VersionRegistry(out / "versions")
    last = registry.versions()[-1]
    env = gym.make(args.env)
    seeds = list(held_out_seeds(env))[: args.eval_seeds]  # played on the test split
    env.close()
    with ModelServer(lora=served_adapter(registry.path(last.number))) as server:
        client = ChatClient(server.base_url, server.model.name, timeout_s=120)
        for name, agent_arm in EVAL_ARMS.items():
            folder = out / "eval" / name
            play_cell(client, args.env, agent_arm, seeds, 1, folder, level=args.level)


def run_plan(args: argparse.Namespace) -> None:
    """Trains and evaluates every run of the plan not yet done."""
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    (root / "study.json").write_text(json.dumps(vars(args), indent=2, default=str))
    for arm, runs in args.plan:
        for run in range(runs):
            out = root / _safe(arm) / f"run{run}"
            train(args, arm, run, out)
            evaluate(args, out)


def _success(folder: Path) -> float:
    rows = [json.loads(line) for line in (folder / "episodes.jsonl").read_text().splitlines()]
    return float(np.mean([row["success"] for row in rows])) if rows else float("nan")


def _episodes_to(run: Path, threshold: float) -> str:
    config = json.loads((run / "config.json").read_text())
    curve = read_curve(run)
    per_round = config["groups"] * config["group_size"]
    reached = np.nonzero(curve["success_unguided"] >= threshold)[0]
    if len(reached):
        return str(int(curve["round"][reached[0]]) * per_round)
    return f">{int(curve['round'][-1]) * per_round}"


def report(root: Path) -> list[dict[str, Any]]:
    """Writes ``results.md``, ``results.csv`` and ``runs.tar.gz`` from the finished runs."""
    arms: dict[str, list[Path]] = {}
    for run in sorted(root.glob("*/run*")):
        if all((run / "eval" / name / "episodes.jsonl").exists() for name in EVAL_ARMS):
            config = json.loads((run / "config.json").read_text())
            arms.setdefault(config["arm"], []).append(run)
    if not arms:
        raise SystemExit(f"{root}: no evaluated run yet")
    study = json.loads((root / "study.json").read_text())
    order = [item[0] for item in study["plan"] if item[0] in arms]
    baseline = order[0]
    masked = {arm: [_success(r / "eval" / "masked") for r in arms[arm]] for arm in order}
    rows = []
    for arm in order:
        shown = [_success(r / "eval" / "shown") for r in arms[arm]]
        versus = ""
        if arm != baseline:
            low, high = probability_of_improvement_ci(masked[arm], masked[baseline])
            p = probability_of_improvement(masked[arm], masked[baseline])
            versus = f"{p:.2f} [{low:.2f}, {high:.2f}]"
        rows.append(
            {
                "arm": arm,
                "runs": len(arms[arm]),
                "masked_iqm": iqm(masked[arm]),
                "masked_ci": bootstrap_ci(masked[arm], "iqm"),
                "masked_mean": float(np.mean(masked[arm])),
                "shown_mean": float(np.mean(shown)),
                "reliance_gap": float(np.mean(shown) - np.mean(masked[arm])),
                "p_improvement": versus,
                "episodes_to_50": ", ".join(_episodes_to(r, 0.5) for r in arms[arm]),
                "episodes_to_80": ", ".join(_episodes_to(r, 0.8) for r in arms[arm]),
            }
        )
    _write(root, study, rows, baseline)
    with tarfile.open(root / "runs.tar.gz", "w:gz") as tar:
        for run in (r for runs in arms.values() for r in runs):
            for name in SMALL_FILES:
                tar.add(run / name, arcname=str(run.relative_to(root) / name))
            for name in EVAL_ARMS:
                line = run / "eval" / name / "episodes.jsonl"
                tar.add(line, arcname=str(line.relative_to(root)))
    return rows


def _percent(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:.0%}"


def _write(root: Path, study: dict[str, Any], rows: list[dict[str, Any]], baseline: str) -> None:
    head = (
        f"{study['env']}, test split, first {study['eval_seeds']} seeds, greedy; hints masked "
        f"and shown at the `{study['level']}` level; {study['rounds']} rounds x "
        f"{study['groups']} x {study['group_size']} training episodes a run from "
        f"`{study['adapter']}`\n\n"
    )
    lines = [
        "| arm | runs | masked IQM [95% CI] | masked mean | shown mean | reliance gap "
        f"| P(> {baseline}) [95% CI] | episodes to 50% | episodes to 80% |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        low, high = r["masked_ci"]
        lines.append(
            f"| {r['arm']} | {r['runs']} | {_percent(r['masked_iqm'])} [{_percent(low)}, "
            f"{_percent(high)}] | {_percent(r['masked_mean'])} | {_percent(r['shown_mean'])} | "
            f"{r['reliance_gap'] * 100:+.0f} pts | {r['p_improvement'] or '-'} | "
            f"{r['episodes_to_50']} | {r['episodes_to_80']} |"
        )
    (root / "results.md").write_text(head + "\n".join(lines) + "\n")
    with (root / "results.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(head + "\n".join(lines))


def main() -> None:
    """Runs the plan, or reports it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", metavar="DIR", help="write the report of a study folder")
    parser.add_argument("--env", default="feedbackgym/OpsIncidentEasy-v1")
    parser.add_argument("--adapter", help="the shared warm-up adapter")
    parser.add_argument("--plan", type=parse_plan, default=parse_plan("shaping:3"))
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=3072)
    parser.add_argument("--temperature", type=float, default=1.5)
    parser.add_argument("--learning-rate", type=float, default=2e-4)
    parser.add_argument("--eval-every", type=int, default=4)
    parser.add_argument("--eval-episodes", type=int, default=16)
    parser.add_argument("--eval-seeds", type=int, default=50)
    parser.add_argument("--level", choices=HINT_LEVELS, default=DEFAULT_HINT_LEVEL)
    parser.add_argument("--cpu-threads", type=int, default=0)
    parser.add_argument("--out", default="runs/llm-rl-study")
    args = parser.parse_args()
    if args.report:
        report(Path(args.report))
        return
    if args.adapter is None:
        parser.error("--adapter: the shared warm-up the runs start from")
    run_plan(args)
    report(Path(args.out))


if __name__ == "__main__":
    main()
