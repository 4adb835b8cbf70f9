import dataclasses
import json

import numpy as np
import pytest
from stable_baselines3 import PPO

from feedbackgym.config import FeedbackConfig, merge_config
from feedbackgym.training.experiments.launch import train_run
from feedbackgym.training.sb3.run_sb3 import (
    RunConfig,
    _make_vec_env,
    read_curve,
    rollback,
)
from tests.training.arm_samples import TRAINED_ARMS

FEEDBACK = merge_config(FeedbackConfig(), {"schedule": {"fade": 1, "adaptive": None}})


def _config(tmp_path, arm="guide-then-review", steps=256, net_arch=(8,), **kwargs):
    kwargs.setdefault("env_kwargs", {"difficulty": "easy"})
    kwargs.setdefault("trainer", "sb3")  # these tests pin the SB3 path (PPO checkpoints)
    return RunConfig(
        env_id="feedbackgym/OpsIncident-v0",
        arm=arm,
        seed=0,
        total_steps=steps,
        out_dir=str(tmp_path / arm),
        n_envs=2,
        n_steps=32,
        eval_every=2,
        eval_episodes=2,
        net_arch=list(net_arch),
        feedback=FEEDBACK,
        **kwargs,
    )


@pytest.mark.parametrize("arm", TRAINED_ARMS)
def test_each_arm_trains_validates_and_checkpoints(tmp_path, arm):
    config = _config(tmp_path, arm)
    state = train_run(config)
    run = tmp_path / arm
    assert state["round"] == 3 and state["timesteps"] == 256
    assert sorted(p.name for p in (run / "checkpoints").glob("round_*.zip")) == [
        f"round_{i:04d}.zip" for i in range(4)
    ]
    assert (run / "checkpoints" / "best.zip").exists()
    curve = read_curve(run)
    assert (
        list(curve["round"]) == [1.0, 3.0, 4.0]
        and ((0 <= curve["success"]) & (curve["success"] <= 1)).all()
    )
    assert RunConfig.from_json((run / "config.json").read_text()) == config
    assert any((run / "tb").rglob("events.out.tfevents.*"))


def test_only_the_newest_checkpoints_are_kept_and_resume_still_works(tmp_path):
    run = tmp_path / "guide-then-review"
    train_run(_config(tmp_path, steps=320, keep_checkpoints=2))
    names = sorted(p.name for p in (run / "checkpoints").glob("*.zip"))
    assert names == ["best.zip", "round_0003.zip", "round_0004.zip"]
    state = train_run(_config(tmp_path, steps=448, keep_checkpoints=2), resume=True)
    assert state["round"] == 6
    names = sorted(p.name for p in (run / "checkpoints").glob("*.zip"))
    assert names == ["best.zip", "round_0005.zip", "round_0006.zip"]


def test_an_annealed_learning_rate_falls_to_zero_over_the_run(tmp_path):
    config = _config(tmp_path, steps=256, anneal_lr=True)
    train_run(config)
    checkpoints = tmp_path / "guide-then-review" / "checkpoints"
    rates = [
        PPO.load(checkpoints / f"round_{r:04d}.zip").policy.optimizer.param_groups[0]["lr"]
        for r in range(4)
    ]
    # SB3 counts the rollout done: after round r of 4 the rate is (3 - r) / 4 of the start
    assert rates == pytest.approx([config.learning_rate * f for f in (0.75, 0.5, 0.25, 0.0)])


def test_time_limit_cut_offs_end_episodes_for_the_learner_when_asked(tmp_path):
    config = _config(tmp_path, env_kwargs={"difficulty": "easy", "max_episode_steps": 2})
    for terminal in (False, True):
        venv = _make_vec_env(
            dataclasses.replace(config, time_limit_terminal=terminal),
            config.arm_config(config.feedback),
            None,
            seed=0,
        )
        venv.reset()
        wait = venv.env_method("parse_action", "wait")[0]
        venv.step([wait] * config.n_envs)
        _, _, dones, infos = venv.step([wait] * config.n_envs)
        assert dones.all() and [i["TimeLimit.truncated"] for i in infos] == [not terminal] * 2
        venv.close()


def test_a_negative_checkpoint_count_is_refused(tmp_path):
    with pytest.raises(ValueError, match="keep_checkpoints"):
        _config(tmp_path, keep_checkpoints=-1)


def test_resume_continues_from_the_last_checkpoint_and_rollback_loads_the_best(tmp_path):
    first = _config(tmp_path, steps=128)
    finished = train_run(first)
    checkpoints = tmp_path / "guide-then-review" / "checkpoints"
    # A round's checkpoint holds PPO's update from that round (n_epochs a round).
    assert PPO.load(checkpoints / "round_0001.zip")._n_updates == 2 * first.n_epochs
    config_file = tmp_path / "guide-then-review" / "config.json"
    # A finished run is left as it was, even when resumed under other settings.
    assert train_run(dataclasses.replace(first, learning_rate=3e-4), resume=True) == finished
    assert RunConfig.from_json(config_file.read_text()) == first
    longer = _config(tmp_path, steps=256)
    state = train_run(longer, resume=True)
    assert state["round"] == 3 and state["timesteps"] == 256
    rounds = list(read_curve(tmp_path / "guide-then-review")["round"])
    assert rounds == [1.0, 2.0, 3.0, 4.0]  # the first run's validations are kept
    model = rollback(tmp_path / "guide-then-review")
    assert model.policy is not None
    with pytest.raises(FileNotFoundError):
        rollback(tmp_path / "nothing")


def test_resume_restores_the_schedule_and_the_alert_as_they_were(tmp_path):
    # 4 rounds; the fade would start at round 1.6
    full = _config(tmp_path, steps=256, feedback_overrides={"schedule": {"adaptive": None}})
    train_run(dataclasses.replace(full, total_steps=128))  # interrupted after 2 rounds
    state_file = tmp_path / "guide-then-review" / "state.json"
    state = json.loads(state_file.read_text())
    controller = state["controller"]
    assert controller["schedule"]["switch_at"] == pytest.approx(0.4)
    controller["schedule"]["switch_at"] = 1.0  # as if the adaptive rule had held the guide on
    controller["alert"]["fired"] = [1]
    state_file.write_text(json.dumps(state))
    curve_file = tmp_path / "guide-then-review" / "curve.csv"
    lines = curve_file.read_text().splitlines()
    stray = lines[-1].replace(",2,", ",3,", 1)  # a validation whose round's state was lost
    curve_file.write_text("\n".join([*lines, stray]) + "\n")
    final = train_run(full, resume=True)
    curve = read_curve(tmp_path / "guide-then-review")
    assert list(curve["round"]) == [1.0, 2.0, 3.0, 4.0]
    assert curve["phase"][2] == "guide"  # not "review": the switch stayed where it was moved
    assert final["controller"]["schedule"]["switch_at"] == 1.0 and final["alerts"] == [1]


def test_behaviour_cloning_warm_up_learns_the_expert(tmp_path):
    config = _config(tmp_path, "guide", steps=128, bc_episodes=100, net_arch=(128, 128))
    config.eval_episodes = 10
    train_run(config)
    curve = read_curve(tmp_path / "guide")
    assert curve["step"][0] == 0 and curve["round"][0] == 0  # the clone, before any round
    assert curve["success"][0] >= 0.3  # from scratch this is ~0
    assert curve["success"][1] >= 0.3  # after 64 steps
    assert json.loads((tmp_path / "guide" / "config.json").read_text())["bc_episodes"] == 100


def test_a_recorded_run_stores_every_episode_with_its_feedback_by_round(tmp_path):
    from feedbackgym.datasets import TrajectoryStore

    config = _config(tmp_path, steps=512, record=True)
    train_run(config)
    with TrajectoryStore(tmp_path / "guide-then-review" / "trajectories") as store:
        metas = store.episodes()
        episodes = list(store.iter_episodes())
    assert metas and {m.task_id for m in metas} == {"feedbackgym/OpsIncident-v0"}
    assert {m.round for m in metas} >= {"0", "7"}  # filed under the round they started in
    steps = sum(m.length for m in metas)
    assert 512 - 2 * 80 <= steps <= 512  # episodes still running at the end are not stored
    kinds = np.concatenate([e.columns["feedback/type"] for e in episodes])
    assert (kinds & 1).any() and (kinds & 2).any()  # hints and reviews
    phases = {p.decode() for e in episodes for p in e.columns["schedule/phase"]}
    assert {"guide", "review"} <= phases
    assert any(m.switch_time is not None for m in metas)


@pytest.mark.parametrize("stopped", ["between rounds", "after reporting"])
def test_a_resumed_run_reports_each_round_s_trend_once(tmp_path, stopped):
    def config(steps):
        # 64 steps a round; the switch after the last round; a trend window never full:
        # every report stays in it.
        adaptive = {"metric": "loss", "window": 10, "min_success": 0.0}
        schedule = {"switch_at": 1.0, "adaptive": adaptive}
        return _config(tmp_path, steps=steps, feedback_overrides={"schedule": schedule})

    train_run(config(128))  # stops after training on round 1, before reporting it
    state_file = tmp_path / "guide-then-review" / "state.json"
    state = json.loads(state_file.read_text())
    rule = state["controller"]["schedule"]["rule"]
    assert len(rule["values"]) == 1  # round 0's loss
    assert set(state["pending_report"]) >= {"loss", "mean_return"}
    if stopped == "after reporting":  # as a run killed right after a rollout start saves it
        rule["values"].append(state["pending_report"]["loss"])
        state["pending_report"] = None
        state_file.write_text(json.dumps(state))
    final = train_run(config(256), resume=True)
    # Rounds 0, 1 and 2 reported once each (SB3 keeps no loss across a save, and a
    # report from its saved episodes would repeat round 1's).
    assert len(final["controller"]["schedule"]["rule"]["values"]) == 3
    assert final["pending_report"] is not None  # the run ended after training on round 3


def test_the_entity_policy_trains_with_maskable_ppo_and_validates_within_the_masks(
    tmp_path, monkeypatch
):
    from sb3_contrib import MaskablePPO

    from feedbackgym.training.sb3 import entity_policy

    config = dataclasses.replace(
        _config(tmp_path, "shaping", steps=128, net_arch=(16, 16)),
        env_id="feedbackgym/OpsIncidentEasy-v2",
        env_kwargs={},
        policy="entity",
    )
    assert config.policy == "entity"
    played = []
    predict = entity_policy.masked_predict

    def watched(model, observations, deterministic=False):
        actions = predict(model, observations, deterministic)
        pairs = zip(observations, actions, strict=True)
        played.extend(obs[entity_policy.MASK_KEY][action] for obs, action in pairs)
        return actions

    monkeypatch.setattr(entity_policy, "masked_predict", watched)
    state = train_run(config)
    assert state["timesteps"] == 128
    assert played and all(played)  # validation drew every action within its env's mask
    model = rollback(tmp_path / "shaping")
    assert isinstance(model, MaskablePPO)
    assert isinstance(model.policy.features_extractor, entity_policy.EntityExtractor)
