"""The update worker: PPO's update in a process of its own, overlapping the next collection."""

import dataclasses
import multiprocessing

import numpy as np
import pytest
import torch

from feedbackgym.training.experiments.launch import train_run
from feedbackgym.training.torch_ppo.network import Agent, UpdateSettings, make_optimizer, ppo_update
from feedbackgym.training.torch_ppo.ppo import (
    Learner,
    PPOConfig,
    make_vector_env,
    train,
    train_rounds,
)
from feedbackgym.training.torch_ppo.update_worker import UpdateWorker, UpdateWorkerError
from tests.training.torch_ppo.discount import discounted as _discounted
from tests.training.torch_ppo.test_run_torch import _config as run_config


def _batch(size=32, obs_size=4, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(size, obs_size)).astype(np.float32),
        "actions": rng.integers(0, 3, size),
        "logprobs": np.full(size, np.log(1 / 3), np.float32),
        "advantages": rng.normal(size=size).astype(np.float32),
        "returns": rng.normal(size=size).astype(np.float32),
    }


def _alive():
    return [p for p in multiprocessing.active_children() if p.is_alive()]


def test_the_worker_trains_as_the_update_in_place_does():
    agent = Agent(obs_size=4, n_actions=3, hidden=8)
    settings = UpdateSettings(n_epochs=1, num_minibatches=1)  # one full batch: no draw
    worker = UpdateWorker(agent, settings, threads=1)
    try:
        worker.start(_batch(), learning_rate=1e-2)
        losses, weights = worker.result()
        state = worker.state_dict()
    finally:
        worker.close()
    batch = {key: torch.as_tensor(value) for key, value in _batch().items()}
    expected = ppo_update(agent, make_optimizer(agent, 1e-2), batch, settings)
    assert losses == pytest.approx(expected, rel=1e-3, abs=1e-6)
    for key, value in agent.state_dict().items():
        assert torch.allclose(weights[key], value, atol=1e-6), key
    assert sorted(state) == ["agent", "optimizer"] and state["optimizer"]["state"]
    assert not _alive()


def test_a_checkpoint_round_trip_restores_the_weights_and_the_optimizer():
    agent = Agent(obs_size=4, n_actions=3, hidden=8)
    worker = UpdateWorker(agent, UpdateSettings(), threads=1)
    other = UpdateWorker(Agent(obs_size=4, n_actions=3, hidden=8), UpdateSettings(), threads=1)
    try:
        worker.start(_batch(), learning_rate=1e-3)
        worker.result()
        saved = worker.state_dict()
        other.load_state_dict(saved)
        restored = other.state_dict()
    finally:
        worker.close()
        other.close()
    for key, value in saved["agent"].items():
        assert torch.equal(value, restored["agent"][key])
    assert restored["optimizer"]["state"][0]["step"] == saved["optimizer"]["state"][0]["step"]


def test_misuse_and_a_failing_update_are_clear_errors_and_the_worker_serves_on():
    worker = UpdateWorker(Agent(obs_size=4, n_actions=3, hidden=8), UpdateSettings(), threads=1)
    try:
        with pytest.raises(UpdateWorkerError, match="no update in progress"):
            worker.result()
        bad = _batch(obs_size=5)  # the agent reads 4 columns
        worker.start(bad, learning_rate=1e-3)
        with pytest.raises(UpdateWorkerError, match="in progress"):
            worker.start(_batch(), learning_rate=1e-3)
        with pytest.raises(UpdateWorkerError, match="in progress"):
            worker.state_dict()
        with pytest.raises(UpdateWorkerError, match="raised:(.|\n)*Traceback"):
            worker.result()
        worker.start(_batch(), learning_rate=1e-3)  # still serving
        losses, _ = worker.result()
        assert np.isfinite(losses["loss"])
    finally:
        worker.close()
    assert not _alive()


def test_a_dead_worker_is_reported_as_such():
    worker = UpdateWorker(Agent(obs_size=4, n_actions=3, hidden=8), UpdateSettings(), threads=1)
    try:
        for process in _alive():
            process.kill()
            process.join()
        with pytest.raises(UpdateWorkerError, match="died"):
            worker.start(_batch(), learning_rate=1e-3)
            worker.result()
    finally:
        worker.close()
    assert not _alive()


def _ppo(**kwargs):
    settings = {"total_steps": 512, "n_envs": 2, "n_steps": 64, "net_arch": [16, 16]}
    return PPOConfig(
        env_id="feedbackgym/OpsIncidentEasy-v0",
        arm="guide-then-review+shaping",
        device="cpu",
        **(settings | kwargs),
    )


def test_overlapped_rounds_report_the_loss_one_round_late_and_train_the_acting_weights():
    config = _ppo(overlap_update=True, update_threads=1)
    controller = config.controller()
    envs = make_vector_env(config, controller.config)
    reported = []
    update = controller.update

    def spy(round_, **trend):
        reported.append((round_, set(trend)))
        return update(round_, **trend)

    controller.update = spy
    learner = Learner(config, envs, _discounted(0.99), torch.device("cpu"))
    try:
        controller.attach(envs)
        learner.reset(0)
        controller.update(0)
        start = learner.agent.state_dict()["actor.0.weight"].clone()
        results = list(train_rounds(learner, controller, 0))
        assert [r.index for r in results] == [0, 1, 2, 3]
        assert not torch.equal(start, learner.agent.state_dict()["actor.0.weight"])
        assert "loss" not in reported[1][1]  # round 1 starts before round 0's update ends
        assert all("loss" in keys for _, keys in reported[2:])
        assert [r for r, _ in reported] == [0, 1, 2, 3]
        assert "loss" in results[-1].trend  # the last round's own loss: its pending report
    finally:
        learner.close()
        envs.close()
    assert not _alive()


def test_train_with_the_update_overlapped_learns_the_easy_task_as_the_plain_loop_does():
    plain = train(_ppo(total_steps=2048))[1]
    overlapped = train(_ppo(total_steps=2048, overlap_update=True, update_threads=1))[1]
    assert len(plain) == len(overlapped) == 16
    assert all(np.isfinite(h["loss"]) for h in overlapped)
    assert not _alive()


def test_an_overlapped_torch_run_checkpoints_from_the_worker_and_resumes(tmp_path):
    config = run_config(tmp_path, steps=256, overlap_update=True)
    train_run(config)
    checkpoint = torch.load(tmp_path / "run" / "checkpoints" / "round_0003.pt", weights_only=True)
    assert checkpoint["optimizer"]["state"]  # the worker's optimizer, 4 updates in
    state = train_run(dataclasses.replace(config, total_steps=512), resume=True)
    assert state["round"] == 7 and state["timesteps"] == 512
    assert not _alive()
    with pytest.raises(ValueError, match="torch trainer"):
        dataclasses.replace(config, trainer="sb3")
