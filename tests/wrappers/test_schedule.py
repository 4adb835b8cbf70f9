import os
import time

import gymnasium as gym
import pytest

import feedbackgym  # noqa: F401
from feedbackgym.schedules import GuideReviewSchedule
from feedbackgym.wrappers import AddGuide, AddReview, FadeGuideToReview, ShapeWithSubgoals

PHASES = {"guide": 0, "fade": 42, "review": 90}


def stack(
    obs_mode="both",
    guide_channels=("text", "vector", "info"),
    review_channels=("text", "vector", "info", "credit"),
    **kwargs,
):
    env = gym.make("feedbackgym/OpsIncidentMedium-v0", obs_mode=obs_mode)
    env = ShapeWithSubgoals(env)
    env = AddGuide(env, every=2, channels=guide_channels, dropout=0.0)
    env = AddReview(env, window=10, channels=review_channels)
    return FadeGuideToReview(env, **kwargs)


def _run_episode(env, seed):
    obs, info = env.reset(seed=seed)
    steps = [(obs, info)]
    done = False
    while not done:
        action = env.unwrapped.expert_action() if len(steps) % 4 else "scale down web"
        obs, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(obs)
        steps.append((obs, info))
        done = terminated or truncated
    return steps


@pytest.mark.parametrize("phase", PHASES)
def test_every_channel_in_every_phase(phase):
    env = stack(schedule={"switch_at": 0.4, "fade": 5, "total": 100})
    state = env.set_progress(PHASES[phase])
    assert state.phase == phase
    hints, reviews = 0, 0
    for seed in range(6):
        steps = _run_episode(env, seed)
        hints += sum(info["feedback"]["guide"] != {} for _, info in steps)
        final = steps[-1][1]["feedback"]
        reviews += final["review"] != {}
        assert final["phase"] == phase
        assert all(info["feedback"]["review"] == {} for _, info in steps[:-1])
        assert all("shaping_reward" in info for _, info in steps[1:])
    if phase == "guide":
        assert hints > 0 and reviews == 0
    elif phase == "review":
        assert hints == 0 and reviews == 6
    else:
        assert hints > 0 and reviews > 0


def test_weights_reach_the_inner_wrappers_and_schedule_objects_work():
    env = stack(schedule=GuideReviewSchedule(switch_at=0.5, fade=2, total=10))
    env.set_progress(5.5)
    guide = env.env.env
    review = env.env
    assert guide.weight == pytest.approx(0.75) and review.weight == pytest.approx(0.25)
    env.report(loss=1.0)  # no adaptive rule: accepted and ignored


def test_arms_by_name():
    env = stack(schedule="review-then-guide")
    assert env.set_progress(0).phase == "review"
    assert stack(schedule="sparse").set_progress(50).guide_weight == 0.0


def test_needs_a_feedback_wrapper():
    with pytest.raises(ValueError, match="AddGuide"):
        FadeGuideToReview(gym.make("feedbackgym/OpsIncidentEasy-v0"))


def _write(path, text):
    path.write_text(text)
    stamp = time.time_ns() + 1_000_000
    os.utime(path, ns=(stamp, stamp))


def test_config_file_is_followed_and_hot_reloaded(tmp_path):
    path = tmp_path / "feedback.yaml"
    _write(
        path,
        "guide: {every: 3}\nreview: {window: 12}\n"
        "schedule: {switch_at: 0.5, fade: 2, total: 10}\nshaping: {gamma: 0.9}\n",
    )
    env = stack(config=str(path))
    assert env.set_progress(1).phase == "guide"
    guide, review, shaping = env.env.env, env.env, env.env.env.env
    assert (guide.every, review.window, shaping.gamma) == (3, 12, 0.9)
    _write(
        path,
        "guide: {every: 5}\nreview: {window: 12}\nschedule: {switch_at: 0.1, fade: 2, total: 10}\n",
    )
    state = env.set_progress(2)
    assert guide.every == 5 and state.phase == "fade" and state.config_version == 2
    _write(path, "guide: {every: -1}\n")
    state = env.set_progress(3)
    assert guide.every == 5 and state.config_version == 2
    assert "guide.every" in state.config_changes[-1]["reason"]


def test_adaptive_switch_through_report():
    rule = {"metric": "loss", "window": 4, "min_success": 0.0}
    env = stack(schedule={"switch_at": 0.4, "fade": 5, "total": 100, "adaptive": rule})
    for round_ in range(4):
        env.set_progress(round_)
        env.report(loss=1.0)
    assert env.schedule.switch_at == pytest.approx(0.35)
    assert env.set_progress(4).switch_at == pytest.approx(0.35)


def test_fade_shaping_scales_the_potential_with_the_guide_weight():
    env = stack(schedule={"switch_at": 0.5, "fade": 2, "total": 10}, fade_shaping=True)
    shaping = env.env.env.env
    env.set_progress(5.5)
    assert shaping.scale == pytest.approx(0.75)
    env.set_progress(9)
    assert shaping.scale == 0.0
    with pytest.raises(ValueError, match="ShapeWithSubgoals"):
        FadeGuideToReview(AddGuide(gym.make("feedbackgym/OpsIncidentEasy-v0")), fade_shaping=True)
