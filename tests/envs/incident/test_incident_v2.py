"""OpsIncident-v2: disjoint systems and solutions, an opaque task id, nothing in info to read."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import feedbackgym  # noqa: F401  (registers the ids)
from feedbackgym.envs.incident import DIFFICULTIES, FAULT_TYPES, IncidentEnv
from feedbackgym.envs.incident.catalog import FAULTS
from feedbackgym.envs.incident.disjoint import map_key, map_split, solution_split
from feedbackgym.envs.incident.overlap import count_overlap
from feedbackgym.envs.incident.v2 import IncidentEnvV2
from feedbackgym.errors import InvalidAction
from feedbackgym.protocol import FEEDBACK, REWARD_FIELDS, SUBGOALS, TASK_ID, task_key
from feedbackgym.rollout import run_episodes


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_no_test_map_incident_or_solution_occurs_in_training(difficulty):
    overlap = count_overlap(
        lambda split: IncidentEnvV2(difficulty, split=split), range(2_000), range(300)
    )
    assert (overlap.maps_shared, overlap.keys_shared) == (0, 0)
    assert overlap.solution_twins <= 0.05 * 200  # at most 5% (the rule makes it none)
    if difficulty == "easy":
        assert overlap.shapes_shared > 0  # shapes recur: only maps and solutions are disjoint


def test_the_same_count_finds_v1s_shared_maps_and_solution_twins():
    overlap = count_overlap(
        lambda split: IncidentEnv("easy", split=split), range(2_000), range(300)
    )
    assert overlap.share("maps_shared") > 0.8 and overlap.share("solution_twins") > 0.05


def test_each_split_keeps_to_its_own_maps_and_solutions_and_replays_exactly():
    for split in ("train", "test"):
        env, again = IncidentEnvV2("medium", split=split), IncidentEnvV2("medium", split=split)
        for seed in (0, 1, 7, 10_000_000):
            _, info = env.reset(seed=seed)
            assert again.reset(seed=seed)[1][TASK_ID] == info[TASK_ID]
            state = env.unwrapped.state
            assert map_split(state.topology) == solution_split(state) == split
    train, test = IncidentEnvV2("easy"), IncidentEnvV2("easy", split="test")
    different = 0
    for seed in range(20):
        train.reset(seed=seed)
        test.reset(seed=seed)
        different += map_key(train.state.topology) != map_key(test.state.topology)
    assert different == 20  # seed s draws its system from each split's own stream


def test_the_task_id_is_opaque_and_equal_exactly_when_the_task_keys_are():
    env = gym.make("feedbackgym/OpsIncidentEasy-v2")
    by_id: dict[str, str] = {}
    for seed in range(3_000):
        _, info = env.reset(seed=seed)
        key = task_key(env)
        assert key is not None and "incident" not in info
        assert by_id.setdefault(info[TASK_ID], key) == key
        assert not any(fault in info[TASK_ID] for fault in FAULT_TYPES)
    assert len(set(by_id.values())) == len(by_id) > 500  # one id per key, many keys
    assert task_key(gym.make("feedbackgym/OpsIncidentEasy-v0")) is None  # no key to give


def _forbidden_words(state) -> set[str]:
    words = {*FAULT_TYPES, *(FAULTS[f].label for f in FAULT_TYPES)}
    return words | {state.name(f.root) for f in state.faults}


def _check_info(info, library_ids, state, where):
    assert set(info[SUBGOALS]) == library_ids, where  # the same ids for every incident
    readable = {
        k: v for k, v in info.items() if k not in {*REWARD_FIELDS, FEEDBACK, TASK_ID, "action"}
    }
    text = json.dumps(readable)
    leaked = {w for w in _forbidden_words(state) if w in text}
    assert not leaked, (where, leaked, readable)


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_no_info_key_names_the_fault_or_the_root_over_300_test_episodes(difficulty):
    env = IncidentEnvV2(difficulty, split="test")
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    library_ids = {sg.id for sg in env.subgoals}
    episodes = 0
    for seed in range(300):
        for policy in ("expert", "random"):
            _, info = env.reset(seed=seed)
            state = env.state
            _check_info(info, library_ids, state, (seed, policy, "reset"))
            done = False
            while not done:
                if policy == "expert":
                    action = env.expert_action()
                else:
                    action = int(rng.choice(np.flatnonzero(env.action_masks())))
                _, _, terminated, truncated, info = env.step(action)
                _check_info(info, library_ids, state, (seed, policy, state.step))
                done = terminated or truncated
            episodes += 1
    assert episodes == 600


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_expert_solves_every_v2_preset_and_random_play_does_not(difficulty):
    env = IncidentEnvV2(difficulty, split="test")
    expert = list(run_episodes(env, "expert", 50))
    assert all(r.success for r in expert) and max(r.length for r in expert) < env.step_limit
    assert np.mean([r.success for r in run_episodes(env, "random", 100)]) <= 0.02


@pytest.mark.parametrize("split", ["train", "test"])
def test_check_env_passes_and_v1s_api_holds(split):
    env = gym.make("feedbackgym/OpsIncidentMedium-v2", split=split, obs_mode="both")
    check_env(env.unwrapped)
    _, info = env.reset(seed=3)
    unwrapped = env.unwrapped
    assert len(unwrapped.action_masks()) == env.action_space.n
    assert unwrapped.parse_action(f"inspect logs {unwrapped.services[0]}") == 1
    assert unwrapped.action_meanings[-1] == "declare resolved"
    snapshot = unwrapped.get_state()
    first = env.step(unwrapped.expert_action())
    unwrapped.set_state(snapshot)
    again = env.step(unwrapped.expert_action())
    assert first[0]["text"] == again[0]["text"] and first[4] == again[4]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="split must be one of"):
        IncidentEnvV2("easy", split="validation")
    with pytest.raises(ValueError, match="unknown OpsIncident"):
        IncidentEnvV2("easy", hops=3)
    env = IncidentEnvV2("easy")
    env.reset(seed=0)
    for action in (True, 1.0, env.action_space.n, -1):  # a boolean is no index
        with pytest.raises(InvalidAction):
            env.step(action)
