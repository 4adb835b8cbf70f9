import csv
import json
import subprocess
import sys

from feedbackgym.baselines.compare import ComparisonConfig, run_comparison


def test_compare_writes_every_output(tmp_path):
    config = ComparisonConfig(
        env_id="feedbackgym/OpsIncidentEasy-v0",
        arms=["sparse", "guide-then-review"],
        seeds=1,
        steps=256,
        out=str(tmp_path),
        jobs=2,
        n_envs=2,
        n_steps=32,
        eval_every=2,
        eval_episodes=2,
        fade=1,
        record=True,
        dropout_scope="episode",
    )
    rows = run_comparison(config, show_progress=False)
    assert [r["arm"] for r in rows] == ["sparse", "guide-then-review"]
    for name in ("config.json", "results.csv", "results.md", "curves.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    with (tmp_path / "results.csv").open() as file:
        table = list(csv.DictReader(file))
    assert {
        "success",
        "success_ci95",
        "steps_to_50",
        "steps_to_80",
        "final_return",
        "success_before_switch",
        "success_after_switch",
    } <= set(table[0])
    for arm in config.arms:
        for seed in range(1):
            run = tmp_path / "runs" / f"{arm}-seed{seed}"
            assert (run / "curve.csv").exists() and any((run / "tb").rglob("events.out.*"))
            assert any((run / "trajectories").glob("*.h5"))  # --record
            settings = json.loads((run / "config.json").read_text())["settings"]
            assert settings["dropout_scope"] == "episode"
    markdown = (tmp_path / "results.md").read_text()
    assert markdown.startswith("| arm |") and "guide-then-review" in markdown


def test_compare_command_rejects_bad_input(tmp_path):
    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "feedbackgym", "compare", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    bad_arm = run("--quick", "--arms", "sparse,teacher", "--out", str(tmp_path))
    assert bad_arm.returncode == 2 and "unknown arms" in bad_arm.stderr
    missing = run("--env", "feedbackgym/OpsIncidentEasy-v0")
    assert missing.returncode == 2 and "--arms" in missing.stderr
    bad_env = run("--quick", "--env", "feedbackgym/Nope-v0", "--out", str(tmp_path))
    assert bad_env.returncode == 2 and "unknown env id" in bad_env.stderr
    bad_dropout = run("--quick", "--dropout", "1.5", "--out", str(tmp_path))
    assert bad_dropout.returncode == 2 and "--dropout" in bad_dropout.stderr
    bad_scope = run("--quick", "--dropout-scope", "round", "--out", str(tmp_path))
    assert bad_scope.returncode == 2 and "--dropout-scope" in bad_scope.stderr
    bad_terminal = run("--quick", "--shaping-terminal", "never", "--out", str(tmp_path))
    assert bad_terminal.returncode == 2 and "--shaping-terminal" in bad_terminal.stderr
    bad_gamma = run("--quick", "--gamma", "0", "--out", str(tmp_path))
    assert bad_gamma.returncode == 2 and "gamma must be in (0, 1]" in bad_gamma.stderr
    bad_keep = run("--quick", "--keep-checkpoints", "-1", "--out", str(tmp_path))
    assert bad_keep.returncode == 2 and "keep_checkpoints must be >= 0" in bad_keep.stderr


def test_compare_command_passes_the_schedule_and_dropout_options(tmp_path):
    args = ["--env", "feedbackgym/OpsIncidentEasy-v0", "--arms", "sparse", "--seeds", "1"]
    args += ["--steps", "1024", "--switch-at", "0.3", "--fade", "2", "--dropout", "0.2"]
    args += ["--dropout-scope", "step", "--keep-checkpoints", "1"]
    args += ["--shaping-terminal", "zero_on_harm", "--gamma", "1"]
    args += ["--out", str(tmp_path)]
    result = subprocess.run(
        [sys.executable, "-m", "feedbackgym", "compare", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["switch_at"], config["fade"]) == (0.3, 2.0)
    assert (config["dropout"], config["dropout_scope"]) == (0.2, "step")
    assert config["keep_checkpoints"] == 1 and config["shaping_terminal"] == "zero_on_harm"
    run = json.loads((tmp_path / "runs" / "sparse-seed0" / "config.json").read_text())
    assert run["settings"]["shaping_terminal"] == "zero_on_harm"
    assert run["settings"]["gamma"] == 1.0
