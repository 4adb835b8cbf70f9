"""The entity policy: its view of an observation, equivariance, masks, any preset's positions."""

import dataclasses
import json

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

import feedbackgym
from feedbackgym.entity_view import EntityLayout, EntityView, entity_view_of
from feedbackgym.errors import ConfigError
from feedbackgym.training.common.entity_network import (
    EntityAgent,
    MaskedSampler,
    PolicyMismatchError,
    permuted,
)
from feedbackgym.training.common.run_settings import RunConfig
from feedbackgym.training.common.trainer_names import resolve_policy
from feedbackgym.training.common.trainer_view import TrainerView, trainer_env
from feedbackgym.training.experiments.launch import train_run
from feedbackgym.training.torch_ppo.learner import check_checkpoint
from feedbackgym.training.torch_ppo.ppo import PPOConfig, start_learner
from feedbackgym.training.torch_ppo.run_torch import load_agent, play_checkpoint

EASY, HARD = "feedbackgym/OpsIncidentEasy-v2", "feedbackgym/OpsIncidentHard-v2"


def _observations(env_id, count=6, steps=5, arm="guide+shaping"):
    """Flat observations (mask last) from real episodes, a few masked random steps in."""
    env = trainer_env(env_id, arm, masks=True)
    rng = np.random.default_rng(0)
    rows = []
    for seed in range(count):
        obs, _ = env.reset(seed=seed)
        for _ in range(steps):
            allowed = np.flatnonzero(env.get_wrapper_attr("action_masks")())
            following, _, terminated, truncated, _ = env.step(int(rng.choice(allowed)))
            if terminated or truncated:
                break
            obs = following
        rows.append(obs)
    return env, np.stack(rows)


def test_the_views_widths_do_not_depend_on_the_preset_and_the_hint_targets_are_entity_columns():
    easy = TrainerView(feedbackgym.make(EASY, "guide+shaping")).entity_layout()
    hard = TrainerView(feedbackgym.make(HARD, "guide+shaping")).entity_layout()
    assert easy.widths == hard.widths
    assert (easy.view.count, hard.view.count) == (8, 13)
    assert easy.n_actions == 8 * 11 + 3 and hard.n_actions == 13 * 11 + 3
    bare = EntityLayout(feedbackgym.make(EASY).observation_space, easy.view)
    assert easy.widths["entity"] == bare.widths["entity"] + 1  # hint_targets: one a service


def test_the_layout_cuts_a_flat_batch_into_the_declared_parts():
    env, flat = _observations(EASY, count=2)
    layout = env.entity_layout()
    entities, present, relations, globals_ = layout.split(flat)
    assert entities.shape == (2, 8, layout.widths["entity"])
    assert relations.shape == (2, 8, 8, 2) and globals_.shape == (2, layout.widths["globals"])
    calls = env.unwrapped._rows.field("calls").reshape(
        8, 8
    )  # the last episode's, as the env has it
    np.testing.assert_array_equal(relations[1, :, :, 0], calls)
    np.testing.assert_array_equal(present[1], env.unwrapped._rows.field("present"))


def test_a_view_that_does_not_fit_the_observation_is_refused_by_name():
    space = spaces.Dict({"present": spaces.MultiBinary(2), "load": spaces.Box(0, 1, (3,))})
    with pytest.raises(ValueError, match="'speed', which the observation does not have"):
        EntityLayout(space, EntityView(2, "present", {"speed": 1}))
    with pytest.raises(ValueError, match="'load' has 3 values, fewer than 2 positions x 2"):
        EntityLayout(space, EntityView(2, "present", {"load": 2}))
    assert entity_view_of(feedbackgym.make("feedbackgym/OpsIncidentEasy-v0")) is None


def test_permuting_the_services_permutes_the_action_probabilities_and_keeps_the_value():
    env, flat = _observations(EASY)
    layout = env.entity_layout()
    torch.manual_seed(0)
    agent = EntityAgent(layout, hidden=32)
    for layer in agent.modules():  # weights large enough that the outputs differ by service
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.normal_(layer.weight, std=0.5)
    order = np.random.default_rng(1).permutation(8)
    with torch.no_grad():
        logits, value = agent.logits(torch.as_tensor(flat))
        moved, moved_value = agent.logits(torch.as_tensor(permuted(layout, flat, order)))
    probs, moved_probs = logits.softmax(-1), moved.softmax(-1)
    per_service = np.arange(8 * 11).reshape(8, 11)
    torch.testing.assert_close(moved_probs[:, per_service], probs[:, per_service[order]])
    torch.testing.assert_close(moved_probs[:, 88:], probs[:, 88:])
    torch.testing.assert_close(moved_value, value)
    assert probs[:, per_service].std() > 1e-3  # the check is not on a uniform policy


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_no_masked_action_is_ever_sampled(seed):
    rng = np.random.default_rng(seed)
    layout = trainer_env(EASY, "shaping", masks=True).entity_layout()
    width = layout.size + layout.n_actions
    flat = rng.normal(0, 3, (64, width)).astype(np.float32)
    flat[:, layout.present_index] = rng.integers(0, 2, (64, 8))
    masks = rng.random((64, layout.n_actions)) < rng.uniform(0.01, 0.5)
    masks[np.arange(64), rng.integers(0, layout.n_actions, 64)] = True  # one allowed at least
    flat[:, layout.size :] = masks
    torch.manual_seed(seed)
    agent = EntityAgent(layout)
    obs = torch.as_tensor(flat)
    drawn = MaskedSampler(agent)(obs, torch.Generator().manual_seed(seed))[0].numpy()
    sampled = agent.act(obs)[0].numpy()
    assert masks[np.arange(64), drawn].all() and masks[np.arange(64), sampled].all()
    logprob = agent.act(obs, torch.as_tensor(drawn))[1]
    assert torch.isfinite(logprob).all()


def test_the_default_policy_follows_the_view_and_entity_without_one_is_one_line():
    assert resolve_policy(None, EASY) == "entity"
    assert resolve_policy(None, "feedbackgym/CodeFix-v0") == "mlp"
    with pytest.raises(ValueError, match="declares none"):
        PPOConfig("feedbackgym/OpsIncidentEasy-v0", policy="entity")
    with pytest.raises(ValueError, match="policy must be one of entity, mlp"):
        resolve_policy("gnn", EASY)
    config = RunConfig(env_id=EASY, arm="shaping", seed=0, total_steps=64, out_dir="x")
    assert (config.policy, config.net_arch) == ("entity", [32, 32])
    saved = json.loads(config.to_json())
    del saved["policy"]  # a run saved before the entity policy trained the MLP
    assert RunConfig.from_json(json.dumps(saved)).policy == "mlp"


def test_a_checkpoint_of_the_other_policy_is_refused_in_one_line():
    with pytest.raises(PolicyMismatchError, match="holds an mlp policy; this run trains an entity"):
        check_checkpoint({"obs_size": 4, "n_actions": 3}, {"policy": "entity"})
    with pytest.raises(PolicyMismatchError, match=r"another shape \(hidden: 16 -> 32\)"):
        check_checkpoint({"policy": "entity", "hidden": 16}, {"policy": "entity", "hidden": 32})


def test_masks_on_an_env_without_them_are_refused():
    with pytest.raises(ValueError, match="needs action_masks"):
        trainer_env("feedbackgym/CodeFix-v0", "sparse", masks=True)


def test_text_joins_the_globals():
    config = PPOConfig(
        EASY,
        arm="shaping",
        n_envs=2,
        n_steps=8,
        use_text=True,
        text_length=64,
        env_kwargs={"obs_mode": "both"},
    )
    learner, _ = start_learner(config, torch.device("cpu"))
    try:
        assert learner.agent.shape["text_length"] == 64
        learner.collect()
        assert np.isfinite(learner.update()["loss"])
    finally:
        learner.envs.close()


def _easy_run(out_dir, **settings):
    """A short torch run of shaping on easy-v2 (the entity policy by default), two envs."""
    return RunConfig(
        env_id=EASY,
        arm="shaping",
        seed=0,
        out_dir=str(out_dir),
        n_envs=2,
        eval_every=2,
        eval_episodes=2,
        device="cpu",
        **settings,
    )


def test_an_easy_checkpoint_plays_hard_with_its_weights_unchanged(tmp_path):
    train_run(_easy_run(tmp_path / "easy", total_steps=256, n_steps=64))
    saved = json.loads((tmp_path / "easy" / "config.json").read_text())
    assert (saved["policy"], saved["net_arch"]) == ("entity", [32, 32])
    best = tmp_path / "easy" / "checkpoints" / "best.pt"
    evaluation, played = play_checkpoint(best, HARD, episodes=3)
    assert played.env_id == HARD and 0.0 <= evaluation.success <= 1.0
    assert evaluation.mean_length > 0
    hard_layout = trainer_env(HARD, "shaping", masks=True).entity_layout()
    agent = load_agent(best, hard_layout)
    weights = torch.load(best, weights_only=True)["agent"]
    assert all(torch.equal(agent.state_dict()[k], v) for k, v in weights.items())
    with pytest.raises(PolicyMismatchError, match="an entity policy needs an env"):
        load_agent(best)


def test_an_entity_run_resumes_and_refuses_another_policy(tmp_path):
    config = _easy_run(tmp_path / "run", total_steps=128, n_steps=32)
    train_run(config)
    longer = train_run(dataclasses.replace(config, total_steps=256), resume=True)
    assert longer["timesteps"] == 256
    with pytest.raises(ConfigError, match=r"policy: 'entity' -> 'mlp'"):
        train_run(dataclasses.replace(config, total_steps=384, policy="mlp"), resume=True)
