import csv
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from feedbackgym.training.experiments.compare import ComparisonConfig, _steps_done, run_comparison
from feedbackgym.training.experiments.stats import IMPROVEMENT_FIELDS, success_around_switch
from feedbackgym.training.sb3.run_sb3 import RunConfig


def _small(tmp_path, arms, **kwargs):
    """A one-seed comparison on OpsIncident easy, 2 envs x 32 steps a round."""
    return ComparisonConfig(
        env_id="feedbackgym/OpsIncidentEasy-v0",
        arms=arms,
        seeds=1,
        out=str(tmp_path),
        n_envs=2,
        n_steps=32,
        **kwargs,
    )


@pytest.mark.parametrize("trainer", ["sb3", "torch"])
def test_compare_writes_every_output(tmp_path, trainer):
    config = _small(
        tmp_path,
        ["sparse", "guide-then-review"],
        steps=256,
        jobs=2,
        eval_every=2,
        eval_episodes=2,
        feedback_overrides={"schedule": {"fade": 1}, "guide": {"dropout_scope": "episode"}},
        record=True,
        trainer=trainer,
        device="cpu",
    )
    rows = run_comparison(config, show_progress=False)
    assert [r["arm"] for r in rows] == ["sparse", "guide-then-review"]
    for name in ("config.json", "results.csv", "results.md", "improvement.csv", "curves.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    with (tmp_path / "results.csv").open() as file:
        table = list(csv.DictReader(file))
    with (tmp_path / "improvement.csv").open() as file:
        improvement = list(csv.DictReader(file))
    assert [(r["arm"], r["baseline"]) for r in improvement] == [
        ("sparse", "guide-then-review"),
        ("guide-then-review", "sparse"),
    ]
    assert tuple(improvement[0]) == IMPROVEMENT_FIELDS
    assert {
        "iqm",
        "iqm_low",
        "iqm_high",
        "mean_low",
        "mean_high",
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
            suffix = ".zip" if trainer == "sb3" else ".pt"
            assert (run / "checkpoints" / f"best{suffix}").exists()
            saved = RunConfig.from_json((run / "config.json").read_text())
            assert saved.arm_config(saved.feedback).guide.dropout_scope == "episode"
    markdown = (tmp_path / "results.md").read_text()
    assert markdown.startswith("| arm |") and "guide-then-review" in markdown
    with pytest.raises(ValueError, match="trainer"):
        _small(tmp_path, ["sparse"], steps=256, trainer="jax")


@pytest.mark.parametrize("trainer", ["sb3", "torch"])
def test_the_explore_arm_trains_with_its_bonus_and_is_judged_on_the_env_reward(tmp_path, trainer):
    config = _small(
        tmp_path,
        ["explore"],
        steps=128,
        eval_every=1,
        eval_episodes=2,
        feedback_overrides={"explore": {"scale": 0.5}},
        trainer=trainer,
        device="cpu",
    )
    (row,) = run_comparison(config, show_progress=False)
    run = RunConfig.from_json((tmp_path / "runs" / "explore-seed0" / "config.json").read_text())
    feedback = run.arm_config(run.feedback)
    assert (feedback.explore.scale, feedback.shaping.scale) == (0.5, 0.0)
    # Validation episodes last tens of steps, each paying a bonus of up to 0.5: a return
    # of at most 1 is the env's alone.
    assert row["arm"] == "explore" and 0.0 <= float(row["final_return"]) <= 1.0


@pytest.mark.parametrize("trainer", ["sb3", "torch"])
def test_a_reexplore_arm_restarts_and_counts_its_replayed_steps(tmp_path, trainer):
    config = _small(
        tmp_path,
        ["shaping+reexplore"],
        steps=256,
        eval_every=2,
        eval_episodes=2,
        restart_demos=2,
        feedback_overrides={"reexplore": {"prob": 1.0}},
        trainer=trainer,
        device="cpu",
    )
    (row,) = run_comparison(config, show_progress=False)
    run_dir = tmp_path / "runs" / "shaping+reexplore-seed0"
    run = RunConfig.from_json((run_dir / "config.json").read_text())
    feedback = run.arm_config(run.feedback)
    assert (feedback.reexplore.prob, feedback.reexplore.demonstrations) == (1.0, 2)
    assert feedback.reexplore.demo_seed == run.seed  # the seeds behaviour cloning reads
    with (run_dir / "curve.csv").open() as file:
        replayed = [float(r["replayed_steps"]) for r in csv.DictReader(file)]
    assert replayed[-1] > 0 and replayed == sorted(replayed)
    assert row["replayed_steps"] == replayed[-1]
    assert (tmp_path / "results.md").read_text().count("replayed") >= 2


def test_restart_demos_alone_and_with_cloning_label_their_runs(tmp_path):
    from feedbackgym.training.experiments.report import find_runs

    for out, bc in (("alone", 0), ("cloned", 2)):
        config = _small(
            tmp_path / out,
            ["shaping"],
            steps=128,
            eval_every=1,
            eval_episodes=2,
            bc_episodes=bc,
            restart_demos=2,
            device="cpu",
        )
        run_comparison(config, show_progress=False)
    runs, _ = find_runs([tmp_path / "alone", tmp_path / "cloned"])
    assert sorted(run.arm for run in runs) == ["bc2+restarts2+shaping", "restarts2+shaping"]
    run = RunConfig.from_json(
        (tmp_path / "alone" / "runs" / "shaping-seed0" / "config.json").read_text()
    )
    restarts = run.arm_config(run.feedback).reexplore
    assert (restarts.prob, restarts.demonstrations) == (0.0, 2)  # no review restarts


def test_compare_command_rejects_bad_input(tmp_path):
    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "feedbackgym", "compare", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    out = ["--out", str(tmp_path)]
    refused = [
        (["--quick", "--arms", "sparse,teacher", *out], "unknown arm 'teacher'"),
        (["--quick", "--arms", "shaping+failure-hints", *out], "unknown arm"),
        (["--quick", "--arms", "guide+distill", *out], "+distill is train-llm's"),
        (["--env", "feedbackgym/OpsIncidentEasy-v0"], "--arms"),
        (["--quick", "--env", "feedbackgym/Nope-v0", *out], "unknown env id"),
        (["--quick", "--dropout", "1.5", *out], "--dropout"),
        (["--quick", "--dropout-scope", "round", *out], "--dropout-scope"),
        (["--quick", "--shaping-terminal", "never", *out], "--shaping-terminal"),
        (["--quick", "--gamma", "0", *out], "shaping.gamma"),
        (["--quick", "--explore-scale", "0", *out], "explore.scale"),
        (["--quick", "--config", str(tmp_path / "none.yaml"), *out], "cannot read config file"),
        (["--quick", "--keep-checkpoints", "-1", *out], "keep_checkpoints must be >= 0"),
        (["--quick", "--preset", "cleanrl", *out], "--preset"),
        (["--quick", "--epochs", "0", *out], "--epochs"),
    ]
    for args, message in refused:
        result = run(*args)
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)


def test_compare_command_passes_the_schedule_and_dropout_options(tmp_path):
    args = ["--env", "feedbackgym/OpsIncidentEasy-v0", "--arms", "sparse", "--seeds", "1"]
    args += ["--steps", "1024", "--switch-at", "0.3", "--fade", "2", "--dropout", "0.2"]
    args += ["--dropout-scope", "step", "--keep-checkpoints", "1"]
    args += ["--shaping-terminal", "zero_on_harm", "--gamma", "1"]
    args += ["--preset", "sb3", "--n-envs", "4", "--epochs", "2", "--out", str(tmp_path)]
    result = subprocess.run(
        [sys.executable, "-m", "feedbackgym", "compare", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["keep_checkpoints"] == 1
    # the preset's settings, its own flags over it
    settings = {k: config[k] for k in ("n_envs", "n_steps", "n_epochs", "batch_size")}
    assert settings == {"n_envs": 4, "n_steps": 128, "n_epochs": 2, "batch_size": 256}
    assert config["feedback_overrides"] == {
        "guide": {"dropout": 0.2, "dropout_scope": "step"},
        "schedule": {"fade": 2.0, "switch_at": 0.3},
        "shaping": {"gamma": 1.0, "terminal": "zero_on_harm"},
    }
    run = RunConfig.from_json((tmp_path / "runs" / "sparse-seed0" / "config.json").read_text())
    assert (run.n_envs, run.n_epochs, run.learning_rate) == (4, 2, 3e-4)
    feedback = run.arm_config(run.feedback)
    assert (feedback.shaping.terminal, feedback.shaping.gamma) == ("zero_on_harm", 1.0)
    assert (feedback.schedule.switch_at, feedback.schedule.fade) == (0.3, 2.0)


def test_success_around_the_switch_leaves_out_seeds_that_never_switched():
    switched = {
        "phase": np.array(["guide", "guide", "fade", "review", "review"]),
        "success": np.array([0.1, 0.5, 0.6, 0.7, 0.9]),
    }
    held = {"phase": np.array(["guide"] * 5), "success": np.zeros(5)}
    assert success_around_switch([switched, held]) == pytest.approx((0.5, 0.8))
    assert all(math.isnan(x) for x in success_around_switch([held]))


def test_a_resumed_comparison_counts_the_steps_its_runs_have_done(tmp_path):
    (tmp_path / "state.json").write_text(json.dumps({"round": 3, "timesteps": 512}))
    assert _steps_done(str(tmp_path)) == 512 and _steps_done(str(tmp_path / "new")) == 0


def _children(pid):
    """Pids of the processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def test_a_killed_comparison_leaves_no_worker_behind(tmp_path):
    from feedbackgym._process import pid_alive

    args = ["--env", "feedbackgym/OpsIncidentEasy-v0", "--arms", "sparse", "--seeds", "1"]
    args += ["--steps", "1000000", "--out", str(tmp_path)]
    parent = subprocess.Popen(
        [sys.executable, "-m", "feedbackgym", "compare", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (tmp_path / "runs" / "sparse-seed0").exists():
        time.sleep(0.2)
    children = _children(parent.pid)
    assert children, "the comparison started no worker"
    parent.kill()  # kill -9: no cleanup in the parent
    parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(pid_alive(pid) for pid in children):
        time.sleep(0.2)
    assert not any(pid_alive(pid) for pid in children)


def test_alerts_stay_out_of_the_progress_bar_and_are_summed_up_after_it(tmp_path, capfd):
    config = _small(
        tmp_path,
        ["shaping"],
        steps=512,
        eval_every=8,
        eval_episodes=1,
        bc_episodes=8,  # a warm-up from the expert: episodes end, some succeed
        # Any fall of the mean return, in any round: fires in a run this short.
        feedback_overrides={"alert": {"reading": "each", "rounds": 1, "drop": 0.01, "floor": 0}},
        device="cpu",
    )
    run_comparison(config, show_progress=True)
    out, err = capfd.readouterr()
    run = tmp_path / "runs" / "shaping-seed0"
    fired = json.loads((run / "state.json").read_text())["alerts"]
    assert fired, "the alert never fired: the test needs a run whose mean falls"
    assert "mean reward fell" not in out + err
    assert "mean reward fell" in (run / "run.log").read_text()
    lines = err.replace("\r", "\n").strip().splitlines()
    assert lines[-1].startswith("reward-drop alert: shaping-seed0 at round")
    assert lines[-1].split(" at round")[1].lstrip("s ").startswith(", ".join(map(str, fired)))
    assert "compare" in err.split("reward-drop alert:")[0]  # the bar, closed before the summary
