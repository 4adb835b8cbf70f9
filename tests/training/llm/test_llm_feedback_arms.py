"""The train-llm arms that train the model without leaving it dependent on the feedback.

``+failure-hints`` (failed groups replayed with hints, trained on without them,
importance-weighted), ``+distill`` (the model reading the feedback is the
teacher of the model without it) and ``+reexplore`` (groups started at a
reviewed step), on the tiny Gemma 3 of ``tiny_lm``; and the validations that
steer the run's versions (greedy, rollback).
"""

import json
import math

import gymnasium as gym
import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")
torch = pytest.importorskip("torch")

from feedbackgym.config import ConfigError  # noqa: E402
from feedbackgym.core import HINT_LEVELS  # noqa: E402
from feedbackgym.language.episode_chat import ReviewMemory  # noqa: E402
from feedbackgym.training.common.validation import Evaluation  # noqa: E402
from feedbackgym.training.llm.causal_lm import adapter_state, load_chat_model  # noqa: E402
from feedbackgym.training.llm.chosen_token_grpo import option_divergence  # noqa: E402
from feedbackgym.training.llm.episode_tokens import play_episode, rendered  # noqa: E402
from feedbackgym.training.llm.feedback_targets import (  # noqa: E402
    HintedEnvs,
    failure_replay,
    unhinted,
)
from feedbackgym.training.llm.grpo_rollout import (  # noqa: E402
    GroupRollout,
    RolloutMechanisms,
    seed_prompt,
)
from feedbackgym.training.llm.llm_settings import LLMRunConfig  # noqa: E402
from feedbackgym.training.llm.run_llm import AdapterRounds  # noqa: E402
from feedbackgym.wrappers.common import find_wrapper  # noqa: E402
from feedbackgym.wrappers.reexplore import Reexplore  # noqa: E402
from feedbackgym.wrappers.stack import make  # noqa: E402
from tests.training.llm.test_llm_trainer import _chats, _scalars, _train  # noqa: E402

ENV = "feedbackgym/OpsIncidentEasy-v0"
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def chat(tiny_model):
    return load_chat_model(str(tiny_model), device=CPU)


def _stack(arm, tmp_path, overrides=None, **more):
    """The run's config, controller and training stack for ``arm`` (every turn hinted)."""
    config = LLMRunConfig(
        ENV,
        arm,
        seed=0,
        total_rounds=4,
        out_dir=str(tmp_path / "run"),
        **{"max_turns": 10, **more},
        feedback_overrides={
            "guide": {"dropout": 0.0},
            "schedule": {"adaptive": None},
            **(overrides or {}),
        },
    )
    controller = config.controller()
    env = make(ENV, controller.config, **config.env_arguments())
    controller.attach(env)
    controller.update(0)
    return config, controller, env


def _full_log_probs(chat, ids, temperature=1.0):
    """Each position's next-token log-probabilities, the whole output layer (to check against)."""
    with torch.no_grad():
        logits = chat.model(input_ids=torch.tensor([ids])).logits[0]
    return torch.log_softmax(logits.float() / temperature, dim=-1)


def _expert_actions(seed):
    env = gym.make(ENV, obs_mode="text")
    env.reset(seed=seed)
    meanings, actions, done = env.unwrapped.action_meanings, [], False
    while not done:
        action = env.unwrapped.expert_action()
        actions.append(meanings[action])
        done = any(env.step(action)[2:4])
    env.close()
    return actions


def _rollout(chat, env, controller, seed, **more):
    """A round's rollout outside TRL: round 0, sampling seeded by ``seed``."""
    phase = controller.state.phase
    return GroupRollout(
        chat, env, lambda trainer: 0, phase=lambda: phase, generator=_generator(seed), **more
    )


def _generator(seed):
    return torch.Generator().manual_seed(seed)


def _chosen(episode):
    return [t for t, m in zip(episode.completion_ids, episode.env_mask, strict=True) if m]


def test_an_episode_rendered_with_its_feedback_is_its_tokens_and_without_hints_keeps_its_replies(
    chat, tmp_path
):
    _, _, env = _stack("guide", tmp_path)
    memory = ReviewMemory(2)
    memory.add({"text": "review of an earlier attempt\n- Reuse steps 0-1."})
    episode = play_episode(chat, env, 3, memory=memory, generator=torch.Generator().manual_seed(0))
    assert episode.hints == len(episode.observations) >= 1 and all(episode.turn_hints)

    same = rendered(chat, env, episode, hints=episode.turn_hints, memory=memory)
    assert same.prompt_ids == episode.prompt_ids
    assert same.completion_ids == episode.completion_ids and same.env_mask == episode.env_mask

    plain = rendered(chat, env, episode, hints=[None] * len(episode.observations))
    text = chat.tokenizer.decode(plain.prompt_ids + plain.completion_ids)
    assert "Hint" not in text and "Reviews of your earlier attempts" not in text
    assert len(plain.prompt_ids + plain.completion_ids) < len(
        episode.prompt_ids + episode.completion_ids
    )
    assert _chosen(plain) == _chosen(episode) and plain.hints == 0
    with pytest.raises(ValueError, match="hints for an episode"):
        rendered(chat, env, episode, hints=[None])


def test_a_replayed_choice_is_weighted_by_the_unhinted_over_the_hinted_probability_capped(
    chat, tmp_path
):
    _, _, env = _stack("guide", tmp_path)
    hinted = play_episode(chat, env, 4, temperature=1.3, generator=torch.Generator().manual_seed(1))
    plain = unhinted(chat, env, hinted, memory=None, turns="delta", temperature=1.3, cap=1.2)

    ids = plain.prompt_ids + plain.completion_ids
    full = _full_log_probs(chat, ids, 1.3)
    chosen = [j for j, m in enumerate(plain.env_mask) if m]
    assert chosen and len(plain.token_weights) == len(plain.completion_ids)
    hinted_chosen = [p for p, m in zip(hinted.logprobs, hinted.env_mask, strict=True) if m]
    for j, before in zip(chosen, hinted_chosen, strict=True):
        at = len(plain.prompt_ids) + j
        now = float(full[at - 1, ids[at]])
        assert plain.logprobs[j] == pytest.approx(now, abs=1e-4)
        assert plain.token_weights[j] == pytest.approx(min(1.2, math.exp(now - before)), rel=1e-3)
    assert all(w == 1.0 for j, w in enumerate(plain.token_weights) if j not in chosen)
    assert max(plain.token_weights) <= 1.2 and min(plain.token_weights) < 1.0


def test_a_failed_group_is_replayed_at_the_lowest_hint_level_that_succeeds(chat, tmp_path):
    config, controller, env = _stack("guide+failure-hints", tmp_path)
    hinted = HintedEnvs(ENV, controller.config, config.env_arguments())
    levels = {id(hinted(level)): level for level in HINT_LEVELS}
    expert, tried = _expert_actions(5), []

    def play(env):  # a player that succeeds only when hinted at "target" (a replayed expert)
        level = levels[id(env)]
        tried.append(level)
        return play_episode(chat, env, 5, prefix=expert if level == "target" else ["escalate"])

    group = [play_episode(chat, env, 5, prefix=["escalate"]) for _ in range(2)]
    tried.clear()

    def to_plain(env, episode):
        return unhinted(chat, env, episode, memory=None, turns="delta", temperature=1.0, cap=2.0)

    replayed, count = failure_replay(group, play, hinted, to_plain)

    assert tried == ["phase", "phase", "target", "target"] and count == 4
    assert [e.hint_level for e in replayed] == ["target", "target"]
    assert all(e.success and e.token_weights for e in replayed)
    assert all(e.turn_hints[0] for e in replayed)  # played hinted ...
    text = chat.tokenizer.decode(replayed[0].prompt_ids + replayed[0].completion_ids)
    assert "Hint" not in text  # ... trained on without the hints
    hopeless = [play_episode(chat, hinted("phase"), 5, prefix=["escalate"]) for _ in range(2)]
    kept, count = failure_replay(group, lambda env: hopeless[0], hinted, to_plain)
    assert kept == group and count == 6
    hinted.close()


def test_distilled_failures_get_the_hinted_teachers_log_probs_and_no_grpo_weight(chat, tmp_path):
    _, controller, env = _stack("guide+distill", tmp_path)
    rollout = _rollout(chat, env, controller, 2, mechanisms=RolloutMechanisms(distill=True))
    out = rollout([seed_prompt(6)] * 3, None)
    episodes = rollout.last.episodes
    failed = [e for e in episodes if not e.success]
    assert failed, "the tiny model fails some episodes"
    for episode in episodes:  # the student reads no hint
        assert episode.hints == 0 and all(episode.turn_hints)
        assert not any("Hint" in m["content"] for m in episode.messages)
    assert out["teacher_options"] and out["token_weights"]
    episode = failed[0]
    teacher = rendered(chat, env, episode, hints=episode.turn_hints)
    ids = teacher.prompt_ids + teacher.completion_ids
    full = _full_log_probs(chat, ids)
    chosen_teacher = [len(teacher.prompt_ids) + j for j, m in enumerate(teacher.env_mask) if m]
    chosen_student = [j for j, m in enumerate(episode.env_mask) if m]
    for at, j in zip(chosen_teacher, chosen_student, strict=True):
        options = episode.teacher_options[j]
        assert ids[at] in options and len(options) >= 2
        assert episode.teacher_logprobs[j] == pytest.approx(
            full[at - 1, options].tolist(), abs=1e-4
        )
        assert episode.token_weights[j] == 0.0
    assert not any(e.teacher_options for e in episodes if e.success)


def test_with_flagged_steps_only_the_choices_at_the_steps_a_review_flags_are_distilled(
    chat, tmp_path
):
    from feedbackgym.training.llm.feedback_targets import taught

    _, _, env = _stack("guide+distill", tmp_path)
    student = play_episode(
        chat,
        env,
        8,
        show_hints=False,
        prefix=["inspect metrics lb", "wait"],
        generator=_generator(4),
    )
    assert student.length >= 4 and student.hints == 0
    student.review = {"reexplore": [{"step": 1, "reason": "stalled"}, {"step": 3}]}
    trie = chat.trie(env.unwrapped.action_meanings)
    assert taught(
        chat,
        env,
        student,
        trie=trie,
        memory=None,
        turns="delta",
        temperature=1.0,
        only_flagged=True,
    )
    for step, (begin, end) in enumerate(student.replies):
        taught_here = [bool(student.teacher_options[j]) for j in range(begin, end)]
        chosen_here = [bool(m) for m in student.env_mask[begin:end]]
        assert taught_here == (chosen_here if step == 3 else [False] * len(chosen_here))
    # step 1 was replayed (no choice to distil), step 3 the model's
    assert any(student.teacher_options) and student.token_weights.count(0.0) == sum(
        bool(o) for o in student.teacher_options
    )
    nothing = play_episode(chat, env, 8, memory=None, show_hints=False, generator=_generator(4))
    nothing.turn_hints = [None] * len(nothing.turn_hints)
    assert not taught(chat, env, nothing, trie=trie, memory=None, turns="delta", temperature=1.0)
    assert not nothing.teacher_options
    # The review of an earlier attempt at the seed is a teacher's context too.
    memory = ReviewMemory(1)
    memory.add({"text": "Step 0 was a poor choice; inspect the database first."})
    assert taught(chat, env, nothing, trie=trie, memory=memory, turns="delta", temperature=1.0)
    teacher = rendered(chat, env, nothing, hints=nothing.turn_hints, memory=memory)
    ids = teacher.prompt_ids + teacher.completion_ids
    first = len(teacher.prompt_ids) + teacher.env_mask.index(1)
    j = nothing.env_mask.index(1)
    full = _full_log_probs(chat, ids)[first - 1, nothing.teacher_options[j]]
    assert nothing.teacher_logprobs[j] == pytest.approx(full.tolist(), abs=1e-4)


def test_the_divergence_over_the_options_is_the_kl_of_the_renormalised_distributions():
    student = torch.log(torch.tensor([[0.1, 0.3, 0.2]]))
    teacher = torch.log(torch.tensor([[0.4, 0.1, 0.9]]))
    valid = torch.tensor([[True, True, False]])
    s, t = torch.tensor([0.25, 0.75]), torch.tensor([0.8, 0.2])
    reverse = float((s * (s / t).log()).sum())
    forward = float((t * (t / s).log()).sum())
    assert float(option_divergence(student, teacher, valid, 1.0)) == pytest.approx(reverse)
    assert float(option_divergence(student, teacher, valid, 0.0)) == pytest.approx(forward)


def test_a_group_starts_at_a_reviewed_step_and_its_outcome_gates_the_start(chat, tmp_path):
    reexplore = {"prob": 1.0, "points": ["first", "last"], "gate_failures": 5}
    _, controller, env = _stack("guide+reexplore", tmp_path, {"reexplore": reexplore})
    restarts = find_wrapper(env, Reexplore)
    assert restarts.config.prob == 1.0
    assert restarts.draw_restart() is None  # nothing reviewed yet
    # A failed episode (a harmful restart at step 2, then one that ends it): its review's
    # points join the pool.
    played = ["inspect metrics lb", "restart lb", "restart db_primary"]

    def ended(actions, info):
        restarts.restart_ended(None, 7, actions, info)

    play_episode(chat, env, 7, prefix=played, on_end=ended)
    pool = list(restarts._pool)
    assert [(p.seed, p.actions) for p in pool] == [(7, played[:2])]

    rollout = _rollout(chat, env, controller, 3)
    restarts.restart_stats()
    rollout([seed_prompt(1)] * 2, None)
    group = rollout.last.episodes
    assert rollout.last.restarted_groups == 1
    start = group[0].replayed
    assert start >= 1 and all(e.seed == 7 and e.replayed == start for e in group)
    for episode in group:  # the replayed steps are turns of the chat, never trained on
        assert episode.actions[:start] == played[:start]
        assert [m["content"] for m in episode.messages[2 : 2 * start + 1 : 2]] == played[:start]
        replayed_end = episode.replies[start - 1][1]
        assert not any(episode.env_mask[:replayed_end]) and any(episode.env_mask[replayed_end:])
    stats = restarts.restart_stats()
    assert stats["restored_episodes"] == stats["restores"] == 2 and stats["true_resets"] == 0
    assert stats["replayed_steps"] == 2 * start
    assert start == 2 and pool[0].successes + pool[0].failures == 2  # gated by the outcomes


def test_the_failure_hints_and_distill_arms_train_in_a_run_and_record_what_they_did(
    tiny_model, tmp_path
):
    out = tmp_path / "hints"
    _train(tiny_model, out, "--arm", "guide+shaping+failure-hints", "--rounds", "1")
    chats, scalars = _chats(out), _scalars(out)
    assert json.loads((out / "config.json").read_text())["arm"] == "guide+shaping+failure-hints"
    groups = [chats[i : i + 4] for i in range(0, len(chats), 4)]
    failed = [g for g in groups if g[0]["hint_level"] or not any(c["success"] for c in g)]
    assert scalars["feedback/replayed_groups"] == [float(len(failed))]
    assert scalars["llm/replay_episodes"][0] >= 4 * len(failed)
    for chat in chats:  # hints never in a prompt trained on
        assert chat["hints"] == 0 or chat["hint_level"]
        assert chat["hint_level"] or not any("Hint:" in m["content"] for m in chat["messages"])

    out = tmp_path / "distill"
    _train(
        tiny_model, out, "--arm", "guide+shaping+distill", "--rounds", "1", "--distill-coef", "2"
    )
    chats, scalars = _chats(out), _scalars(out)
    assert json.loads((out / "config.json").read_text())["distill_coef"] == 2.0
    assert not any("Hint:" in m["content"] for c in chats for m in c["messages"])
    if any(not c["success"] for c in chats):
        assert scalars["feedback/distilled_choices"][0] > 0
        assert scalars["train/distill/divergence"][0] > 0


def test_distill_is_for_train_llm_only_and_every_arm_parses_as_compare_does():
    from feedbackgym.config import arm_suffixes
    from feedbackgym.schedules import ARMS, LLM_ARMS
    from feedbackgym.training.common.run_settings import RunConfig

    with pytest.raises(ConfigError, match="train-llm"):
        RunConfig(ENV, "guide+distill", seed=0, total_steps=100, out_dir="unused")
    assert "guide+distill" in LLM_ARMS and "guide+distill" not in ARMS
    assert "guide+critic-hints" in ARMS and "guide+critic-hints" not in LLM_ARMS
    assert arm_suffixes("guide-then-review+shaping+reexplore+failure-hints+distill") == (
        "+reexplore",
        "+failure-hints",
        "+distill",
    )
    with pytest.raises(ConfigError, match="unknown arm"):
        arm_suffixes("sparse+distill")  # nothing to distil


def test_validations_are_greedy_on_sixteen_held_out_seeds_and_a_fall_rolls_back(chat, tmp_path):
    config, controller, _ = _stack("guide", tmp_path, rollback_drop=0.5, max_turns=4)
    assert (config.eval_episodes, config.eval_temperature) == (16, 0.0)
    config.eval_episodes = 3
    eval_env = make(ENV, controller.config, **config.env_arguments())
    controller.attach(eval_env)
    book = AdapterRounds(config, controller, eval_env, chat)
    assert len(book.seeds) == 3
    first = [book._play(controller.state, None) for _ in range(2)]
    assert first[0] == first[1]  # greedy: the same play twice, no generator needed

    lora_b = [p for n, p in chat.model.named_parameters() if "lora_B" in n]
    with torch.no_grad():
        for p in lora_b:
            p.fill_(0.01)
    good = Evaluation(1.0, 1.0, 1.0, 3.0)
    book._add_version(0, good)  # version 1, promoted
    with torch.no_grad():
        for p in lora_b:
            p.fill_(0.0)
    book.checkpoints.mkdir(parents=True)
    torch.save({"adapter": adapter_state(chat.model)}, book.checkpoint(1))
    book._add_version(1, Evaluation(0.0, 0.2, 0.0, 4.0))  # version 2: 0.8 below version 1

    assert all(float(p.abs().max()) == pytest.approx(0.01) for p in lora_b)
    saved = torch.load(book.checkpoint(1), weights_only=True)["adapter"]
    assert all(
        float(v.abs().max()) == pytest.approx(0.01) for k, v in saved.items() if "lora_B" in k
    )
    registry = json.loads((book.run_dir / "versions/registry.json").read_text())
    assert registry["current"] == 1 and registry["history"][-1]["event"] == "rollback"
    assert book.rollbacks == 1
    book._add_version(2, Evaluation(0.0, 0.6, 0.0, 4.0))  # within the drop: no rollback
    assert book.rollbacks == 1
    eval_env.close()


def _trainer(chat, tmp_path, episodes, **kwargs):
    """TRL's trainer (ours) whose rollout returns ``episodes``: dicts of its fields and extras."""
    from datasets import Dataset

    from feedbackgym.training.llm.chosen_token_grpo import ChosenTokenGRPOTrainer
    from feedbackgym.training.llm.grpo_rollout import episode_return_reward
    from feedbackgym.training.llm.run_llm import _grpo_args

    config = LLMRunConfig(
        ENV, "guide", seed=0, total_rounds=1, out_dir=str(tmp_path), groups=1, group_size=2
    )

    def rollout(prompts, trainer):
        return {key: [e[key] for e in episodes] for key in episodes[0]}

    return ChosenTokenGRPOTrainer(
        model=chat.model,
        reward_funcs=episode_return_reward,
        args=_grpo_args(config, 0, CPU),
        train_dataset=Dataset.from_dict({"prompt": [seed_prompt(0)]}),
        processing_class=chat.tokenizer,
        rollout_func=rollout,
        **kwargs,
    )


def _rows():
    return [{"prompt": seed_prompt(0)} for _ in range(2)]  # TRL writes the rollout's extras in


def _episodes(chat, **extras):
    prompt = chat.encode(chat.turns.opening_text(chat.bos, "Play the incident.", "Alerts: lb"))
    completions = [chat.encode("inspect metrics lb"), chat.encode("wait")]
    return [
        {
            "prompt_ids": prompt,
            "completion_ids": c,
            "logprobs": [0.0] * len(c),
            "env_mask": [1] * len(c),
            "episode_return": float(r),
            **{key: value[i] for key, value in extras.items()},
        }
        for i, (c, r) in enumerate(zip(completions, (1.0, 0.0), strict=True))
    ]


def test_token_weights_scale_each_tokens_advantage_in_trls_batch(chat, tmp_path):
    plain = _trainer(chat, tmp_path, _episodes(chat))
    advantages = plain._generate_and_score_completions(_rows())["advantages"]
    assert advantages.dim() == 1 and float(advantages.abs().sum()) > 0
    weights = [[0.5, 2.0, 1.0], [0.0]]
    out = _trainer(chat, tmp_path, _episodes(chat, token_weights=weights))
    weighted = out._generate_and_score_completions(_rows())
    width = weighted["completion_ids"].shape[1]
    padded = torch.tensor([w + [1.0] * (width - len(w)) for w in weights])
    assert torch.allclose(weighted["advantages"], advantages[:, None] * padded)


def test_the_loss_adds_the_divergence_from_the_teacher_at_the_taught_choices(chat, tmp_path):
    episodes = _episodes(chat)
    first = episodes[0]["completion_ids"]
    options = [[first[0], first[0] + 1, first[0] + 2], [], []][: len(first)]
    teacher = [[-0.1, -2.5, -3.0], [], []][: len(first)]
    extras = {
        "teacher_options": [options, [[]] * len(episodes[1]["completion_ids"])],
        "teacher_logprobs": [teacher, [[]] * len(episodes[1]["completion_ids"])],
    }
    losses = []
    for coef in (0.0, 3.0):
        trainer = _trainer(chat, tmp_path, _episodes(chat, **extras), distill_coef=coef)
        trainer.current_gradient_accumulation_steps = 1  # what TRL's training step sets
        batch = trainer._generate_and_score_completions(_rows())
        losses.append(float(trainer._compute_loss(chat.model, batch)))
    ids = episodes[0]["prompt_ids"] + first
    full = _full_log_probs(chat, ids)[len(episodes[0]["prompt_ids"]) - 1, options[0]]
    want = option_divergence(
        full[None], torch.tensor([teacher[0]]), torch.ones(1, 3, dtype=torch.bool), 1.0
    )
    assert losses[1] - losses[0] == pytest.approx(3.0 * float(want), rel=1e-3, abs=1e-6)
    assert float(want) > 0
