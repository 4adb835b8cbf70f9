"""Torch runs: the SB3 path's run directory, resume, validation, TensorBoard, recording."""

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from feedbackgym.config import FeedbackConfig, merge_config
from feedbackgym.errors import ConfigError
from feedbackgym.training.common.run_files import read_curve
from feedbackgym.training.common.run_settings import RunConfig, open_store
from feedbackgym.training.experiments.launch import train_run
from feedbackgym.training.torch_ppo.run_torch import rollback

FEEDBACK = merge_config(FeedbackConfig(), {"schedule": {"fade": 1, "adaptive": None}})


def _config(tmp_path, steps=512, **kwargs):
    return RunConfig(
        env_id="feedbackgym/OpsIncident-v0",
        arm="guide-then-review",
        seed=0,
        total_steps=steps,
        out_dir=str(tmp_path / "run"),
        n_envs=2,
        n_steps=32,
        eval_every=2,
        eval_episodes=2,
        net_arch=[16, 16],
        feedback=FEEDBACK,
        env_kwargs={"difficulty": "easy"},
        trainer="torch",
        device="cpu",
        **kwargs,
    )


def test_a_torch_run_fills_the_run_directory_and_records_every_episode(tmp_path):
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator"
    )
    from feedbackgym.datasets import TrajectoryStore

    state = train_run(_config(tmp_path, record=True))
    run = tmp_path / "run"
    assert state["round"] == 7 and state["timesteps"] == 512 and state["alerts"] == []
    names = sorted(p.name for p in (run / "checkpoints").glob("*.pt"))
    assert names == ["best.pt", *(f"round_{r:04d}.pt" for r in range(3, 8))]
    curve = read_curve(run)
    assert list(curve["round"]) == [1.0, 3.0, 5.0, 7.0, 8.0]
    assert {"guide", "review"} <= set(curve["phase"])  # validated in the controller's state
    assert ((0 <= curve["success_unguided"]) & (curve["success_unguided"] <= 1)).all()
    assert RunConfig.from_json((run / "config.json").read_text()).trainer == "torch"
    accumulator = event_accumulator.EventAccumulator(str(run / "tb" / "guide-then-review_seed0_1"))
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    for tag in (
        "rollout/ep_rew_mean",
        "train/loss",
        "train/value_loss",
        "feedback/phase",
        "feedback/guide_weight",
        "feedback/hints_per_episode",
        "feedback/config_version",
        "feedback/validation_success",
        "feedback/validation_success_unguided",
        "feedback/hint_reliance",
        "feedback/alert",
        "system/steps_per_s",
        "system/rss_mb",
    ):
        assert tag in tags, tag
    phases = [e.value for e in accumulator.Scalars("feedback/phase")]
    assert phases[0] == 1.0 and phases[-1] == 3.0  # guide ... review
    with TrajectoryStore(run / "trajectories") as store:
        metas = store.episodes()
        episodes = list(store.iter_episodes())
    rounds = {int(m.round) for m in metas}  # filed under the round they started in
    assert 0 in rounds and max(rounds) >= 5
    assert 512 - 2 * 80 <= sum(m.length for m in metas) <= 512
    kinds = np.concatenate([e.columns["feedback/type"] for e in episodes])
    assert (kinds & 1).any() and (kinds & 2).any()  # hints and reviews
    agent = rollback(run)
    assert isinstance(agent, torch.nn.Module)


def test_a_run_records_through_a_writer_process_unless_its_envs_are_in_workers(tmp_path):
    store = open_store(_config(tmp_path, record=True))
    try:
        assert store.writer == "process"  # encoding, log and seal off the training thread
    finally:
        store.close()
    assert open_store(_config(tmp_path, record=True, env_workers=1)) == str(
        tmp_path / "run" / "trajectories"
    )  # each worker opens the store at the path
    assert open_store(_config(tmp_path)) is None


def test_env_workers_step_a_run_s_envs_and_record_every_episode_in_shards(tmp_path):
    import multiprocessing

    from feedbackgym.datasets import TrajectoryStore

    state = train_run(_config(tmp_path, record=True, env_workers=1))
    assert state["timesteps"] == 512
    assert not [p for p in multiprocessing.active_children() if p.is_alive()]
    with TrajectoryStore(tmp_path / "run" / "trajectories") as store:
        metas = store.episodes()
    assert 512 - 2 * 80 <= sum(m.length for m in metas) <= 512  # each env's shard, read as one
    assert len({m.shard for m in metas}) == 2  # one writer per env, in the worker process


def test_a_run_whose_env_worker_dies_fails_clearly_keeps_its_episodes_and_resumes(tmp_path):
    import multiprocessing

    from feedbackgym.datasets import TrajectoryStore
    from feedbackgym.training.workers.env_groups import EnvWorkerError

    config = _config(tmp_path, record=True, env_workers=1)

    def kill_the_worker(steps):
        if steps == 256:  # after round 3 (its checkpoint is saved)
            for process in multiprocessing.active_children():
                process.kill()

    with pytest.raises(EnvWorkerError, match="died"):
        train_run(config, progress=kill_the_worker)
    assert not [p for p in multiprocessing.active_children() if p.is_alive()]
    with TrajectoryStore(tmp_path / "run" / "trajectories") as store:
        before = sum(m.length for m in store.episodes())  # what the killed worker had logged
    state = train_run(config, resume=True)
    assert state["timesteps"] == 512
    with TrajectoryStore(tmp_path / "run" / "trajectories") as store:
        after = sum(m.length for m in store.episodes())
    assert 0 < before < after


def test_a_run_resumed_with_other_settings_is_refused_naming_them(tmp_path):
    first = _config(tmp_path, steps=128)
    train_run(first)
    with pytest.raises(ConfigError, match=r"learning_rate: 0.001 -> 0.0003; seed: 0 -> 1"):
        changed = dataclasses.replace(first, total_steps=256, learning_rate=3e-4, seed=1)
        train_run(changed, resume=True)
    with pytest.raises(ConfigError, match=r"feedback: .*'switch_at': 0.4.*'switch_at': 0.5"):
        other = merge_config(FEEDBACK, {"schedule": {"switch_at": 0.5}})
        train_run(dataclasses.replace(first, total_steps=256, feedback=other), resume=True)
    # its length, where it lives and what it keeps may change
    moved = dataclasses.replace(first, total_steps=192, keep_checkpoints=2, env_workers=1)
    assert train_run(moved, resume=True)["timesteps"] == 192


def test_a_torch_run_resumes_where_it_stopped(tmp_path):
    first = _config(tmp_path, steps=256)
    finished = train_run(first)
    assert train_run(dataclasses.replace(first, learning_rate=3e-4), resume=True) == finished
    state = train_run(_config(tmp_path, steps=512), resume=True)
    assert state["round"] == 7 and state["timesteps"] == 512
    assert list(read_curve(tmp_path / "run")["round"]) == [1.0, 3.0, 4.0, 5.0, 7.0, 8.0]
    assert len(state["controller"]["schedule"]["history"]) == 0  # fixed switch: nothing moved
    with pytest.raises(FileNotFoundError):
        rollback(tmp_path / "nothing")


def test_a_cloned_torch_run_s_curve_starts_with_the_clone_and_a_restart_clones_anew(tmp_path):
    from feedbackgym.training.common.run_files import prepare_run_dir

    config = _config(tmp_path, steps=128, bc_episodes=20)
    train_run(config)
    curve = read_curve(tmp_path / "run")
    assert list(curve["step"]) == [0, 64, 128] and list(curve["round"]) == [0, 1, 2]
    (tmp_path / "run" / "state.json").unlink()  # as if it stopped before its first round
    prepare_run_dir(config, resume=True)
    assert not (tmp_path / "run" / "curve.csv").exists()  # the clone is validated again


def test_a_torch_run_refuses_a_network_it_cannot_build(tmp_path):
    with pytest.raises(ValueError, match="two hidden layers"):
        train_run(dataclasses.replace(_config(tmp_path), net_arch=[64, 32]))


def test_the_train_command_runs_the_torch_trainer(tmp_path):
    out = tmp_path / "cli"
    args = ["train", "--env", "feedbackgym/OpsIncidentEasy-v0", "--steps", "1024", "--n-envs", "4"]
    args += ["--trainer", "torch", "--device", "cpu", "--env-workers", "1", "--overlap-update"]
    args += ["--out", str(out), "--gamma", "0.95"]
    validation = ["--eval-episodes", "3", "--eval-every", "2"]
    result = subprocess.run(
        [sys.executable, "-m", "feedbackgym", *args, *validation],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[0])["timesteps"] == 1024
    saved = RunConfig.from_json((out / "config.json").read_text())
    assert saved.arm_config(saved.feedback).shaping.gamma == 0.95 and saved.env_workers == 1
    assert saved.overlap_update and (saved.eval_episodes, saved.eval_every) == (3, 2)
    refused = subprocess.run(
        [sys.executable, "-m", "feedbackgym", *args[:-2], "--device", "cuda:7"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if not torch.cuda.is_available():
        assert refused.returncode == 2 and "no CUDA GPU" in refused.stderr


def test_the_reliance_rule_moves_a_torch_run_s_dropout_at_each_validation(tmp_path):
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator"
    )
    always = {"raise_above": -1.0, "lower_below": -1.0}  # any reliance over -1 raises it
    state = train_run(_config(tmp_path, feedback_overrides={"reliance": always}))
    curve = read_curve(tmp_path / "run")
    hinted = np.isin(curve["phase"], ["guide", "fade"])  # validations where the guide spoke
    moves = int((hinted & (curve["success"] - curve["success_unguided"] > -1)).sum())
    assert moves >= 1
    dropout = state["controller"]["reliance"]["dropout"]
    assert dropout == pytest.approx(min(0.5 + 0.1 * moves, 0.9))
    accumulator = event_accumulator.EventAccumulator(
        str(tmp_path / "run" / "tb" / "guide-then-review_seed0_1")
    )
    accumulator.Reload()
    logged = [e.value for e in accumulator.Scalars("feedback/guide_dropout")]
    assert logged[0] == pytest.approx(0.5) and logged[-1] == pytest.approx(dropout)
    assert logged == sorted(logged)  # one round at each dropout, as it rose
