"""The wrappers inside vector envs: feedback states reach subprocess workers, infos batch."""

import gymnasium as gym
import numpy as np
import pytest

import feedbackgym
from feedbackgym.wrappers import AddGuide, AddReview, FadeGuideToReview


def make_env():
    env = gym.make("feedbackgym/OpsIncidentEasy-v0")
    env = AddReview(
        AddGuide(env, every=2, channels=("vector", "info"), dropout=0.0),
        channels=("vector", "info"),
    )
    return FadeGuideToReview(env, schedule={"switch_at": 0.4, "fade": 5, "total": 100})


def test_async_vector_env_call():
    envs = gym.vector.AsyncVectorEnv([make_env] * 2)
    try:
        envs.reset(seed=0)
        states = envs.call("set_progress", 90)
        assert [s.phase for s in states] == ["review", "review"]
        envs.step(np.array([0, 0]))
        assert envs.get_attr("feedback_state")[1].review_weight == 1.0
        stats = envs.call("feedback_stats")
        assert all(s["guide"]["hints_given"] >= 1 and s["review"] is not None for s in stats)
    finally:
        envs.close()


def test_sb3_subproc_vec_env_method():
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    envs = vec_env.SubprocVecEnv([make_env] * 2)
    try:
        envs.reset()
        assert [s.phase for s in envs.env_method("set_progress", 42)] == ["fade", "fade"]
        envs.env_method("report", loss=1.0)
        assert envs.get_attr("feedback_state")[0].guide_weight == pytest.approx(0.6)
        obs = envs.reset()
        assert obs["hint_next"].shape == (2, 16)
    finally:
        envs.close()


def test_sb3_dummy_vec_env_shares_the_feedback_instead_of_deep_copying_it():
    import copy
    import pickle

    from stable_baselines3.common.vec_env import DummyVecEnv

    from feedbackgym.config import FeedbackConfig, merge_config

    config = merge_config(FeedbackConfig.for_arm("guide"), {"guide": {"dropout": 0.0}})
    venv = DummyVecEnv([lambda: feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", config)] * 2)
    venv.reset()
    _, _, _, infos = venv.step(np.zeros(2, int))
    feedback = infos[0]["feedback"]
    assert feedback["guide"]["subgoal_ids"]  # the hint came through
    assert copy.deepcopy(infos[0])["feedback"] is feedback  # built fresh each step: shared
    assert pickle.loads(pickle.dumps(feedback)) == feedback  # subprocess workers pickle it
    venv.close()
