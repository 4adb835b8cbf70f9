"""The language-agent RL study's plan and report (``benchmarks/llm_rl_study.py``).

The report reads run folders as ``train-llm`` and the evaluation write them (config,
curve, the evaluations' episode lines); here they are written by the test, with known
successes, so every figure of the table is checked against its definition.
"""

import argparse
import csv
import json
import tarfile

import pytest

pytest.importorskip("openai")
from tests.benchmark_scripts import load_benchmark  # noqa: E402

study = load_benchmark("llm_rl_study")
FIELDS = ["step", "round", "phase", "success", "success_unguided", "mean_return", "mean_length"]


def _run(root, arm, run, masked, shown, curve):
    folder = root / arm.replace("+", "_") / f"run{run}"
    folder.mkdir(parents=True)
    config = {"arm": arm, "groups": 2, "group_size": 4}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "state.json").write_text("{}")
    with (folder / "curve.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(FIELDS)
        for round_, success in curve:
            writer.writerow([round_ * 40, round_, "fade", success, success, 0, 8])
    for name, successes in (("masked", masked), ("shown", shown)):
        lines = folder / "eval" / name / "episodes.jsonl"
        lines.parent.mkdir(parents=True)
        lines.write_text(
            "".join(json.dumps({"seed": i, "success": s}) + "\n" for i, s in enumerate(successes))
        )


def test_the_report_gives_each_arms_runs_their_statistics_and_packs_their_small_files(tmp_path):
    plan = [["shaping", 2], ["guide+shaping+failure-hints", 2]]
    (tmp_path / "study.json").write_text(json.dumps({
        "plan": plan, "env": "feedbackgym/OpsIncidentEasy-v1", "eval_seeds": 4, "level": "phase",
        "rounds": 16, "groups": 2, "group_size": 4, "adapter": "runs/v1-sft-50/adapter",
    }))  # fmt: skip
    _run(tmp_path, "shaping", 0, [1, 0, 0, 0], [1, 1, 0, 0], [(8, 0.25), (16, 0.5)])
    _run(tmp_path, "shaping", 1, [0, 0, 0, 0], [0, 0, 0, 0], [(8, 0.0), (16, 0.0)])
    arm = "guide+shaping+failure-hints"
    _run(tmp_path, arm, 0, [1, 1, 1, 0], [1, 1, 1, 1], [(8, 0.5), (16, 0.875)])
    _run(tmp_path, arm, 1, [1, 1, 0, 0], [1, 1, 0, 0], [(8, 0.25), (16, 0.5)])
    rows = study.report(tmp_path)
    base, fed = rows
    assert (base["arm"], base["runs"], fed["arm"]) == ("shaping", 2, arm)
    assert base["masked_mean"] == pytest.approx(0.125) and fed["masked_mean"] == pytest.approx(
        0.625
    )
    assert base["reliance_gap"] == pytest.approx(0.125) and fed["reliance_gap"] == pytest.approx(
        0.125
    )
    assert fed["p_improvement"].startswith("1.00 [1.00, 1.00]") and base["p_improvement"] == ""
    # episodes to 50%: round 16 x 8 episodes; never reached: censored at the last round
    assert base["episodes_to_50"] == "128, >128" and fed["episodes_to_50"] == "64, 128"
    assert fed["episodes_to_80"] == "128, >128"
    table = (tmp_path / "results.md").read_text()
    assert "test split" in table and "`phase` level" in table and "P(> shaping)" in table
    with tarfile.open(tmp_path / "runs.tar.gz") as tar:
        names = set(tar.getnames())
    assert (
        "shaping/run1/curve.csv" in names
        and f"{arm.replace('+', '_')}/run0/eval/shown/episodes.jsonl" in names
    )
    assert not any("versions" in name for name in names)


def test_a_bad_plan_is_refused_by_its_item():
    with pytest.raises(argparse.ArgumentTypeError, match="'shaping:0'"):
        study.parse_plan("shaping:0")
    with pytest.raises(argparse.ArgumentTypeError, match="'shaping'"):
        study.parse_plan("shaping")


def test_no_evaluated_run_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no evaluated run yet"):
        study.report(tmp_path)
