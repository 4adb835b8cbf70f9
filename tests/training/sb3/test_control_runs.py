"""The controller in real SB3 runs: one state for every worker, resume, config edits mid-run."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import SubprocVecEnv, VecMonitor

import feedbackgym
from feedbackgym.config import FeedbackConfig, merge_config
from feedbackgym.control import FeedbackController
from feedbackgym.training.common.arms import arm_config
from feedbackgym.training.common.run_files import read_curve
from feedbackgym.training.experiments.launch import train_run
from feedbackgym.training.sb3.callbacks import feedback_callbacks
from feedbackgym.training.sb3.run_sb3 import RunConfig

ENV = "feedbackgym/OpsIncidentEasy-v0"


def test_every_subprocess_worker_has_the_controller_s_state_at_every_round():
    adaptive = {"metric": "return", "window": 2, "min_success": 0.0, "shift": 0.2}
    base = merge_config(FeedbackConfig(), {"schedule": {"fade": 2, "adaptive": adaptive}})
    config = arm_config("guide-then-review", base, rounds=12)
    venv = VecMonitor(SubprocVecEnv([lambda: feedbackgym.make(ENV, config)] * 4))
    controller = FeedbackController(config)
    seen = []

    def check(round_, _metrics):
        states = venv.get_attr("feedback_state")
        assert all(state == controller.state for state in states), (round_, states)
        seen.append(states[0])

    try:
        model = PPO("MultiInputPolicy", venv, n_steps=16, batch_size=64, n_epochs=1, seed=0)
        model.learn(12 * 64, callback=feedback_callbacks(controller, on_round=check))
    finally:
        venv.close()
    assert [s.round for s in seen] == list(range(12))
    assert {s.phase for s in seen} == {"guide", "fade", "review"}
    assert len({s.guide_weight for s in seen}) >= 3  # the weights moved, in step on all four


def _run(tmp_path, steps):
    hold = {"metric": "return", "min_success": 1.0, "max_switch": 0.6}  # held round by round
    return RunConfig(
        env_id="feedbackgym/OpsIncident-v0",
        arm="guide-then-review",
        seed=0,
        total_steps=steps,
        out_dir=str(tmp_path),
        n_envs=2,
        n_steps=32,
        eval_every=1,
        eval_episodes=2,
        net_arch=[8],
        feedback=merge_config(
            FeedbackConfig(), {"schedule": {"switch_at": 0.2, "fade": 1, "adaptive": hold}}
        ),
        env_kwargs={"difficulty": "easy", "max_steps": 8},
        trainer="sb3",
    )


class _Crash(Exception):
    """Stops a run after a round, as a killed process would."""


def test_an_interrupted_and_resumed_run_switches_at_the_same_round_as_an_uninterrupted_one(
    tmp_path,
):
    whole = train_run(_run(tmp_path / "whole", 10 * 64))

    def crash_after_round_4(steps):
        if steps >= 5 * 64:
            raise _Crash

    with pytest.raises(_Crash):
        train_run(_run(tmp_path / "parts", 10 * 64), progress=crash_after_round_4)
    assert json.loads((tmp_path / "parts" / "state.json").read_text())["round"] == 4
    resumed = train_run(_run(tmp_path / "parts", 10 * 64), resume=True)
    phases = [list(read_curve(tmp_path / name)["phase"]) for name in ("whole", "parts")]
    assert phases[0] == phases[1]
    assert phases[0].index("fade") == 5  # the switch held round by round up to 0.6 x 10
    schedules = whole["controller"]["schedule"], resumed["controller"]["schedule"]
    assert schedules[0]["switch_at"] == schedules[1]["switch_at"] == 0.6
    assert schedules[0]["history"] == schedules[1]["history"]  # the same holds, round by round


def _write(path, text):
    path.write_text(text)
    stamp = time.time_ns() + 1_000_000
    os.utime(path, ns=(stamp, stamp))


def test_editing_the_config_file_during_a_compare_run_changes_the_guide_density_on_every_env(
    tmp_path,
):
    from feedbackgym.datasets import TrajectoryStore

    config = tmp_path / "feedback.yaml"
    _write(config, "guide: {every: 1, dropout: 0.0}\n")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "feedbackgym", "compare", "--env", ENV, "--arms", "guide"]
    command += ["--seeds", "1", "--steps", str(12 * 1024), "--config", str(config), "--record"]
    command += ["--out", str(out), "--jobs", "1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    state_file = out / "runs" / "guide-seed0" / "state.json"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        if state_file.exists() and json.loads(state_file.read_text())["round"] >= 1:
            break
        time.sleep(0.05)
    _write(config, "guide: {every: 3, dropout: 0.0}\n")
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr.decode()[-2000:]
    with TrajectoryStore(out / "runs" / "guide-seed0" / "trajectories") as store:
        episodes = list(store.iter_episodes())
    versions = {episode.meta.config_version for episode in episodes}
    assert versions == {1, 2}
    first_new = min(int(e.meta.round) for e in episodes if e.meta.config_version == 2)
    spaced = 0
    for episode in episodes:
        hints = np.flatnonzero(episode.columns["feedback/type"] & 1)
        gaps = set(np.diff(hints).tolist())
        if episode.meta.config_version == 1:
            assert gaps <= {1}  # a hint at every step
        elif int(episode.meta.round) > first_new:  # started after the edit
            assert gaps <= {3}, gaps  # a hint every 3 steps
            spaced += len(hints) >= 2
    assert spaced >= 8
