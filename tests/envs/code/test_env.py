"""Behaviour of CodeFixEnv: expert, random policy, actions, text, observations, failures."""

import pickle

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import data_equivalence

import feedbackgym  # noqa: F401  (registers the ids)
from feedbackgym.envs.code import (
    DIFFICULTIES,
    TRAIN_SEED_LIMIT,
    VALIDATION_SEEDS,
    CodeFixEnv,
)
from feedbackgym.envs.code.actions import (
    EDIT,
    LIST,
    N_ACTIONS,
    REVERT,
    RUN_ALL,
    SUBMIT,
    FreeEdit,
    view_action,
)
from feedbackgym.envs.code.subgoals import SUBGOAL_IDS
from feedbackgym.envs.code.text import CHARSET
from feedbackgym.errors import FeedbackGymError, InvalidAction
from feedbackgym.rollout import run_episodes, summarize
from tests.envs.code.conftest import require_backend

ENV_ID = "feedbackgym/CodeFix-v0"


@pytest.fixture
def local_env():
    require_backend("local")
    env = CodeFixEnv("medium", "both", sandbox="local")
    yield env
    env.close()


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_expert_solves_every_validation_seed_in_six_steps(difficulty):
    require_backend("local")
    env = gym.make(ENV_ID, difficulty=difficulty, sandbox="local")
    seeds = VALIDATION_SEEDS[difficulty][:10]
    summary = summarize(list(run_episodes(env, "expert", len(seeds), seeds[0])))
    env.close()
    assert summary["success_rate"] == 1.0
    assert summary["median_length"] >= 6 and summary["subgoal_fraction"] == 1.0


def test_expert_in_docker():
    require_backend("docker")
    env = gym.make(ENV_ID, difficulty="hard", sandbox="docker")
    summary = summarize(list(run_episodes(env, "expert", 5, seed=1)))
    env.close()
    assert summary["success_rate"] == 1.0


test_expert_in_docker = pytest.mark.docker(test_expert_in_docker)


def test_random_policy_rarely_succeeds():
    require_backend("local")
    env = gym.make(ENV_ID, difficulty="easy", sandbox="local")
    summary = summarize(list(run_episodes(env, "random", 60, seed=0)))
    env.close()
    assert summary["success_rate"] < 0.05


def test_validation_seeds_are_disjoint_from_training():
    seeds = [s for group in VALIDATION_SEEDS.values() for s in group]
    assert len(seeds) == len(set(seeds)) == 300 and min(seeds) >= TRAIN_SEED_LIMIT


def test_same_episode_in_both_backends():
    require_backend("local")
    require_backend("docker")
    traces = []
    for kind in ("local", "docker"):
        env = CodeFixEnv("hard", "both", sandbox=kind)
        trace = [env.reset(seed=11)]
        env.action_space.seed(11)
        for _ in range(25):
            step = env.step(env.action_space.sample())
            trace.append(step)
            if step[2] or step[3]:
                trace.append(env.reset())
        env.close()
        traces.append(trace)
    assert data_equivalence(*traces)


test_same_episode_in_both_backends = pytest.mark.docker(test_same_episode_in_both_backends)


def test_subgoals_follow_the_expert(local_env):
    _, info = local_env.reset(seed=3)
    assert [sg.id for sg in local_env.subgoals] == list(SUBGOAL_IDS)
    assert SUBGOAL_IDS[0] == "find_failing_test" and SUBGOAL_IDS[-1] == "submit"
    assert not any(info["subgoals"].values())
    done_counts = []
    while True:
        _, reward, terminated, truncated, info = local_env.step(local_env.expert_action())
        done_counts.append(sum(info["subgoals"].values()))
        if terminated or truncated:
            break
    assert done_counts == [1, 2, 2, 3, 4, 5] and reward == 1.0 and info["outcome"] == "fixed"
    assert pickle.loads(pickle.dumps(local_env.subgoals))[0].id == "find_failing_test"


def test_overfitting_edit_fails_on_submit(local_env):
    local_env.reset(seed=0)
    project = local_env.state.project
    wrong = [k for k, e in enumerate(project.edits) if e.role == "wrong"]
    for k in wrong:
        local_env.reset(seed=0)
        _, _, _, _, info = local_env.step(EDIT + k)
        assert info["harmful"]
        _, reward, terminated, _, info = local_env.step(SUBMIT)
        assert terminated and reward == 0.0 and info["outcome"] == "tests_failing"
        assert info["harmful"] and not info["is_success"]


def test_text_actions(local_env):
    local_env.reset(seed=4)
    project = local_env.state.project
    bug_file, failing = project.bug_file, project.failing[0]
    assert local_env.parse_action("list files") == LIST
    assert local_env.parse_action("Action: run the tests.") == RUN_ALL
    assert local_env.parse_action(f"run test {failing}") == local_env.action_meanings.index(
        f"run test {failing}"
    )
    slot = project.file_names.index(bug_file)
    assert local_env.parse_action(f"view {bug_file} 14") == view_action(slot, 1)
    assert local_env.parse_action(f"open {bug_file}") == view_action(slot, 0)
    assert local_env.parse_action("apply edit 3") == EDIT + 3
    assert local_env.parse_action(project.fix.command) == EDIT + project.edits.index(project.fix)
    free = local_env.parse_action(f'edit {bug_file} 1 "x = 1  # mine"')
    assert free == FreeEdit(bug_file, 1, "x = 1  # mine")
    for index, meaning in enumerate(local_env.action_meanings):
        assert local_env.parse_action(meaning) == index
        assert local_env.parse_action(index) == index


@pytest.mark.parametrize(
    "bad, message",
    [
        (N_ACTIONS, "outside Discrete"),
        (-1, "outside Discrete"),
        ("reboot the server", "cannot parse"),
        ('edit nowhere.py 1 "x"', "no such file"),
        ('edit {file} 999 "x"', "has lines 1.."),
        ("edit {file} 1 'single quotes'", "cannot parse"),
        ('edit {file} 1 "unterminated', "cannot parse"),
        ('edit {file} 1 "two\\nlines"', "one line"),
        (1.5, "integer or text"),
        (None, "integer or text"),
        (True, "integer or text"),
    ],
)
def test_bad_actions_raise_clear_errors(local_env, bad, message):
    local_env.reset(seed=0)
    if isinstance(bad, str):
        bad = bad.replace("{file}", local_env.state.project.bug_file)
    with pytest.raises(InvalidAction, match=message) as error:
        local_env.step(bad)
    assert "valid" in str(error.value) or "line" in str(error.value) or "file" in str(error.value)


def test_free_edit_fixes_the_bug(local_env):
    local_env.reset(seed=6)
    fix = local_env.state.project.fix
    obs, *_ = local_env.step(f"edit {fix.file} {fix.line} {__import__('json').dumps(fix.text)}")
    assert obs["applied"].sum() == 1  # it matched the candidate
    local_env.reset(seed=6)
    broken = FreeEdit(fix.file, fix.line, fix.text + "  # same code, other text")
    obs, *_ = local_env.step(broken)
    assert obs["last_action"] == 6 and obs["modified"].sum() == 1 and obs["applied"].sum() == 0
    local_env.step(RUN_ALL)
    _, reward, *_, info = local_env.step(SUBMIT)
    assert reward == 1.0 and info["is_success"]


def test_observations_track_what_was_seen(local_env):
    obs, _ = local_env.reset(seed=2)
    project = local_env.state.project
    assert obs["files"].sum() == len(project.files) and obs["tests"].sum() == len(project.tests)
    assert not obs["passed"].any() and not obs["viewed"].any() and obs["edit_windows"].sum() == 8
    obs, *_ = local_env.step(RUN_ALL)
    assert obs["failed"].sum() == 1 and obs["passed"].sum() == len(project.tests) - 1
    assert obs["ever_failed"].sum() == 1 and obs["last_result"] == 3
    obs, *_ = local_env.step(EDIT + project.edits.index(project.fix))
    assert not obs["passed"].any() and obs["ever_failed"].sum() == 1 and obs["applied"].sum() == 1
    obs, *_ = local_env.step(REVERT)
    assert obs["failed"].sum() == 1 and obs["modified"].sum() == 0  # results of the original code
    obs, _, _, _, info = local_env.step(REVERT)
    assert obs["last_result"] == 5 and info["tests"] == dict.fromkeys(info["tests"], 0)
    assert obs["text"].endswith("Nothing to revert.")


def test_missing_slots_report_and_do_not_raise(local_env):
    local_env.reset(seed=0)
    for action in (EDIT - 1, view_action(5, 3), 2 + 9):
        obs, *_ = local_env.step(action)
        assert obs["last_result"] == 6 and "Nothing there" in obs["text"]


def test_text_observation_stays_in_its_space():
    require_backend("local")
    env = CodeFixEnv("hard", "text", sandbox="local")
    obs, _ = env.reset(seed=9)
    texts = [obs]
    project = env.state.project
    actions = [LIST, RUN_ALL, *(view_action(i, 0) for i in range(len(project.files)))]
    actions += [FreeEdit(project.bug_file, 1, "print('\\t\\u00e9\\x00' * 3000)"), RUN_ALL, REVERT]
    for action in actions:
        obs, *_ = env.step(action)
        texts.append(obs)
    env.close()
    assert all(env.observation_space.contains(t) and set(t) <= set(CHARSET) for t in texts)
    assert "Printed output:" in texts[-2] and "?" in texts[-2]


def test_step_before_reset_and_after_the_end(local_env):
    with pytest.raises(FeedbackGymError, match="reset"):
        local_env.step(0)
    local_env.reset(seed=0)
    local_env.step(SUBMIT)
    with pytest.raises(FeedbackGymError, match="episode is over"):
        local_env.step(LIST)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"difficulty": "extreme"}, "difficulty"),
        ({"obs_mode": "pixels"}, "obs_mode"),
        ({"sandbox": "chroot"}, "sandbox"),
        ({"family": "typo"}, "family"),
        ({"run_timeout": 0}, "run_timeout"),
    ],
)
def test_bad_constructor_arguments(kwargs, field):
    with pytest.raises(ValueError, match=field):
        CodeFixEnv(**{"sandbox": "local", **kwargs})


def test_family_argument_and_ansi_render():
    require_backend("local")
    env = CodeFixEnv("easy", sandbox="local", family="state_leak", render_mode="ansi")
    for seed in range(5):
        env.reset(seed=seed)
        assert env.state.project.family == "state_leak"
    assert env.render().startswith("Goal:")
    env.close()
    env.close()


def test_container_dying_mid_episode_is_an_infra_error():
    require_backend("docker")
    import docker

    env = CodeFixEnv("easy", "vector", sandbox="docker")
    env.reset(seed=0)
    env.step(RUN_ALL)
    docker.from_env().containers.get(env.sandbox_name).kill()
    _, reward, terminated, truncated, info = env.step(RUN_ALL)
    assert truncated and not terminated and reward == 0.0
    assert info["infra_error"] and info["outcome"] == "infra_error"
    obs, info = env.reset(seed=0)
    assert not info["infra_error"]
    obs, *_ = env.step(RUN_ALL)
    assert obs["failed"].sum() == 1
    env.close()


test_container_dying_mid_episode_is_an_infra_error = pytest.mark.docker(
    test_container_dying_mid_episode_is_an_infra_error
)
