import gymnasium as gym
import numpy as np
import pytest

import feedbackgym
from feedbackgym.config import FeedbackConfig, ReexploreConfig
from feedbackgym.errors import ConfigError, FeedbackGymError
from feedbackgym.protocol import FeedbackState
from feedbackgym.wrappers import AddReview, Reexplore
from feedbackgym.wrappers.reexplore import RestartStart

HARD = "feedbackgym/OpsIncidentHard-v0"
EASY = "feedbackgym/OpsIncidentEasy-v0"


def _play(env, actions=None, *, expert_until=None):
    """Plays to the end: ``actions`` first, then the expert; returns the last info."""
    actions = list(actions or [])
    done, info, t = False, {}, 0
    while not done:
        action = actions[t] if t < len(actions) else env.unwrapped.expert_action()
        _, _, terminated, truncated, info = env.step(action)
        done, t = terminated or truncated, t + 1
    return info


def _failing_episode(env, seed):
    """Resets with ``seed`` (no seed when None), takes 3 expert steps and escalates."""
    env.reset(seed=seed)
    for _ in range(3):
        env.step(env.unwrapped.expert_action())
    return env.step("escalate")[-1]


def test_restore_from_a_flagged_point_resumes_that_state():
    env = Reexplore(AddReview(gym.make(HARD), window=30))
    env.reset(seed=11)
    for _ in range(6):
        env.step(env.unwrapped.expert_action())
    snapshot = env.unwrapped.get_state()["state"]
    env.step("scale down web")
    info = env.step("escalate")[-1]
    point = info["feedback"]["review"]["reexplore"][0]
    assert point["step"] == 6 and point["reason"] == "harmful"
    obs, info = env.reset(options={"restore": point})
    assert info["restored_from"] == {"seed": 11, "step": 6, "kind": "explicit"}
    restored = env.unwrapped.state
    assert restored.step == snapshot.step and restored.evidence == snapshot.evidence
    assert restored.budget == pytest.approx(snapshot.budget)
    assert _play(env)["is_success"]  # the expert finishes from there: the episode is live


def test_restore_errors():
    env = Reexplore(gym.make(EASY))
    with pytest.raises(FeedbackGymError, match="no finished episode"):
        env.reset(options={"restore": {"step": 1}})
    env.reset(seed=0)
    env.step("escalate")
    with pytest.raises(FeedbackGymError, match="outside"):
        env.reset(options={"restore": {"step": 9}})
    with pytest.raises(FeedbackGymError, match="needs 'step'"):
        env.reset(options={"restore": {"where": 1}})
    with pytest.raises(ValueError, match="AddReview"):
        Reexplore(gym.make(EASY), ReexploreConfig())


def test_off_it_passes_the_reset_through_unchanged():
    plain, wrapped = gym.make(HARD), Reexplore(AddReview(gym.make(HARD)))
    plain.reset(seed=3), wrapped.reset(seed=3)
    for _ in range(3):  # a reset without a seed continues the env's own generator
        plain.reset(), wrapped.reset()
        assert repr(plain.unwrapped.get_state()) == repr(wrapped.unwrapped.get_state())
    assert wrapped.restores == 0 and wrapped.restart_stats()["pool"] == 0


def test_a_reset_with_a_seed_never_restores():
    """The second fault of the old wrapper: validation on held-out seeds started restored."""
    env = Reexplore(AddReview(gym.make(HARD)), ReexploreConfig(prob=1.0))
    _failing_episode(env, None)
    assert env.restart_stats()["pool"] == 1
    for seed in env.unwrapped.validation_seeds[:5]:
        _, info = env.reset(seed=seed)
        assert "restored_from" not in info and env.unwrapped.state.step == 0
    assert "restored_from" in env.reset()[1]  # without a seed: restored


def test_a_success_after_a_failure_restarts_the_failed_episode_not_the_last_one():
    """The first fault: a success left the previous review in place, replayed into the new
    episode's seed (a state no episode reached) or past its end (an error out of reset)."""
    env = Reexplore(AddReview(gym.make(HARD)), ReexploreConfig(prob=1.0))
    info = _failing_episode(env, None)
    failed_seed = env._seed
    flagged = info["feedback"]["review"]["reexplore"][0]["step"]
    env.reset(seed=5)
    assert _play(env)["is_success"]  # a short success: its review flags nothing
    env.reset(seed=6)
    env.step("escalate")  # ends at step 1, shorter than the flagged step
    assert flagged >= 1
    _, info = env.reset()
    assert info["restored_from"] == {"seed": failed_seed, "step": flagged, "kind": "review"}
    reference = gym.make(HARD)
    reference.reset(seed=failed_seed)
    for _ in range(flagged):
        reference.step(reference.unwrapped.expert_action())
    assert env.unwrapped.state.evidence == reference.unwrapped.state.evidence


def test_a_point_is_dropped_after_successes_and_moved_back_after_failures():
    config = ReexploreConfig(prob=1.0, gate_successes=2, gate_failures=2, back_steps=1)
    env = Reexplore(AddReview(gym.make(HARD)), config)
    _failing_episode(env, None)
    (point,) = env._pool
    start = len(point.actions)
    for _ in range(2):
        env.reset()
        env.step("escalate")  # failures from the point
    assert len(point.actions) == start - 1 and point in env._pool
    for _ in range(2):
        env.reset()
        _play(env)  # the expert succeeds from there
    assert point not in env._pool
    stats = env.restart_stats()
    assert stats["restores"] == 4 and stats["restored_successes"] == 2
    assert stats["replayed_steps"] == 2 * start + 2 * (start - 1)


def test_restarts_begin_at_the_switch():
    env = Reexplore(AddReview(gym.make(HARD)), ReexploreConfig(prob=1.0, begin="switch"))
    _failing_episode(env, None)
    env.set_training_progress(0.2, switch_at=0.4)
    assert "restored_from" not in env.reset()[1]
    env.set_training_progress(0.5, switch_at=0.4)
    assert "restored_from" in env.reset()[1]


def test_restarts_anneal_to_zero():
    env = Reexplore(AddReview(gym.make(HARD)), ReexploreConfig(prob=1.0, anneal_by=0.8))
    _failing_episode(env, None)

    def restored_share(fraction):
        env.set_training_progress(fraction, switch_at=0.4)
        return np.mean(["restored_from" in env.reset()[1] for _ in range(200)])

    assert restored_share(0.0) == 1.0
    assert 0.25 < restored_share(0.5) < 0.5  # 1 - 0.5 / 0.8
    assert restored_share(0.8) == 0.0


def test_an_arm_without_reviews_still_reviews_for_its_restarts_only():
    env = feedbackgym.make(HARD, feedback="shaping+reexplore")
    info = _failing_episode(env, None)
    assert info["feedback"]["review"] == {}  # the policy sees no review
    assert env.get_wrapper_attr("feedback_stats")()["reexplore"]["pool"] == 1


def test_backward_starts_along_demonstrations_move_back_as_success_rises():
    config = ReexploreConfig(
        prob=0.0, demonstrations=2, demo_prob=1.0, gate_successes=1, back_steps=3
    )
    env = Reexplore(AddReview(gym.make(HARD)), config)
    _, info = env.reset()
    assert info["restored_from"]["kind"] == "demo"
    demos = env._demos
    assert [d.seed for d in demos] == [0, 1]
    lengths = [len(d.full) for d in demos]
    assert [len(d.actions) for d in demos] == [n - 3 for n in lengths]
    remaining = env.restart_stats()["demo_remaining"]
    for _ in range(60):  # the expert succeeds from every start: each moves back to 0
        _play(env)
        _, info = env.reset()
    assert all(not d.actions for d in demos) and "restored_from" not in info
    assert env.restart_stats()["demo_remaining"] < remaining


def test_a_failure_keeps_a_demonstration_start_where_it_is():
    config = ReexploreConfig(prob=0.0, demonstrations=1, demo_prob=1.0, gate_successes=2)
    env = Reexplore(AddReview(gym.make(HARD)), config)
    env.reset()
    (demo,) = env._demos
    start = len(demo.actions)
    _play(env)  # one success, then a failure: not two in a row
    env.reset()
    env.step("escalate")
    env.reset()
    assert len(demo.actions) == start


def test_the_section_and_the_arm_suffix_reach_the_stack():
    config = FeedbackConfig.from_mapping({"reexplore": {"prob": 0.25, "points": ["harmful"]}})
    env = feedbackgym.make(HARD, feedback=config)
    assert env.get_wrapper_attr("config").points == ("harmful",)
    suffixed = FeedbackConfig.for_arm("guide-then-review+shaping+reexplore")
    assert suffixed.reexplore == ReexploreConfig() and suffixed.shaping.scale == 1.0
    assert FeedbackConfig.for_arm("guide-then-review+shaping").reexplore is None
    with pytest.raises(ConfigError, match="reexplore.points"):
        FeedbackConfig.from_mapping({"reexplore": {"points": ["sideways"]}})
    with pytest.raises(ConfigError, match="unknown arm"):
        FeedbackConfig.for_arm("shaping+failure-hints")  # no guide to gate


def test_a_config_file_turns_restarts_on(tmp_path):
    path = tmp_path / "feedback.yaml"
    path.write_text("schedule:\n  arm: shaping\nreexplore:\n  prob: 1.0\n")
    env = feedbackgym.make(HARD, feedback=path)
    _failing_episode(env, None)
    assert "restored_from" in env.reset()[1]


def test_the_controller_state_drives_the_restarts():
    config = FeedbackConfig.for_arm("guide-then-review+shaping+reexplore")
    config = config.model_copy(
        update={"reexplore": ReexploreConfig(prob=1.0, begin="switch"), "schedule": config.schedule}
    )
    env = feedbackgym.make(HARD, feedback=config)
    _failing_episode(env, None)
    total = config.schedule.total
    env.get_wrapper_attr("set_feedback_state")(
        FeedbackState("guide", 1.0, 0.0, progress=0.1 * total)
    )
    assert "restored_from" not in env.reset()[1]
    env.get_wrapper_attr("set_feedback_state")(
        FeedbackState("review", 0.0, 1.0, progress=0.9 * total, switch_at=0.4)
    )
    assert "restored_from" in env.reset()[1]


def test_restart_start_is_plain_data():
    start = RestartStart(3, [1, 2])
    assert (start.kind, start.successes, start.full) == ("review", 0, [])
