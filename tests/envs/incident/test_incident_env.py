"""OpsIncident-v1: presets, splits, incident keys, errors, the Gymnasium contract."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import feedbackgym  # noqa: F401  (registers the ids)
from feedbackgym.envs.incident import DIFFICULTIES, IncidentEnv
from feedbackgym.envs.incident.scenario import is_held_out
from feedbackgym.envs.incident.topology import shape_key
from feedbackgym.errors import InvalidAction
from feedbackgym.rollout import run_episodes


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_expert_solves_every_preset_within_its_step_limit(difficulty):
    env = IncidentEnv(difficulty, split="test")
    results = list(run_episodes(env, "expert", 100))
    assert np.mean([r.success for r in results]) >= 0.98
    assert max(r.length for r in results) < env.step_limit
    if difficulty == "extreme":
        assert np.median([r.length for r in results]) >= 60


@pytest.mark.parametrize("difficulty", ["medium", "hard", "extreme"])
def test_random_actions_rarely_solve_from_medium_up(difficulty):
    wins = [r.success for r in run_episodes(IncidentEnv(difficulty), "random", 200)]
    assert np.mean(wins) <= 0.02


def test_test_split_incidents_never_occur_in_the_train_split():
    train, test = IncidentEnv("easy"), IncidentEnv("easy", split="test")
    train_keys, test_keys = set(), set()
    for seed in range(20_000):
        train_keys.add(train.reset(seed=seed)[1]["incident"])
        state = train.unwrapped.state
        assert not is_held_out(state.faults, shape_key(state.topology))
    for seed in range(3_000):
        test_keys.add(test.reset(seed=seed)[1]["incident"])
        state = test.unwrapped.state
        assert is_held_out(state.faults, shape_key(state.topology))
    assert not train_keys & test_keys
    assert len(train_keys) > 3_000  # thousands of distinct problems, not 16


def test_every_seed_poses_an_incident_in_both_splits_and_replays_exactly():
    for split in ("train", "test"):
        a, b = IncidentEnv("hard", split=split), IncidentEnv("hard", split=split)
        for seed in (0, 1, 7, 10_000_000):
            assert a.reset(seed=seed)[1]["incident"] == b.reset(seed=seed)[1]["incident"]
    assert (
        IncidentEnv(split="train").reset(seed=3)[1]["incident"]
        != IncidentEnv(split="test").reset(seed=3)[1]["incident"]
    )


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
@pytest.mark.parametrize("split", ["train", "test"])
def test_check_env_passes(difficulty, split):
    check_env(IncidentEnv(difficulty, obs_mode="both", split=split), skip_render_check=True)


def test_the_step_limit_follows_the_preset_however_it_is_chosen():
    by_kwarg = gym.make("feedbackgym/OpsIncident-v1", difficulty="extreme")
    by_id = gym.make("feedbackgym/OpsIncidentExtreme-v1")
    assert by_kwarg.unwrapped.step_limit == by_id.unwrapped.step_limit == 200
    env = gym.make("feedbackgym/OpsIncident-v1", difficulty="easy")
    env.reset(seed=0)
    steps, truncated = 0, False
    while not truncated:
        _, _, terminated, truncated, _ = env.step("wait")
        assert not terminated or truncated
        steps += 1
        if terminated:
            break
    assert steps <= 50


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"difficulty": "impossible"}, "extreme"),
        ({"split": "validation"}, "test"),
        ({"services": 9}, "max_services"),
        ({"faults": 9}, "max_services"),
        ({"min_hops": 4, "max_hops": 2}, "min_hops"),
    ],
)
def test_bad_arguments_name_the_valid_values(kwargs, named):
    with pytest.raises(ValueError, match=named):
        gym.make("feedbackgym/OpsIncident-v1", **kwargs)


def test_actions_parse_the_episodes_service_names_and_reject_others():
    env = IncidentEnv("easy")
    env.reset(seed=0)
    name = env.services[1]
    index = env.parse_action(f"inspect logs {name}")
    assert env.action_meanings[index] == f"inspect logs {name}"
    with pytest.raises(InvalidAction, match="service one of"):
        env.parse_action("inspect logs nowhere")
    with pytest.raises(InvalidAction):
        env.step(int(env.action_space.n))
    masks = env.action_masks()
    assert masks.sum() == 11 * len(env.services) + 3
    _, _, _, _, info = env.step(int(np.flatnonzero(~masks)[0]))  # an empty slot: answered
    assert env.unwrapped.state.last_output.startswith("no service at position")


def test_snapshots_restore_the_episode():
    env = IncidentEnv("hard")
    env.reset(seed=5)
    for _ in range(4):
        env.step(env.expert_action())
    snapshot = env.get_state()
    after = [env.step(env.expert_action())[4]["subgoals"] for _ in range(3)]
    env.set_state(snapshot)
    assert [env.step(env.expert_action())[4]["subgoals"] for _ in range(3)] == after


def test_symptoms_cascade_up_the_call_path_to_the_alert():
    env = IncidentEnv("medium", obs_mode="text")
    env.reset(seed=11)
    fault = env.state.faults[0]
    assert fault.path[0] in env.state.initial_alerts and fault.path[-1] == fault.root
    for upper, lower in zip(fault.path, fault.path[1:], strict=False):
        env.step(f"inspect logs {env.state.name(upper)}")
        assert env.state.log_pointers[upper, lower] == 1
