import gymnasium as gym
import pytest

import feedbackgym  # noqa: F401
from feedbackgym.wrappers import AddReview


def _env(**kwargs):
    obs_mode = kwargs.pop("obs_mode", "both")
    return AddReview(gym.make("feedbackgym/OpsIncidentMedium-v0", obs_mode=obs_mode), **kwargs)


def _play(env, actions, seed=0):
    obs, info = env.reset(seed=seed)
    infos, observations = [info], [obs]
    for action in actions:
        obs, _, terminated, truncated, info = env.step(action)
        infos.append(info)
        observations.append(obs)
        if terminated or truncated:
            break
    return observations, infos


def test_review_only_on_the_final_step():
    env = _env(window=5, channels=("info", "credit"))
    _, infos = _play(env, ["wait", "wait", "scale down web", "wait", "escalate"])
    assert all(i["feedback"]["review"] == {} for i in infos[:-1])
    review = infos[-1]["feedback"]["review"]
    assert review["window"] == [0, 4]
    assert [p["step"] for p in review["reexplore"]][:2] == [2, 4]
    credit = infos[-1]["feedback"]["credit"]
    assert credit["start"] == 0 and len(credit["values"]) == 5 and credit["values"][2] < 0


def test_window_covers_the_last_n_steps():
    env = _env(window=3)
    _, infos = _play(env, ["wait"] * 6 + ["escalate"])
    assert infos[-1]["feedback"]["review"]["window"] == [4, 6]


def test_expert_episode_review_marks_reusable_segments():
    env = _env(window=40)
    obs, info = env.reset(seed=1)
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        done = terminated or truncated
    review = info["feedback"]["review"]
    assert review["success"] and review["score"] == 1.0 and not review["reexplore"]
    assert [s["subgoal_id"] for s in review["reusable"]][-1] == "declare_resolved"


def test_text_channel_carries_the_review_into_the_next_first_observation_only():
    env = _env(channels=("text",))
    observations, _ = _play(env, ["wait", "escalate"])
    assert all("Review of your last attempt" not in o["text"] for o in observations)
    obs, _ = env.reset(seed=1)
    assert "Review of your last attempt" in obs["text"] and env.observation_space.contains(obs)
    obs, *_ = env.step("wait")
    assert "Review of your last attempt" not in obs["text"]


def test_vector_channel_summarises_the_last_episode():
    env = _env(channels=("vector",))
    obs, _ = env.reset(seed=0)
    assert obs["review_present"][0] == 0 and not obs["review_reached"].any()
    _play(env, [env.unwrapped.expert_action() for _ in range(1)] + ["escalate"])
    obs, _ = env.reset(seed=2)
    assert obs["review_present"][0] == 1 and 0 < obs["review_flag"][0] <= 1
    assert env.observation_space.contains(obs)


def test_vector_fields_are_read_only():
    env = AddReview(gym.make("feedbackgym/OpsIncidentEasy-v0"), channels=("vector",))
    obs, _ = env.reset(seed=0)
    with pytest.raises(ValueError, match="read-only"):
        obs["review_present"][0] = 1


def test_weight_zero_means_no_reviews_and_the_action_level_is_opt_in():
    env = _env(weight=0.0)
    _, infos = _play(env, ["escalate"])
    assert infos[-1]["feedback"]["review"] == {}
    env = _env(level="action")
    env.reset(seed=0)
    expected = env.unwrapped.expert_action()
    info = env.step("escalate")[-1]
    assert info["feedback"]["review"]["reexplore"][0]["action_suggestion"] == expected
    stats = env.feedback_stats()
    assert stats["reviews_given"] == stats["episodes_ended"] == 1


def test_bad_arguments():
    with pytest.raises(ValueError, match="channels"):
        _env(channels=())
    with pytest.raises(ValueError, match="window"):
        _env(window=0)
