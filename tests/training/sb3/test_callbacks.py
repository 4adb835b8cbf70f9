import logging

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3 import DQN, PPO
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor

import feedbackgym
from feedbackgym.config import FeedbackConfig, merge_config
from feedbackgym.control import FeedbackController, RewardDropAlert
from feedbackgym.schedules import GuideReviewSchedule
from feedbackgym.training.common.arms import arm_config
from feedbackgym.training.sb3.callbacks import feedback_callbacks
from feedbackgym.training.sb3.review_credit import ReviewCredit
from feedbackgym.wrappers import AddGuide, FadeGuideToReview

EASY = {"difficulty": "easy"}
BASE = merge_config(FeedbackConfig(), {"schedule": {"fade": 1, "adaptive": None}})


def config_for(arm="guide-then-review", rounds=4, **schedule):
    return arm_config(arm, merge_config(BASE, {"schedule": schedule}), rounds)


def make_env(config, **env_kwargs):
    return lambda: feedbackgym.make("feedbackgym/OpsIncident-v0", config, **(env_kwargs or EASY))


def test_alert_fires_on_a_synthetic_reward_drop(caplog):
    fired = []
    alert = RewardDropAlert(
        hook=lambda round_, message: fired.append((round_, message)), smoothing=1.0, noise=0.0
    )
    with caplog.at_level(logging.WARNING):
        results = [alert.update(r, v) for r, v in enumerate([1.0, 1.0, 0.7, 0.5, 0.35, 0.34])]
    assert results == [False, False, False, False, True, False]
    assert fired[0][0] == 4 and "lengthen the fade" in fired[0][1] and "20%" in caplog.text
    steady = [1.0, 0.85, 0.7, 0.6, 0.5]  # under 20% a round, over 20% in three
    each = RewardDropAlert(reading="each", smoothing=1.0, noise=0.0)
    assert not any(each.update(r, v) for r, v in enumerate(steady))
    cumulative = RewardDropAlert(smoothing=1.0, noise=0.0)
    assert any(cumulative.update(r, v) for r, v in enumerate(steady))
    negative = RewardDropAlert(smoothing=1.0, noise=0.0)  # falling returns below zero fall too
    assert [negative.update(r, v) for r, v in enumerate([-1.0, -1.5, -2.5, -4.0])][-1]
    with pytest.raises(ValueError):
        RewardDropAlert(drop=1.5)


def test_progress_reaches_subprocess_envs_and_feedback_tags_reach_tensorboard(tmp_path):
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator"
    )
    config = config_for()
    venv = VecMonitor(SubprocVecEnv([make_env(config)] * 2), info_keywords=("is_success",))
    controller = FeedbackController(config)
    try:
        model = PPO(
            "MultiInputPolicy",
            venv,
            n_steps=32,
            batch_size=64,
            n_epochs=1,
            policy_kwargs={"net_arch": [8]},
            tensorboard_log=str(tmp_path),
            seed=0,
        )
        model.learn(256, callback=feedback_callbacks(controller), tb_log_name="run")
        states = venv.get_attr("feedback_state")
        assert [s.progress for s in states] == [3.0, 3.0]
        assert [s.phase for s in states] == ["review", "review"]
    finally:
        venv.close()
    accumulator = event_accumulator.EventAccumulator(str(tmp_path / "run_1"))
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    for tag in (
        "phase",
        "guide_weight",
        "review_weight",
        "hints_per_episode",
        "reviews_per_round",
        "switch_step",
        "hint_latency_p50_ms",
        "hint_latency_p99_ms",
        "alert",
        "config_version",
        "guide_every",
    ):
        assert f"feedback/{tag}" in tags, tag
    for tag in ("cpu_percent", "load_average", "rss_mb", "processes", "steps_per_s"):
        assert f"system/{tag}" in tags, tag
    processes = [e.value for e in accumulator.Scalars("system/processes")]
    assert min(processes) >= 3  # this process and the two env workers under it
    phases = [e.value for e in accumulator.Scalars("feedback/phase")]
    assert phases[0] == 1.0 and phases[-1] == 3.0  # guide ... review
    switch = [e.value for e in accumulator.Scalars("feedback/switch_step")]
    assert switch == pytest.approx([0.4 * 4] * len(switch))  # switch_at x total rounds


def test_the_training_success_rate_reaches_the_adaptive_schedule():
    adaptive = {"metric": "return", "min_success": 1.0, "max_switch": 0.75}
    config = config_for(rounds=8, switch_at=0.25, adaptive=adaptive)
    venv = VecMonitor(DummyVecEnv([make_env(config, difficulty="easy", max_steps=8)] * 2))
    controller = FeedbackController(config)
    model = PPO("MultiInputPolicy", venv, n_steps=32, batch_size=64, n_epochs=1, seed=0)
    model.learn(8 * 64, callback=feedback_callbacks(controller))
    assert model.ep_success_buffer and np.mean(model.ep_success_buffer) < 1.0
    state = venv.get_attr("feedback_state")[0]
    assert state.switch_at == pytest.approx(0.75)  # held at every round, up to max_switch
    assert "training success under the floor 100%" in controller.schedule.history[-1]["reason"]


def test_a_validation_env_gets_the_training_state_even_after_validating_ahead():
    adaptive = {"metric": "return", "min_success": 1.0, "max_switch": 1.0}
    config = config_for(rounds=16, switch_at=0.25, adaptive=adaptive)
    make = make_env(config, difficulty="easy", max_steps=8)
    validation = make()
    venv = VecMonitor(DummyVecEnv([make] * 2))
    controller = FeedbackController(config, envs=validation)
    ahead = []  # validated at the end of each round in the next round's state, as the runner does
    callbacks = feedback_callbacks(
        controller, on_round=lambda round_, _: ahead.append(controller.state_at(round_ + 1))
    )
    model = PPO("MultiInputPolicy", venv, n_steps=32, batch_size=64, n_epochs=1, seed=0)
    model.learn(6 * 64, callback=callbacks)
    trained = venv.get_attr("feedback_state")[0]
    assert trained.switch_at > 0.25  # held: training success stays under 100%
    assert validation.get_wrapper_attr("feedback_state") == trained
    assert len(ahead) == 6 and ahead[-1].round == 6


def test_a_schedule_in_steps_is_driven_in_env_steps():
    def make():
        env = AddGuide(gym.make("feedbackgym/OpsIncidentEasy-v0"), channels=("vector",))
        schedule = GuideReviewSchedule(switch_at=0.25, fade=64, total=512, unit="steps")
        return FadeGuideToReview(env, schedule=schedule)

    venv = VecMonitor(DummyVecEnv([make] * 2))
    model = PPO("MultiInputPolicy", venv, n_steps=32, batch_size=64, n_epochs=1, seed=0)
    schedule = GuideReviewSchedule(switch_at=0.25, fade=64, total=512, unit="steps")
    controller = FeedbackController(schedule=schedule)
    model.learn(512, callback=feedback_callbacks(controller))
    state = venv.get_attr("feedback_state")[0]
    assert state.progress == 448  # the last round's start, in env steps
    assert state.phase == "review"  # the fade ran from step 128 to 192


def test_review_credit_reaches_the_ppo_rollout_buffer():
    venv = VecMonitor(DummyVecEnv([make_env(config_for("review"))] * 2))
    model = PPO(
        "MultiInputPolicy",
        venv,
        n_steps=64,
        batch_size=64,
        n_epochs=1,
        policy_kwargs={"net_arch": [8]},
        seed=0,
    )
    callbacks = feedback_callbacks(FeedbackController(config_for("review")), review_credit=True)
    model.learn(256, callback=callbacks)
    credit = callbacks.callbacks[1]
    assert isinstance(credit, ReviewCredit) and credit.credit_applied > 0
    assert np.isfinite(model.rollout_buffer.advantages).all()


def _review_dqn(buffer_size):
    """A small DQN on one review-arm env, with a replay buffer of ``buffer_size``."""
    venv = VecMonitor(DummyVecEnv([make_env(config_for("review"))]))
    return DQN(
        "MultiInputPolicy",
        venv,
        learning_starts=50,
        buffer_size=buffer_size,
        train_freq=16,
        policy_kwargs={"net_arch": [8]},
        seed=0,
    )


def test_review_credit_relabels_the_dqn_replay_buffer():
    model = _review_dqn(buffer_size=1000)
    callback = ReviewCredit()
    model.learn(300, callback=callback)
    assert callback.credit_applied > 0
    rewards = model.replay_buffer.rewards[: model.replay_buffer.pos, 0]
    assert (rewards < 0).any()  # harmful steps were marked down


def test_review_credit_skips_replay_slots_overwritten_since_their_step():
    # shorter than any episode: early steps are gone when the review comes
    model = _review_dqn(buffer_size=4)
    callback = ReviewCredit()
    model.learn(300, callback=callback)
    assert callback.credit_dropped > 0


def test_review_credit_for_steps_before_the_callback_was_attached_is_dropped():
    venv = VecMonitor(DummyVecEnv([make_env(config_for("review"))] * 2))
    model = PPO("MultiInputPolicy", venv, n_steps=32, batch_size=64, n_epochs=1, seed=0)
    model.learn(64, callback=ReviewCredit())
    later = ReviewCredit()  # attached while episodes are running
    model.learn(128, callback=later, reset_num_timesteps=False)
    assert later.credit_dropped > 0 and later.credit_applied > 0
