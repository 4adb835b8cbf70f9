"""Behaviour of the OpsIncident simulator: faults, expert, dynamics, bad input."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence

from feedbackgym.envs.ops import (
    DIFFICULTIES,
    FAULT_TYPES,
    TRAIN_SEED_LIMIT,
    VALIDATION_SEEDS,
    OpsIncidentEnv,
)
from feedbackgym.envs.ops.actions import ACTION_MEANINGS, N_ACTIONS, action_index, parse_action
from feedbackgym.envs.ops.catalog import FAULTS, INTERACTING_PAIRS
from feedbackgym.envs.ops.text import CHARSET
from feedbackgym.errors import FeedbackGymError, InvalidAction
from feedbackgym.rollout import run_episodes, summarize


def _seed_with(difficulty, predicate, limit=5000):
    env = OpsIncidentEnv(difficulty)
    for seed in range(limit):
        env.reset(seed=seed)
        if predicate(env.state):
            return seed
    raise AssertionError("no seed with the wanted scenario")


def _play_expert(env, seed):
    _, info = env.reset(seed=seed)
    for _ in range(80):
        _, reward, terminated, truncated, info = env.step(env.expert_action())
        if terminated or truncated:
            return reward, info
    return 0.0, info


FAULT_ROOTS = [(name, root) for name, fault in FAULTS.items() for root in fault.roots]


@pytest.mark.parametrize("name, root", FAULT_ROOTS, ids=[f"{n}@{r}" for n, r in FAULT_ROOTS])
def test_expert_resolves_each_fault_type(name, root):
    seed = _seed_with("easy", lambda s: (s.faults[0].name, s.faults[0].root) == (name, root))
    reward, info = _play_expert(OpsIncidentEnv("easy"), seed)
    assert reward == 1.0 and info["outcome"] == "resolved"
    assert all(info["subgoals"].values())


def test_every_fault_type_occurs():
    env = OpsIncidentEnv("hard")
    seen = set()
    for seed in range(300):
        env.reset(seed=seed)
        seen.update(f.name for f in env.state.faults)
    assert seen == set(FAULT_TYPES) and len(FAULT_TYPES) >= 8


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_expert_success_and_episode_length(difficulty):
    env = gym.make(f"feedbackgym/OpsIncident{difficulty.title()}-v0")
    seeds = VALIDATION_SEEDS[difficulty]
    results = list(run_episodes(env, "expert", len(seeds), seeds[0]))
    summary = summarize(results)
    assert summary["success_rate"] >= 0.98
    minimum = {"easy": 6, "medium": 12, "hard": 20}[difficulty]
    assert summary["median_length"] >= minimum


@pytest.mark.parametrize("difficulty, ceiling", [("easy", 0.05), ("medium", 0.03), ("hard", 0.02)])
def test_random_policy_rarely_succeeds(difficulty, ceiling):
    env = gym.make(f"feedbackgym/OpsIncident{difficulty.title()}-v0")
    results = list(run_episodes(env, "random", 500, seed=0))
    assert summarize(results)["success_rate"] < ceiling


def test_restarting_db_primary_fails_the_episode():
    env = OpsIncidentEnv("easy")
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("restart db_primary")
    assert terminated and reward == 0.0 and info["outcome"] == "destructive_action"
    with pytest.raises(FeedbackGymError, match="episode is over"):
        env.step("wait")


def test_failover_onto_lagging_replica_loses_writes():
    pair = set(INTERACTING_PAIRS[0])
    seed = _seed_with("hard", lambda s: {f.name for f in s.faults} == pair)
    env = OpsIncidentEnv("hard")
    env.reset(seed=seed)
    _, _, terminated, _, info = env.step("failover db")
    assert terminated and info["outcome"] == "destructive_action"


def test_interacting_pair_is_solved_in_order():
    pair = set(INTERACTING_PAIRS[0])
    seed = _seed_with("hard", lambda s: {f.name for f in s.faults} == pair)
    reward, info = _play_expert(OpsIncidentEnv("hard"), seed)
    assert reward == 1.0


@pytest.mark.parametrize(
    "action, outcome", [("declare resolved", "wrong_declaration"), ("escalate", "escalated")]
)
def test_ending_actions(action, outcome):
    env = OpsIncidentEnv("medium")
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(action)
    assert terminated and reward == 0.0 and info["outcome"] == outcome and not info["is_success"]


def test_slo_budget_runs_out_when_nothing_is_done():
    env = OpsIncidentEnv("hard")
    env.reset(seed=0)
    steps = 0
    terminated = False
    while not terminated:
        _, _, terminated, _, info = env.step("wait")
        steps += 1
    assert info["outcome"] == "slo_exhausted" and steps < 80


def _budget_after(actions, seed=0):
    env = OpsIncidentEnv("easy")
    env.reset(seed=seed)
    for action in actions:
        _, _, _, _, info = env.step(action)
    return info["slo_budget"]


def test_wrong_actions_make_things_worse():
    baseline = _budget_after(["wait"] * 6)
    assert _budget_after(["scale down web"] + ["wait"] * 5) < baseline
    assert _budget_after(["flush cache"] + ["wait"] * 5) < baseline


def test_restarting_a_leaking_service_only_buys_time():
    seed = _seed_with("easy", lambda s: s.faults[0].name == "memory_leak")
    env = OpsIncidentEnv("easy")
    env.reset(seed=seed)
    for _ in range(10):
        env.step("wait")
    leak = env.state.faults[0]
    env.step(f"restart {leak.root}")
    assert leak.mitigated_at is None and leak.pressure < 0.05
    for _ in range(5):
        env.step("wait")
    assert leak.pressure > 0.1


def test_agent_sees_only_what_it_inspected():
    env = OpsIncidentEnv("easy", "both")
    obs, _ = env.reset(seed=0)
    assert not obs["metrics"].any() and not obs["logs"].any() and not obs["inspected"].any()
    root = env.state.faults[0].root
    obs, *_ = env.step(f"inspect metrics {root}")
    assert obs["metrics"].any() and obs["last_result"] == 1
    assert f"> inspect metrics {root}" in obs["text"]
    obs, *_ = env.step(f"inspect logs {root}")
    assert obs["logs"].sum() >= 1


def test_text_observation_uses_only_its_charset():
    env = OpsIncidentEnv("hard", "text")
    obs, _ = env.reset(seed=4)
    texts = [obs]
    while True:
        obs, _, terminated, _, _ = env.step(env.expert_action())
        texts.append(obs)
        if terminated:
            break
    assert all(set(t) <= set(CHARSET) and env.observation_space.contains(t) for t in texts)
    assert "Findings:" in texts[-1]


def test_action_meanings_parse_back():
    assert len(ACTION_MEANINGS) == N_ACTIONS == OpsIncidentEnv().action_space.n
    for index, meaning in enumerate(ACTION_MEANINGS):
        assert parse_action(meaning) == index
        assert parse_action(f"Action: {meaning.upper()}.") == index
    assert parse_action(np.int64(3)) == 3 and parse_action(" 12 ") == 12
    assert parse_action("inspect-logs db-primary") == action_index("inspect_logs", "db_primary")


@pytest.mark.parametrize("bad", [N_ACTIONS, -1, "reboot everything", 1.5, True, None, [1]])
def test_bad_actions_raise_clear_errors(bad):
    env = OpsIncidentEnv()
    env.reset(seed=0)
    with pytest.raises(InvalidAction) as error:
        env.step(bad)
    assert "valid" in str(error.value) or "integer or text" in str(error.value)
    if isinstance(bad, str):
        assert "declare resolved" in str(error.value)


def test_step_before_reset_raises():
    with pytest.raises(FeedbackGymError, match="reset"):
        OpsIncidentEnv().step(0)


@pytest.mark.parametrize(
    "kwargs, field",
    [({"difficulty": "extreme"}, "difficulty"), ({"obs_mode": "pixels"}, "obs_mode")],
)
def test_bad_constructor_arguments(kwargs, field):
    with pytest.raises(ValueError, match=field):
        OpsIncidentEnv(**kwargs)


def test_snapshot_restores_the_episode():
    env = OpsIncidentEnv("medium", "both")
    env.reset(seed=5)
    for _ in range(4):
        env.step(env.expert_action())
    snapshot = env.get_state()
    first = [env.step(a) for a in (env.expert_action(), 3, 17)]
    env.set_state(snapshot)
    again = [env.step(a) for a in (env.expert_action(), 3, 17)]
    assert data_equivalence(first, again)


def test_subgoal_library_is_exposed():
    env = OpsIncidentEnv("hard")
    _, info = env.reset(seed=0)
    ids = [sg.id for sg in env.unwrapped.subgoals]
    alerts = env.unwrapped.state.initial_alerts
    assert ids[: len(alerts)] == [f"triage_{s}" for s in alerts] and ids[-1] == "declare_resolved"
    kinds = env.unwrapped.subgoal_kinds
    assert all(sg.kind in kinds for sg in env.unwrapped.subgoals)
    assert all(
        set(sg.targets) <= set(env.unwrapped.target_vocabulary) for sg in env.unwrapped.subgoals
    )
    assert set(info["subgoals"]) == set(ids) and not any(info["subgoals"].values())
    for sg in env.unwrapped.subgoals:
        assert sg.description and all(r in ids for r in sg.requires)


def test_validation_seeds_are_fixed_and_disjoint_from_training():
    for seeds in VALIDATION_SEEDS.values():
        assert len(seeds) == len(set(seeds)) == 100
        assert min(seeds) >= TRAIN_SEED_LIMIT
    all_seeds = [s for seeds in VALIDATION_SEEDS.values() for s in seeds]
    assert len(all_seeds) == len(set(all_seeds))
