"""``benchmarks/time_to_result.py``: the command each setup runs, and its results per arm."""

from pathlib import Path

import pytest

from tests.benchmark_scripts import load_benchmark

ttr = load_benchmark("time_to_result")


def _curve(run: Path, successes: list[float]) -> None:
    run.mkdir(parents=True)
    rows = [
        "step,round,phase,success,success_unguided,mean_return,mean_length,replayed_steps,seconds"
    ]
    for k, success in enumerate(successes, start=1):
        rows.append(f"{1000 * k},{k},none,{success},{success},{success},10,0,{10.0 * k}")
    (run / "curve.csv").write_text("\n".join(rows) + "\n")


def test_results_are_per_arm(tmp_path):
    _curve(tmp_path / "runs" / "shaping-seed0", [0.0, 0.6, 0.9])
    _curve(tmp_path / "runs" / "shaping+reexplore-seed0", [0.9, 0.9, 0.9])
    shaping = ttr.to_result(tmp_path, "shaping")
    restarts = ttr.to_result(tmp_path, "shaping+reexplore")
    assert shaping["runs"] == restarts["runs"] == 1
    assert shaping["steps_80"] > restarts["steps_80"] == 1000
    assert restarts["seconds_80"] == 10.0
    with pytest.raises(FileNotFoundError, match="no run of guide"):
        ttr.to_result(tmp_path, "guide")


def test_each_setup_runs_one_compare_with_the_env_arms_and_flags(tmp_path, monkeypatch):
    commands = []

    def compare(out, flags, *, resume):
        commands.append(flags)
        for arm in ("shaping", "shaping+reexplore"):
            _curve(out / "runs" / f"{arm}-seed0", [0.5, 0.9])
        return 1.0

    monkeypatch.setattr(ttr, "compare", compare)
    ttr.main(
        [
            *("--env", "feedbackgym/OpsIncidentEasy-v1", "--arms", "shaping,shaping+reexplore"),
            *("--flags=", "--setups", "torch,sb3", "--seeds", "1", "--out", str(tmp_path)),
            "--skip-throughput",
        ]
    )
    assert commands[0][:4] == [
        "--env",
        "feedbackgym/OpsIncidentEasy-v1",
        "--arms",
        "shaping,shaping+reexplore",
    ]
    assert "--gamma" not in commands[0]
    assert commands[1][-2:] == ["--trainer", "sb3"]
    results = (tmp_path / "results.json").read_text()
    assert '"sb3, shaping+reexplore"' in results
