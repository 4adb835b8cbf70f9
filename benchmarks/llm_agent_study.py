r"""The language-agent feedback study: the packaged model, as is and warmed up, in each agent arm.

Plays each model (the packaged Gemma 3 270M base model as is, or with a
warm-up adapter from ``feedbackgym sft``) on the env's held-out seeds in each
feedback arm of ``feedbackgym agent`` (``sparse``: no hints, no reviews;
``guide``: hints every attempt; ``review``: the reviews of the earlier
attempts at the same seed; ``guide-then-review``: hints on the first attempt,
then reviews), ``--attempts`` attempts a seed, through the agent's own loop on
the local llama.cpp server, every episode recorded in an HDF5 store beside
its results. Replies are greedy (temperature 0) and the env's reset is
seeded, so an arm that carries nothing from one attempt to the next plays
every attempt the same: ``sparse`` and ``guide`` play one attempt a seed, and
the table shows it for every attempt.

Each cell (env, model, arm) is a folder of ``episodes.jsonl`` (one line an
episode: seed, attempt, success, length, hints, invalid replies, ...) and
``store/``; ``--resume`` goes on from the first seed not played to the end.
``--report`` reads the folders and writes the table (``results.md``, success
by attempt with 95% bootstrap CIs over the seeds, solved within the attempts,
P(improvement) over ``sparse``), ``results.csv`` and ``success_by_attempt.png``.

Usage:
    python benchmarks/llm_agent_study.py --env feedbackgym/OpsIncidentEasy-v0 \
        --model base --model sft10=runs/sft-10/adapter --seeds 30 --attempts 3 \
        --out runs/llm-study --resume
    python benchmarks/llm_agent_study.py --report runs/llm-study

An env with splits (OpsIncident-v1) is played on its test split; ``--level``
sets what the hints and reviews disclose (the v0 study above used ``target``).
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import feedbackgym  # noqa: F401 (registers the envs)
from feedbackgym.chat import ChatClient
from feedbackgym.core import DEFAULT_HINT_LEVEL, HINT_LEVELS
from feedbackgym.experts import held_out_seeds
from feedbackgym.language.agent_arms import AGENT_ARMS, agent_arm
from feedbackgym.language.agent_loop import result_dict, run_agent
from feedbackgym.language.model_server import DEFAULT_CONTEXT, ModelServer, served_adapter
from feedbackgym.registration import evaluation_kwargs
from feedbackgym.training.experiments.stats import (
    bootstrap_ci,
    probability_of_improvement,
    probability_of_improvement_ci,
)

DEFAULT_ARMS = ("sparse", "guide", "review", "guide-then-review")


def _model(text: str) -> tuple[str, str | None]:
    """``base`` or ``NAME=ADAPTER``."""
    if text == "base":
        return "base", None
    name, sep, adapter = text.partition("=")
    if not sep or not name or not adapter:
        raise argparse.ArgumentTypeError(f"a model is 'base' or NAME=ADAPTER, got {text!r}")
    return name, adapter


def _short(env_id: str) -> str:
    return env_id.split("/")[-1]


def attempts_for(arm: str, attempts: int) -> int:
    """An arm that carries nothing across attempts plays one (greedy replies repeat it)."""
    return attempts if agent_arm(arm).memory != "none" else 1


def _done_seeds(path: Path, attempts: int) -> list[int]:
    """The seeds whose every attempt is in ``episodes.jsonl``, in order."""
    if not path.exists():
        return []
    counts: dict[int, int] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        counts[row["seed"]] = counts.get(row["seed"], 0) + 1
    return [seed for seed, n in counts.items() if n >= attempts]


def play_cell(
    client: ChatClient,
    env_id: str,
    arm: str,
    seeds: list[int],
    attempts: int,
    folder: Path,
    context: int = DEFAULT_CONTEXT,
    level: str = DEFAULT_HINT_LEVEL,
) -> None:
    """Plays ``seeds`` in ``arm``, appending each episode to ``folder/episodes.jsonl``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "episodes.jsonl"
    done = set(_done_seeds(path, attempts))
    if path.exists():  # drop a seed cut short by a stop: it is played again whole
        kept = [line for line in path.read_text().splitlines() if json.loads(line)["seed"] in done]
        path.write_text("".join(line + "\n" for line in kept))
    todo = [seed for seed in seeds if seed not in done]
    start = time.perf_counter()
    with path.open("a") as file:
        for seed in todo:  # held-out seeds need not be consecutive: one call each
            for result in run_agent(
                env_id,
                client,
                episodes=1,
                seed=seed,
                attempts=attempts,
                arm=arm,
                store=folder / "store",
                context=context,
                env_kwargs=evaluation_kwargs(env_id, {}),  # the test split, where there is one
                level=level,
            ):
                if result.stopped:  # cut short: run_agent raises next, the seed is played again
                    continue
                file.write(json.dumps(result_dict(result)) + "\n")
                file.flush()
    minutes = (time.perf_counter() - start) / 60
    print(f"  {arm}: {len(todo)} seeds x {attempts} attempts in {minutes:.1f} min", flush=True)


def run(args: argparse.Namespace) -> None:
    """Plays every cell not yet played."""
    env = gym.make(args.env)
    seeds = list(held_out_seeds(env))[: args.seeds]
    env.close()
    if len(seeds) < args.seeds:
        raise SystemExit(f"{args.env} has only {len(seeds)} held-out seeds")
    out = Path(args.out)
    for name, adapter in args.model:
        lora = served_adapter(adapter) if adapter else None
        with ModelServer(lora=lora, threads=args.threads) as server:
            print(f"{_short(args.env)} / {name}: {server.describe()}", flush=True)
            client = ChatClient(server.base_url, server.model.name, timeout_s=120)
            for arm in args.arms:
                folder = out / _short(args.env) / name / arm
                if not args.resume and (folder / "episodes.jsonl").exists():
                    raise SystemExit(f"{folder} has episodes: add --resume to go on")
                play_cell(
                    client,
                    args.env,
                    arm,
                    seeds,
                    attempts_for(arm, args.attempts),
                    folder,
                    level=args.level,
                )


def _cell_rows(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "episodes.jsonl").read_text().splitlines()]


def success_matrix(rows: list[dict[str, Any]], attempts: int) -> np.ndarray:
    """Seeds x attempts of 0/1; an arm that played one attempt repeats it."""
    seeds = sorted({r["seed"] for r in rows})
    matrix = np.zeros((len(seeds), attempts))
    index = {seed: i for i, seed in enumerate(seeds)}
    played = max(r["attempt"] for r in rows)
    for r in rows:
        matrix[index[r["seed"]], r["attempt"] - 1] = float(r["success"])
    if played == 1:
        matrix[:, 1:] = matrix[:, :1]
    return matrix


def _matrices(
    model_dir: Path, attempts: int
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, np.ndarray]]:
    """A model's episodes and success matrices (seeds x attempts), arm by arm."""
    cells = {
        arm: _cell_rows(model_dir / arm)
        for arm in AGENT_ARMS
        if (model_dir / arm / "episodes.jsonl").exists()
    }
    return cells, {arm: success_matrix(rows, attempts) for arm, rows in cells.items() if rows}


def _fmt(mean: float, ci: tuple[float, float]) -> str:
    return f"{mean:.0%} [{ci[0]:.0%}, {ci[1]:.0%}]"


def _versus(matrix: np.ndarray, base: np.ndarray) -> str:
    """P(a seed of ``matrix`` ends above one of ``base``) at the last attempt, with its CI."""
    p = probability_of_improvement(matrix[:, -1], base[:, -1])
    low, high = probability_of_improvement_ci(matrix[:, -1], base[:, -1])
    return f"{p:.2f} [{low:.2f}, {high:.2f}]"


def report(root: Path, attempts: int, versus: str | None = None) -> None:
    """Writes ``results.md``, ``results.csv`` and ``success_by_attempt.png`` under ``root``.

    ``versus`` names a model each other model is compared with, arm by arm
    (a column of P(> that model) at the last attempt).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    header = ["env", "model", "arm", "seeds", "episodes"]
    header += [f"attempt {k}" for k in range(1, attempts + 1)]
    header += [f"solved within {attempts}", "P(> sparse) at the last attempt"]
    header += [f"P(> {versus}) at the last attempt"] if versus else []
    header += ["invalid replies"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    table: list[list[str]] = []
    envs = sorted(p for p in root.iterdir() if p.is_dir())
    figure, axes = plt.subplots(1, len(envs), figsize=(5.5 * len(envs), 4), squeeze=False)
    for env_dir, axis in zip(envs, axes[0], strict=True):
        models = sorted(p for p in env_dir.iterdir() if p.is_dir())
        of_models = {model_dir.name: _matrices(model_dir, attempts) for model_dir in models}
        for model_index, model_dir in enumerate(models):
            cells, matrices = of_models[model_dir.name]
            for arm, matrix in matrices.items():
                rows = cells[arm]
                by_attempt = [
                    _fmt(matrix[:, k].mean(), bootstrap_ci(matrix[:, k])) for k in range(attempts)
                ]
                solved = matrix.max(axis=1)
                over_sparse = "-"
                if arm != "sparse" and "sparse" in matrices:
                    over_sparse = _versus(matrix, matrices["sparse"])
                cells_row = [env_dir.name, model_dir.name, arm, str(len(matrix)), str(len(rows))]
                cells_row += by_attempt
                cells_row += [_fmt(solved.mean(), bootstrap_ci(solved)), over_sparse]
                if versus:
                    other = of_models.get(versus, ({}, {}))[1].get(arm)
                    usable = other is not None and model_dir.name != versus
                    cells_row += [_versus(matrix, other) if usable else "-"]
                cells_row += [str(sum(r["invalid_replies"] for r in rows))]
                table.append(cells_row)
                lines.append("| " + " | ".join(cells_row) + " |")
                axis.plot(
                    range(1, attempts + 1),
                    matrix.mean(axis=0),
                    marker="o",
                    color=f"C{list(AGENT_ARMS).index(arm)}",  # an arm's colour, a model's line
                    linestyle=("-", "--", ":", "-.")[model_index % 4],
                    label=f"{model_dir.name} {arm}",
                )
        axis.set_title(env_dir.name)
        axis.set_xlabel("attempt")
        axis.set_ylabel("success on held-out seeds")
        axis.set_xticks(range(1, attempts + 1))
        axis.set_ylim(-0.05, 1.05)
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(root / "success_by_attempt.png", dpi=110)
    (root / "results.md").write_text("\n".join(lines) + "\n")
    with (root / "results.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        writer.writerows(table)
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="feedbackgym/OpsIncidentEasy-v0")
    parser.add_argument(
        "--model", type=_model, action="append", help="'base' or NAME=ADAPTER (repeatable)"
    )
    parser.add_argument("--arms", type=lambda t: t.split(","), default=list(DEFAULT_ARMS))
    parser.add_argument("--seeds", type=int, default=30, help="held-out seeds, from the first")
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument(
        "--level",
        choices=HINT_LEVELS,
        default=DEFAULT_HINT_LEVEL,
        help="what hints and reviews disclose (part of the results' label: one --out a level)",
    )
    parser.add_argument("--threads", type=int, default=None, help="the server's CPU threads")
    parser.add_argument("--out", default="runs/llm-study")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--report", type=Path, default=None, help="write the tables of a study")
    parser.add_argument("--versus", default=None, help="compare each model with this one")
    args = parser.parse_args()
    if args.report is not None:
        report(args.report, args.attempts, args.versus)
        return
    for arm in args.arms:
        agent_arm(arm)  # an unknown arm fails before any server starts
    args.model = args.model or [("base", None)]
    run(args)


if __name__ == "__main__":
    main()
