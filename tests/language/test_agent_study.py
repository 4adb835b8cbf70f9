"""The language-agent study's runner and report (``benchmarks/llm_agent_study.py``).

The model is ``feedbackgym.language.stand_in_server``: a STAND-IN that answers the env's
expert action (not a language model), so every episode succeeds; ``stand-in:bad-json``
answers no action, so every episode fails. The study on the packaged model is in
``docs/results/llm_agent/``.
"""

import json

import numpy as np
import pytest

pytest.importorskip("openai")
pytest.importorskip("h5py")
pytest.importorskip("matplotlib")
from feedbackgym.chat import ChatClient  # noqa: E402
from feedbackgym.datasets import TrajectoryStore  # noqa: E402
from feedbackgym.language.stand_in_server import stand_in_server  # noqa: E402
from tests.benchmark_scripts import load_benchmark  # noqa: E402

ENV = "feedbackgym/OpsIncidentEasy-v0"
SEEDS = [10000000, 10000001]
CONTEXT = 8192  # the stand-in counts tokens as bytes


study = load_benchmark("llm_agent_study")


@pytest.fixture(scope="module")
def url():
    with stand_in_server() as base_url:
        yield base_url


def test_cells_play_each_seed_and_attempt_record_them_and_resume(url, tmp_path):
    expert = ChatClient(url, "stand-in")
    cell = tmp_path / "OpsIncidentEasy-v0" / "expert" / "review"
    study.play_cell(expert, ENV, "review", SEEDS, 2, cell, CONTEXT)
    rows = [json.loads(line) for line in (cell / "episodes.jsonl").read_text().splitlines()]
    assert [(r["seed"], r["attempt"], r["arm"]) for r in rows] == [
        (s, a, "review") for s in SEEDS for a in (1, 2)
    ]
    assert all(r["success"] and r["invalid_replies"] == 0 for r in rows)
    assert len(TrajectoryStore(cell / "store").episodes()) == 4

    lines = (cell / "episodes.jsonl").read_text().splitlines()
    (cell / "episodes.jsonl").write_text("\n".join(lines[:3]) + "\n")  # stopped mid-seed
    study.play_cell(expert, ENV, "review", SEEDS, 2, cell, CONTEXT)
    again = [json.loads(line) for line in (cell / "episodes.jsonl").read_text().splitlines()]
    assert [(r["seed"], r["attempt"]) for r in again] == [(s, a) for s in SEEDS for a in (1, 2)]


def test_the_report_gives_success_by_attempt_and_the_improvement_over_sparse(url, tmp_path):
    model = tmp_path / "OpsIncidentEasy-v0" / "m"
    study.play_cell(ChatClient(url, "stand-in"), ENV, "guide", SEEDS, 1, model / "guide", CONTEXT)
    failing = ChatClient(url, "stand-in:bad-json", timeout_s=5)
    study.play_cell(failing, ENV, "sparse", SEEDS, 1, model / "sparse", CONTEXT)
    study.report(tmp_path, 3)
    table = (tmp_path / "results.md").read_text().splitlines()
    guide = next(line for line in table if "| guide |" in line)
    sparse = next(line for line in table if "| sparse |" in line)
    assert guide.count("100% [100%, 100%]") == 4  # three attempts (one played), solved within 3
    assert "1.00 [1.00, 1.00]" in guide  # P(guide > sparse)
    assert sparse.count("0% [0%, 0%]") == 4
    assert (tmp_path / "success_by_attempt.png").stat().st_size > 1000


def test_one_attempt_stands_for_all_where_nothing_carries_over():
    rows = [{"seed": 1, "attempt": 1, "success": True}, {"seed": 2, "attempt": 1, "success": False}]
    assert study.success_matrix(rows, 3).tolist() == [[1, 1, 1], [0, 0, 0]]
    assert study.attempts_for("sparse", 3) == study.attempts_for("guide", 3) == 1
    assert study.attempts_for("review", 3) == 3
    matrix = study.success_matrix(
        [{"seed": 1, "attempt": a, "success": a == 2} for a in (1, 2, 3)], 3
    )
    assert np.array_equal(matrix, [[0, 1, 0]])


def test_the_report_compares_each_model_with_the_one_named_arm_by_arm(url, tmp_path):
    expert, failing = ChatClient(url, "stand-in"), ChatClient(url, "stand-in:bad-json", timeout_s=5)
    root = tmp_path / "OpsIncidentEasy-v0"
    study.play_cell(expert, ENV, "sparse", SEEDS, 1, root / "trained" / "sparse", CONTEXT)
    study.play_cell(failing, ENV, "sparse", SEEDS, 1, root / "start" / "sparse", CONTEXT)
    study.report(tmp_path, 1, versus="start")
    table = (tmp_path / "results.md").read_text().splitlines()
    assert table[0].endswith("| P(> start) at the last attempt | invalid replies |")
    trained = next(line for line in table if "| trained |" in line)
    start = next(line for line in table if "| start |" in line)
    assert trained.endswith("| 1.00 [1.00, 1.00] | 0 |")
    assert "] | - | - | " in start  # sparse is not compared with itself, nor a model
