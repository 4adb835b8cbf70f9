"""``RecordTrajectories`` records every feedback field, and leaves them neutral on a bare env."""

import json
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.registration import EnvSpec

from feedbackgym.datasets import FeedbackType, TrajectoryStore
from feedbackgym.wrappers import RecordTrajectories

from .utils import feedback_stack, play


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_records_feedback_schedule_subgoals_and_rewards(store_path, writer):
    store = TrajectoryStore(store_path, writer=writer)
    env = RecordTrajectories(feedback_stack(obs_mode="both"), store, round=0)
    before = time.time()
    guided = play(env, [0, 1])
    env.get_wrapper_attr("set_progress")(60)  # review phase
    env.set_round(1)
    reviewed = play(env, [2])
    env.close()
    store.close()
    episodes = list(TrajectoryStore(store_path).iter_episodes())
    assert [e.meta.round for e in episodes] == ["0", "0", "1"]
    for episode, infos in zip(episodes, guided + reviewed, strict=True):
        meta = episode.meta
        assert meta.length == len(infos) - 1 and meta.success is True
        assert meta.outcome == infos[-1]["outcome"] and meta.start_time >= before
        assert episode.observations["text"][0].startswith("Goal:")
        assert episode.phases == [i["feedback"]["phase"] for i in infos]
        assert episode.column("schedule/guide_weight").tolist() == [
            i["feedback"]["guide_weight"] for i in infos
        ]
        assert episode.subgoals == [i["subgoals"] for i in infos]
        assert episode.env_rewards.tolist() == [i["env_reward"] for i in infos[1:]]
        assert episode.shaping_rewards.tolist() == [i["shaping_reward"] for i in infos[1:]]
        np.testing.assert_allclose(episode.rewards, episode.env_rewards + episode.shaping_rewards)
        expected = [
            (row, kind, info["feedback"][key])
            for row, info in enumerate(infos)
            for kind, key in ((FeedbackType.GUIDE, "guide"), (FeedbackType.REVIEW, "review"))
            if info["feedback"][key]
        ]
        assert [(e.row, e.type, e.payload) for e in episode.events] == expected
        assert gym.make(EnvSpec.from_json(meta.env_spec)).spec.id == meta.task_id
    assert {e.type for e in episodes[0].events} == {FeedbackType.GUIDE}
    assert [e.type for e in episodes[2].events] == [FeedbackType.REVIEW]  # at the last step
    assert episodes[2].events[0].row == episodes[2].meta.length
    assert episodes[0].meta.switch_time is None
    assert episodes[1].meta.end_time < episodes[2].meta.switch_time < episodes[2].meta.end_time


def test_the_switch_time_stays_when_the_phase_first_left_guide(store_path):
    env = RecordTrajectories(feedback_stack(), store_path)
    play(env, [0])
    env.get_wrapper_attr("set_progress")(60)  # review phase from the next reset on
    play(env, [1, 2])
    env.close()
    first, second, third = sorted(TrajectoryStore(store_path).episodes(), key=lambda m: m.seed)
    assert first.switch_time is None
    assert first.end_time < second.switch_time == third.switch_time < second.end_time


def test_a_round_that_cannot_name_an_hdf5_group_is_refused_at_once(store_path):
    env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), store_path)
    for bad in ("2024/06", "", ".."):
        with pytest.raises(ValueError, match="round"):
            env.set_round(bad)
    env.close()


def test_config_version_and_change_times(store_path, tmp_path):
    config = tmp_path / "feedback.yaml"
    config.write_text("guide: {every: 2}\n")
    env = RecordTrajectories(feedback_stack(config=config), store_path)
    play(env, [0])
    config.write_text("guide: {every: 3}\n")
    env.get_wrapper_attr("set_progress")(1)  # re-reads the file
    play(env, [1])
    env.close()
    first, second = TrajectoryStore(store_path).episodes()
    assert (first.config_version, first.config_changes) == (1, ())
    assert second.config_version == 2
    (change,) = second.config_changes
    assert change["applied"] and first.end_time < change["time"] < second.start_time


def test_bare_env_records_neutral_fields(store_path):
    env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), store_path)
    (infos,) = play(env, [4])
    env.close()
    (episode,) = TrajectoryStore(store_path).iter_episodes()
    assert (
        episode.meta.seed == 4 and episode.meta.phase == "" and episode.meta.config_version is None
    )
    assert episode.events == [] and set(episode.phases) == {""}
    assert episode.env_rewards.tolist() == episode.rewards.tolist()
    assert not episode.shaping_rewards.any() and not episode.feedback_types.any()
    assert episode.subgoals == [i["subgoals"] for i in infos]


def test_text_actions_rounds_and_unfinished_episodes(store_path):
    env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), store_path, round=7)
    env.reset(seed=0)
    env.step("wait")
    env.set_round(8)  # from the next reset on
    while not env.step(env.unwrapped.expert_action())[2]:
        pass
    env.reset(seed=1)
    env.step("wait")
    env.close()  # the running episode is dropped
    (episode,) = TrajectoryStore(store_path).iter_episodes()
    assert episode.meta.round == "7"
    assert episode.actions[0] == env.unwrapped.parse_action("wait")


def test_spec_round_trip_keeps_recording(store_path):
    env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), str(store_path), round=2)
    again = gym.make(EnvSpec.from_json(env.spec.to_json()))
    assert again.get_wrapper_attr("store").path == store_path
    assert again.get_wrapper_attr("round") == "2"
    again.close()
    env.close()


def test_wrappers_import_stays_light_and_names_the_extra():
    light = (
        "import sys, feedbackgym.wrappers, feedbackgym.datasets, feedbackgym.cli; "
        "print('h5py' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", light], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    blocked = (
        "import sys; sys.modules['h5py'] = None\n"
        "try:\n    from feedbackgym.wrappers import RecordTrajectories\n"
        "except ImportError as error:\n    print(error)"
    )
    out = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, check=True
    )
    assert 'pip install "feedbackgym[hdf5]"' in out.stdout


@pytest.mark.parametrize("vector", ["gymnasium", "sb3"])
def test_vector_env_workers_write_shards_one_store_reads(store_path, vector):
    def make():
        env = gym.make("feedbackgym/OpsIncidentEasy-v0")
        return RecordTrajectories(env, store_path)

    if vector == "sb3":
        vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
        envs = vec_env.SubprocVecEnv([make, make], start_method="fork")
        set_round = lambda r: envs.env_method("set_round", r)  # noqa: E731
        envs.reset()
        step = lambda: envs.step(np.zeros(2, int))  # noqa: E731
    else:
        envs = gym.vector.AsyncVectorEnv([make, make])
        set_round = lambda r: envs.call("set_round", r)  # noqa: E731
        envs.reset(seed=0)
        step = lambda: envs.step(np.zeros(2, int))  # noqa: E731
    try:
        set_round(5)  # applies from each worker's next reset
        for _ in range(150):  # "inspect metrics lb" forever: the budget runs out in 69 steps
            step()
    finally:
        envs.close()
    metas = TrajectoryStore(store_path).episodes()
    assert len({m.shard for m in metas}) == 2
    assert sorted((m.round, m.length) for m in metas) == [("0", 69)] * 2 + [("5", 69)] * 2
    assert not list(store_path.glob("*.log"))  # closed workers sealed their shards
    assert json.loads(metas[0].env_spec)["id"] == "feedbackgym/OpsIncidentEasy-v0"


def test_the_store_keeps_the_task_key_the_agent_never_saw(store_path):
    env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v2", split="test"), store_path)
    keys = []
    for seed in (3, 5):
        _, info = env.reset(seed=seed)
        keys.append(env.unwrapped.task_key())
        assert "incident" not in info and keys[-1] not in str(info)
        done = False
        while not done:
            *_, terminated, truncated, info = env.step(env.unwrapped.expert_action())
            done = terminated or truncated
            assert keys[-1] not in str(info)
    env.close()
    stored = TrajectoryStore(store_path)
    assert [m.task_key for m in stored.episodes()] == keys
    assert all(k.startswith("easy/") for k in keys)
    assert TrajectoryStore(store_path).episodes()[0].seed == 3
