"""Hints and reviews for the critic alone: the actor's input carries none, in every trainer."""

import dataclasses
import json

import numpy as np
import pytest
import torch

import feedbackgym
from feedbackgym.config import CRITIC_HINTS_SUFFIX, HINT_FIELDS, REVIEW_FIELDS, FeedbackConfig
from feedbackgym.errors import ConfigError
from feedbackgym.training.common.run_settings import RunConfig
from feedbackgym.training.common.trainer_view import TrainerView, trainer_env
from feedbackgym.training.experiments.launch import train_run
from feedbackgym.training.llm.llm_settings import LLMRunConfig
from feedbackgym.training.torch_ppo.learner import make_agent
from feedbackgym.training.torch_ppo.network import build_agent
from feedbackgym.training.torch_ppo.ppo import PPOConfig, start_learner
from tests.training.tiny_runs import tiny_run

EASY = "feedbackgym/OpsIncidentEasy-v2"
ARM = "guide+shaping" + CRITIC_HINTS_SUFFIX


def test_the_suffix_hands_every_hint_to_the_critic_and_reviews_go_there_by_default():
    config = FeedbackConfig.for_arm(ARM)
    assert (config.guide.reader, config.guide.dropout) == ("critic", 0.0)
    assert config.critic_fields() == HINT_FIELDS + REVIEW_FIELDS
    assert FeedbackConfig.for_arm("guide-then-review+shaping").critic_fields() == REVIEW_FIELDS
    assert FeedbackConfig.for_arm("guide+shaping+failure-hints+critic-hints").guide.when == (
        "after-failure"
    )
    with pytest.raises(ConfigError, match=r"unknown arm 'shaping\+critic-hints'.*critic-hints"):
        FeedbackConfig.for_arm("shaping+critic-hints")


def test_critic_hints_cannot_go_to_the_text_and_old_runs_read_reviews_with_the_actor(tmp_path):
    with pytest.raises(ConfigError, match="guide.reader 'critic' with the guide's 'text'"):
        FeedbackConfig.from_mapping({"guide": {"reader": "critic", "channels": ["text"]}})
    config = RunConfig(
        env_id=EASY, arm="guide-then-review+shaping", seed=0, total_steps=1, out_dir=str(tmp_path)
    )
    saved = json.loads(config.to_json())
    for section in ("guide", "review"):
        del saved["feedback"][section]["reader"]  # a config.json from before the readers
    old = RunConfig.from_json(json.dumps(saved))
    assert old.arm_config(old.feedback).critic_fields() == ()


def test_the_guides_and_reviews_vector_keys_are_the_declared_fields():
    space = feedbackgym.make(EASY, "guide-then-review+shaping").observation_space
    assert {k for k in space.spaces if k.startswith("hint_")} == set(HINT_FIELDS)
    assert {k for k in space.spaces if k.startswith("review_")} == set(REVIEW_FIELDS)


def test_the_language_model_trainer_refuses_critic_hints(tmp_path):
    with pytest.raises(ConfigError, match="vector trainers"):
        LLMRunConfig(env_id=EASY, arm=ARM, seed=0, total_rounds=1, out_dir=str(tmp_path))


def _hinted_observations(policy):
    """Flat observations of easy-v2 under the arm with hints shown, and the same hints zeroed."""
    env = trainer_env(EASY, ARM, masks=policy == "entity")
    rows = []
    for seed in range(4):
        obs, _ = env.reset(seed=seed)
        obs, *_ = env.step(int(np.flatnonzero(env.get_wrapper_attr("action_masks")())[0]))
        rows.append(obs)
    hinted = torch.as_tensor(np.stack(rows))
    columns = list(env.critic_columns(HINT_FIELDS))
    assert hinted[:, columns].sum() > 0, "the guide hinted"
    plain = hinted.clone()
    plain[:, columns] = 0.0
    return env, hinted, plain


@pytest.mark.parametrize("policy", ["entity", "mlp"])
def test_the_torch_actor_reads_no_hint_and_the_critic_does(policy):
    env, hinted, plain = _hinted_observations(policy)
    config = PPOConfig(EASY, arm=ARM, policy=policy, n_envs=1)
    fields = FeedbackConfig.for_arm(ARM).critic_fields()

    class _Envs:  # the one-env view make_agent reads, as EnvWorkers answers it
        single_observation_space = env.observation_space
        single_action_space = env.action_space

        @staticmethod
        def call(name, *args):
            return [getattr(env, name)(*args)]

    torch.manual_seed(0)
    agent = make_agent(config, _Envs(), fields)
    with torch.no_grad():
        hinted_logits, hinted_values = _logits_and_values(agent, hinted)
        plain_logits, plain_values = _logits_and_values(agent, plain)
    assert torch.equal(hinted_logits, plain_logits)
    assert not torch.allclose(hinted_values, plain_values)
    rebuilt = build_agent(agent.shape, env.entity_layout() if policy == "entity" else None)
    rebuilt.load_state_dict(agent.state_dict())
    with torch.no_grad():
        assert torch.equal(_logits_and_values(rebuilt, hinted)[0], hinted_logits)


def _logits_and_values(agent, obs):
    if hasattr(agent, "logits"):
        return agent.logits(obs)
    return agent.actor(agent.actor_input(obs)), agent.value(obs)


def test_the_fused_rollout_policy_ignores_the_critic_columns_as_the_agent_does():
    from feedbackgym.training.torch_ppo.network import Agent, FusedPolicy

    torch.manual_seed(0)
    agent = Agent(obs_size=6, n_actions=4, hidden=8, critic_columns=(4, 5))
    obs = torch.randn(3, 6)
    action, logprob, value = FusedPolicy(agent)(obs)
    with torch.no_grad():
        _, expected_logprob, _, expected_value = agent.act(obs, action)
    assert torch.allclose(logprob, expected_logprob, atol=1e-5)
    assert torch.allclose(value, expected_value, atol=1e-5)
    moved = obs.clone()
    moved[:, 4:] += 5.0
    with torch.no_grad():
        assert torch.equal(
            agent.actor(agent.actor_input(obs)), agent.actor(agent.actor_input(moved))
        )


def test_a_torch_learner_of_the_arm_builds_its_agent_with_the_hints_for_the_critic():
    learner, _ = start_learner(PPOConfig(EASY, arm=ARM, n_envs=2, n_steps=8), torch.device("cpu"))
    try:
        assert learner.agent.shape["critic_entity_columns"]  # hint_targets: a service each
        assert len(learner.agent.shape["critic_columns"]) > 0
        learner.collect()
        assert np.isfinite(learner.update()["loss"])
    finally:
        learner.envs.close()


@pytest.mark.parametrize("policy", ["entity", "mlp"])
def test_sb3_keeps_the_hints_from_the_actor_and_resumes(tmp_path, policy):
    config = tiny_run(EASY, ARM, tmp_path / policy, trainer="sb3", policy=policy)
    train_run(config)
    longer = train_run(dataclasses.replace(config, total_steps=128), resume=True)
    assert longer["timesteps"] == 128
    from feedbackgym.training.sb3.run_sb3 import rollback

    model = rollback(config.out_dir)
    env = TrainerView(feedbackgym.make(EASY, ARM)).env
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(int(np.flatnonzero(env.get_wrapper_attr("action_masks")())[0]))
    assert obs["hint_present"][0] == 1
    plain = {key: value * 0 if key in HINT_FIELDS else value for key, value in obs.items()}
    tensors = [model.policy.obs_to_tensor(o)[0] for o in (obs, plain)]
    with torch.no_grad():
        hinted_logits, plain_logits = (
            model.policy.get_distribution(t).distribution.logits for t in tensors
        )
        values = [model.policy.predict_values(t) for t in tensors]
    assert torch.equal(hinted_logits, plain_logits)
    assert not torch.equal(*values)
