import gymnasium as gym
import numpy as np
import pytest

import feedbackgym  # noqa: F401
from feedbackgym.wrappers import AddGuide


def _env(**kwargs):
    obs_mode = kwargs.pop("obs_mode", "both")
    kwargs.setdefault("dropout", 0.0)  # these tests pin when hints are due, not the dropout
    return AddGuide(gym.make("feedbackgym/OpsIncidentMedium-v0", obs_mode=obs_mode), **kwargs)


def test_hint_every_k_steps_in_info():
    env = _env(every=3)
    _, info = env.reset(seed=0)
    given = [info["feedback"]["guide"] != {}]
    for _ in range(7):
        info = env.step("wait")[-1]
        given.append(info["feedback"]["guide"] != {})
    assert given == [True, False, False, True, False, False, True, False]


def test_hints_follow_progress_and_carry_no_action():
    env = _env(every=1)
    _, info = env.reset(seed=0)
    first = info["feedback"]["guide"]
    assert first["subgoal_ids"][0].startswith("triage_") and first["kind"] == "triage"
    triage = [k for k in info["subgoals"] if k.startswith("triage_")]
    while not all(info["subgoals"][k] for k in triage):
        info = env.step(env.unwrapped.expert_action())[-1]
    assert info["feedback"]["guide"]["subgoal_ids"][0] in ("find_root_cause", "mitigate")
    meanings = set(env.unwrapped.action_meanings)
    assert not any(m in info["feedback"]["guide"]["text"] for m in meanings)


def test_text_and_vector_channels():
    env = _env(every=2, channels=("text", "vector"))
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert "Hint: first" in obs["text"] and info["feedback"]["guide"] == {}
    assert obs["hint_present"][0] == 1 and obs["hint_next"].sum() == 1 and obs["hint_next"][0] == 1
    alerting = [
        s for s, on in zip(env.unwrapped.target_vocabulary, obs["alerts"], strict=True) if on
    ]
    named = [
        s for s, on in zip(env.unwrapped.target_vocabulary, obs["hint_targets"], strict=True) if on
    ]
    assert named == alerting[:1]  # the first subgoal is the triage of the first alert
    assert obs["hint_kind"][env.unwrapped.subgoal_kinds.index("triage")] == 1
    obs, *_ = env.step("wait")
    assert (
        "Hint:" not in obs["text"] and obs["hint_present"][0] == 1
    )  # held until the next due step
    env.set_weight(0.0)
    obs, *_ = env.step("wait")
    assert obs["hint_present"][0] == 0 and not obs["hint_next"].any()
    assert env.observation_space.contains(obs)


def test_vector_fields_are_shared_read_only_while_a_hint_is_held():
    env = _env(every=4, channels=("vector",))
    obs, _ = env.reset(seed=0)
    held, *_ = env.step("wait")
    assert np.array_equal(held["hint_next"], obs["hint_next"])
    with pytest.raises(ValueError, match="read-only"):
        held["hint_next"][0] = 0
    assert held["hint_next"].sum() == 1  # later observations are unharmed


def test_vector_channel_on_a_non_dict_observation():
    env = AddGuide(
        gym.make("feedbackgym/OpsIncidentEasy-v0", obs_mode="text"),
        channels=["vector"],
        dropout=0.0,
    )
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"observation", "hint_next", "hint_present", "hint_targets", "hint_kind"}
    assert env.observation_space.contains(obs)


def test_weight_and_dropout_are_probabilities_with_seeded_draws():
    def rate(seed, **kwargs):
        env = _env(every=1, **kwargs)
        env.reset(seed=seed)
        return [env.step("wait")[-1]["feedback"]["guide"] != {} for _ in range(40)]

    assert rate(1, weight=0.5) == rate(1, weight=0.5)
    assert 5 < sum(rate(1, weight=0.5)) < 35
    assert sum(rate(2, dropout=1.0)) == 0 and sum(rate(2)) == 40


def test_episode_dropout_withholds_whole_episodes():
    env = _env(every=1, dropout=0.5, dropout_scope="episode")
    guided = []
    for seed in range(20):
        _, info = env.reset(seed=seed)
        given = [info["feedback"]["guide"] != {}]
        given += [env.step("wait")[-1]["feedback"]["guide"] != {} for _ in range(5)]
        assert all(given) or not any(given)
        guided.append(all(given))
    assert 3 <= sum(guided) <= 17
    with pytest.raises(ValueError, match="dropout_scope"):
        _env(dropout_scope="round")


def test_stats_and_errors():
    env = _env(every=1)
    env.reset(seed=0)
    env.step("wait")
    stats = env.feedback_stats()
    assert stats["hints_given"] == stats["hints_due"] == 2 and len(stats["latencies_ms"]) == 2
    assert env.feedback_stats()["hints_given"] == 0
    with pytest.raises(ValueError, match="channels"):
        _env(channels=("smell",))
    with pytest.raises(ValueError, match="text observation"):
        _env(obs_mode="vector", channels=("text",))
    with pytest.raises(ValueError, match="every"):
        _env(every=0)
    with pytest.raises(ValueError, match="weight"):
        _env().set_weight(2)
    with pytest.raises(ValueError, match="source"):
        _env(source="http://example")


def test_spec_round_trip_keeps_the_wrapper():
    env = gym.make("feedbackgym/OpsIncidentEasy-v0")
    env = AddGuide(env, every=2, channels=["vector"], dropout=0.0)
    remade = gym.make(gym.envs.registration.EnvSpec.from_json(env.spec.to_json()))
    assert isinstance(remade, AddGuide) and remade.every == 2
    a, _ = env.reset(seed=3)
    b, _ = remade.reset(seed=3)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_the_wrapper_alone_hints_in_every_episode():
    """``AddGuide(env)`` gives hints; the arms' recipe (half the episodes unguided) is the
    config's default, which ``feedbackgym.make`` passes."""
    env = AddGuide(gym.make("feedbackgym/OpsIncidentMedium-v0"), every=3)
    for seed in range(6):
        _, info = env.reset(seed=seed)
        assert info["feedback"]["guide"] != {}
    made = feedbackgym.make("feedbackgym/OpsIncidentMedium-v0", feedback="guide")
    assert made.get_wrapper_attr("dropout") == 0.5


def _episode(env, seed, *, succeed):
    """Plays one episode (the expert's, or an escalation); says whether it was hinted."""
    _, info = env.reset(seed=seed)
    hinted = info["feedback"]["guide"] != {}
    done = False
    while not done:
        action = env.unwrapped.expert_action() if succeed else "escalate"
        _, _, terminated, truncated, info = env.step(action)
        hinted |= info["feedback"]["guide"] != {}
        done = terminated or truncated
    assert info["is_success"] == succeed
    return hinted


def test_after_failure_the_guide_speaks_only_where_the_policy_failed():
    env = _env(every=1, when="after-failure")
    assert _episode(env, 0, succeed=False)  # nothing known: hinted
    assert _episode(env, 0, succeed=True)  # seed 0 failed last: hinted
    assert not _episode(env, 0, succeed=True)  # seed 0 succeeded last: silent
    assert not _episode(env, 1, succeed=False)  # a new seed after a success: silent
    assert _episode(env, 1, succeed=True)  # seed 1 failed last: hinted
    assert not _episode(env, None, succeed=False)  # no seed, after a success: silent
    assert _episode(env, None, succeed=True)  # no seed, after a failure: hinted
    with pytest.raises(ValueError, match="when"):
        _env(when="sometimes")


def test_the_failure_hints_arm_reaches_the_stack():
    env = feedbackgym.make("feedbackgym/OpsIncidentMedium-v0", feedback="guide+failure-hints")
    assert env.get_wrapper_attr("when") == "after-failure"
    assert env.get_wrapper_attr("dropout") == 0.0
