"""The task curriculum: the rule, the widened knobs, the wrapper, the controller and the runs."""

import dataclasses
import json
import math

import gymnasium as gym
import pytest
from hypothesis import given
from hypothesis import strategies as st

import feedbackgym
from feedbackgym.config import CurriculumConfig, FeedbackConfig
from feedbackgym.control import FeedbackController
from feedbackgym.envs.incident.scenario import PRESETS, widened
from feedbackgym.errors import ConfigError
from feedbackgym.feedback.curriculum import CurriculumRule, signal_share
from feedbackgym.training.common.feedback_metrics import feedback_metrics
from feedbackgym.training.experiments.launch import train_run
from feedbackgym.wrappers import WidenTasks
from tests.training.tiny_runs import tiny_run

HARD = "feedbackgym/OpsIncidentHard-v2"


def test_the_rule_widens_past_its_band_narrows_under_it_and_waits_between_moves():
    rule = CurriculumRule(CurriculumConfig(min_rounds=3, smoothing=0.5, step=0.5))
    widths = [rule.observe(s) for s in (1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)]
    assert widths == [0.0, 0.0, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 1.0]  # capped at the preset
    assert [rule.observe(s) for s in (0.0, 0.0, 0.0)] == [1.0, 1.0, 1.0]  # average 0.125
    assert rule.observe(0.0) == 0.5 and rule.moves == [(3, 0.5), (6, 1.0), (13, 0.5)]
    assert rule.observe(math.nan) == 0.5 and rule.rounds_at_width == 0  # no episode ended
    restored = CurriculumRule(CurriculumConfig())
    restored.load_state_dict(json.loads(json.dumps(rule.state_dict())))
    assert restored.state_dict() == rule.state_dict()


def test_the_signal_share_is_zero_at_either_end_and_highest_at_half():
    assert signal_share(0.0, 8) == signal_share(1.0, 8) == 0.0
    assert signal_share(0.5, 8) > signal_share(0.2, 8) > signal_share(0.05, 8) > 0.0


def test_a_band_upside_down_is_refused():
    with pytest.raises(ConfigError, match="narrow_below must not exceed widen_above"):
        FeedbackConfig.from_mapping({"curriculum": {"narrow_below": 0.8, "widen_above": 0.5}})


@given(st.sampled_from(list(PRESETS)), st.floats(0.0, 1.0))
def test_every_width_of_every_preset_is_a_valid_difficulty_between_easy_and_the_preset(name, width):
    target, easy = PRESETS[name], PRESETS["easy"]
    knobs = widened(target, width)
    assert knobs.step_limit == target.step_limit
    for knob in ("max_services", "faults", "max_hops", "misleading_alerts", "waves"):
        low, high = sorted((getattr(easy, knob), getattr(target, knob)))
        assert low <= getattr(knobs, knob) <= high


def test_widths_grow_monotonically_towards_the_preset():
    counts = [widened(PRESETS["hard"], w / 4) for w in range(5)]
    for knob in ("max_services", "faults", "max_hops", "misleading_alerts"):
        values = [getattr(k, knob) for k in counts]
        assert values == sorted(values) and values[-1] == getattr(PRESETS["hard"], knob)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        widened(PRESETS["hard"], 1.5)


def test_training_episodes_play_the_width_and_the_test_split_plays_its_preset():
    train, test = WidenTasks(gym.make(HARD)), WidenTasks(gym.make(HARD, split="test"))
    for env in (train, test):
        env.set_width(0.0)
    services = set()
    for seed in range(20):
        train.reset(seed=seed)
        services.add(len(train.unwrapped._slot_list))
        test.reset(seed=seed)
        assert len(test.unwrapped._slot_list) >= PRESETS["hard"].min_services
    assert max(services) <= PRESETS["easy"].max_services
    assert train.observation_space == test.observation_space  # the preset's positions
    train.set_width(None)
    train.reset(seed=0)
    assert train.unwrapped.preset == PRESETS["hard"]


def test_the_arm_drives_the_envs_width_through_the_controller_and_refuses_envs_without_knobs():
    config = FeedbackConfig.for_arm("shaping+curriculum")
    env = feedbackgym.make(HARD, config)
    controller = FeedbackController(config, envs=env)
    assert controller.state.curriculum == 0.0
    env.reset(seed=0)
    assert env.unwrapped.preset.faults == 1
    for round_ in range(1, 8):
        controller.update(round_, success=1.0)
    assert controller.state.curriculum == 0.5  # two moves: 3 rounds each at a width
    metrics = feedback_metrics(controller, [], None)
    assert metrics["curriculum_width"] == 0.5 and metrics["curriculum_signal"] == 0.0
    env.reset(seed=0)
    assert env.unwrapped.preset == widened(PRESETS["hard"], 0.5)
    with pytest.raises(ConfigError, match="task knobs"):
        feedbackgym.make("feedbackgym/OpsIncidentEasy-v0", "shaping+curriculum")
    with pytest.raises(ConfigError, match="vector trainers"):
        from feedbackgym.training.llm.llm_settings import LLMRunConfig

        LLMRunConfig(env_id=HARD, arm="shaping+curriculum", seed=0, total_rounds=1, out_dir="x")


@pytest.mark.parametrize("trainer", ["torch", "sb3"])
def test_the_curriculum_state_survives_a_resume(tmp_path, trainer):
    config = tiny_run(
        HARD,
        "shaping+curriculum",
        tmp_path,
        total_steps=128,
        eval_every=2,
        trainer=trainer,
        # Starts halfway and narrows each round a random policy does not win 90% of.
        feedback_overrides={
            "curriculum": {"start": 0.5, "narrow_below": 0.9, "widen_above": 0.95, "min_rounds": 1}
        },
    )
    train_run(config)
    saved = json.loads((tmp_path / "state.json").read_text())["controller"]["curriculum"]
    assert saved["width"] == 0.25 and saved["moves"] == [[1, 0.25]]
    train_run(dataclasses.replace(config, total_steps=256), resume=True)
    resumed = json.loads((tmp_path / "state.json").read_text())["controller"]["curriculum"]
    assert resumed["moves"][:1] == [[1, 0.25]] and resumed["width"] == 0.0


def test_restarts_and_a_curriculum_exclude_each_other():
    with pytest.raises(ConfigError, match="curriculum and reexplore exclude each other"):
        FeedbackConfig.from_mapping({"curriculum": {}, "reexplore": {}})
    with pytest.raises(ConfigError, match="unknown arm"):
        FeedbackConfig.for_arm("shaping+reexplore+curriculum")


def test_a_custom_target_with_fewer_positions_than_easy_keeps_to_them():
    target = dataclasses.replace(PRESETS["easy"], min_services=4, max_services=6)
    assert widened(target, 0.0).max_services == 6 and widened(target, 0.0).min_services == 5


def test_validation_plays_the_preset_even_on_a_training_split():
    from feedbackgym.training.common.validation import evaluate_policy, one_at_a_time

    config = FeedbackConfig.for_arm("shaping+curriculum")
    env = feedbackgym.make(HARD, config)  # the train split, as a user's env_kwargs may ask
    controller = FeedbackController(config, envs=env)
    assert controller.state.curriculum == 0.0
    evaluate_policy([env], one_at_a_time(lambda obs: 0), [10_000_000], controller.state)
    assert env.unwrapped.preset == PRESETS["hard"]
