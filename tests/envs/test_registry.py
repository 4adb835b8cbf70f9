"""Registry-driven checks over every feedbackgym env id and observation mode."""

import json
import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils.env_checker import check_env, data_equivalence

import feedbackgym  # noqa: F401  (registers the ids)
from feedbackgym.errors import DependencyNotInstalled

SPECS = [
    spec
    for spec in gym.registry.values()
    if isinstance(spec.entry_point, str) and spec.entry_point.startswith("feedbackgym.envs")
]
OBS_MODES = ("vector", "text", "both")
CASES = [(spec, mode) for spec in SPECS for mode in OBS_MODES]
CASE_IDS = [f"{spec.id}-{mode}" for spec, mode in CASES]


def _make(spec, mode, **kwargs):
    try:
        return gym.make(spec.id, obs_mode=mode, **kwargs)
    except DependencyNotInstalled as error:
        pytest.skip(str(error))


def _make_case(spec, mode):
    """_make for the tests run once per obs mode; a browser env runs its "both" case only.

    Its "both" observation is the vector Dict plus the text, from the same page, so that
    case covers the other two; each case costs fresh Chromium contexts (tests/envs/web
    checks every mode's space).
    """
    env = _make(spec, mode)
    if mode != "both" and env.unwrapped.metadata.get("browser"):
        env.close()
        pytest.skip("browser env: its 'both' case covers the vector and text observations")
    return env


def test_registry_is_not_empty():
    assert {s.id for s in SPECS} >= {
        "feedbackgym/OpsIncident-v0",
        "feedbackgym/OpsIncidentEasy-v0",
        "feedbackgym/OpsIncidentMedium-v0",
        "feedbackgym/OpsIncidentHard-v0",
    }


@pytest.mark.parametrize("spec, mode", CASES, ids=CASE_IDS)
def test_check_env(spec, mode):
    env = _make_case(spec, mode)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
def test_sb3_check_env_in_vector_mode(spec):
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    env = _make(spec, "vector")
    with warnings.catch_warnings(record=True) as with_warnings:
        warnings.simplefilter("always")
        sb3_checker.check_env(env.unwrapped)
    assert [str(w.message) for w in with_warnings] == []
    env.close()


def _rollout(env, seed, steps=60):
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    trace = [obs]
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        trace.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            obs, _ = env.reset()
            trace.append(obs)
    return trace


@pytest.mark.parametrize("spec, mode", CASES, ids=CASE_IDS)
def test_determinism(spec, mode):
    if spec.nondeterministic:
        pytest.skip("nondeterministic env")
    first = _rollout(_make_case(spec, mode), seed=7)
    second = _rollout(_make_case(spec, mode), seed=7)
    assert data_equivalence(first, second)
    other = _rollout(_make_case(spec, mode), seed=8)
    assert not data_equivalence(first, other)


@pytest.mark.parametrize("spec, mode", CASES, ids=CASE_IDS)
def test_pickle_mid_episode(spec, mode):
    env = _make_case(spec, mode)
    env.reset(seed=3)
    env.action_space.seed(3)
    _, _, terminated, truncated, _ = env.step(env.action_space.sample())
    if terminated or truncated:
        env.reset(seed=4)
    clone = pickle.loads(pickle.dumps(env))
    action = int(env.action_space.sample())
    assert data_equivalence(env.step(action), clone.step(action))


@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
def test_spec_json_round_trip(spec):
    env = _make(spec, "both")
    text = env.spec.to_json()
    json.loads(text)
    remade = gym.make(EnvSpec.from_json(text))
    obs_a, _ = env.reset(seed=1)
    obs_b, _ = remade.reset(seed=1)
    assert data_equivalence(obs_a, obs_b)


@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
def test_close_twice_and_vector_env(spec):
    env = _make(spec, "vector")
    env.reset(seed=0)
    env.close()
    env.close()
    envs = gym.make_vec(spec.id, num_envs=2, vectorization_mode="sync")
    obs, _ = envs.reset(seed=0)
    obs, *_ = envs.step(np.array([0, 1]))
    assert all(value.shape[0] == 2 for value in obs.values())  # every key is batched
    envs.close()


@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
def test_every_id_holds_out_validation_seeds_no_training_seed_reaches(spec):
    from feedbackgym.envs.base import TRAIN_SEED_LIMIT
    from feedbackgym.experts import held_out_seeds
    from feedbackgym.training.common.validation import validation_seeds

    env = _make(spec, "vector")
    try:
        seeds = held_out_seeds(env)  # what `datasets make --split validation` plays
        assert len(seeds) >= 30 and len(set(seeds)) == len(seeds)
        assert min(seeds) >= TRAIN_SEED_LIMIT
        assert validation_seeds(env, 30) == list(seeds[:30])  # what the runner validates on
    finally:
        env.close()


def test_a_third_party_env_is_validated_on_seeds_above_every_training_seed():
    from feedbackgym.envs.base import VALIDATION_SEED_START
    from feedbackgym.training.common.validation import validation_seeds

    env = gym.make("CartPole-v1")
    assert validation_seeds(env, 3) == [VALIDATION_SEED_START + k for k in range(3)]
    env.close()
