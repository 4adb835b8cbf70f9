"""The supervised warm-up: a tiny Gemma 3 (built in the test) on expert episodes, as the agent sees.

The packaged model takes a minute to load and a minute a step on 2 cores: these
runs use a model of the same architecture with random weights and a word-level
vocabulary (``tests/training/llm/tiny_lm.py``). The real model's warm-up, served by
llama.cpp with its adapter, is ``tests/language/test_packaged_model.py``'s.
"""

import json

import pytest

pytest.importorskip("peft")
torch = pytest.importorskip("torch")

from feedbackgym.chat.turns import render_chat  # noqa: E402
from feedbackgym.cli import main  # noqa: E402
from feedbackgym.errors import ConfigError  # noqa: E402
from feedbackgym.training.llm.sft_data import (  # noqa: E402
    IGNORE,
    ExpertReplies,
    expert_chats,
    read_chats,
    step_prompts,
    training_sequences,
)
from tests.training.llm.tiny_lm import save_tiny_model  # noqa: E402

ENV = "feedbackgym/OpsIncidentEasy-v0"
STEPS = {"max_episode_steps": 8}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-gemma"), init_range=0.2)


@pytest.fixture(scope="module")
def chat(tiny_model):
    from feedbackgym.training.llm.causal_lm import load_chat_model

    torch.manual_seed(0)
    return load_chat_model(str(tiny_model))


@pytest.fixture(scope="module")
def window(chat):
    from feedbackgym.training.llm.sft import SFTConfig, sft_window

    return sft_window(SFTConfig(ENV, "unused", context=1024), chat.tokenizer)


class _RecordedExpert(ExpertReplies):
    """The expert, keeping every prompt the agent loop sent it."""

    prompts = []

    def reply(self, messages, **kwargs):
        self.prompts.append([dict(m) for m in messages])
        return super().reply(messages, **kwargs)


def test_each_steps_prompt_is_the_one_the_agent_sent_and_its_tokens_are_the_sequences(
    chat, window, monkeypatch
):
    import feedbackgym.training.llm.sft_data as sft_data

    monkeypatch.setattr(sft_data, "ExpertReplies", _RecordedExpert)
    _RecordedExpert.prompts = []
    chats = list(expert_chats(ENV, 3, window=window, dropout=0.0, env_kwargs=STEPS))
    sent = _RecordedExpert.prompts
    replayed = [prompt for messages in chats for prompt, _ in step_prompts(messages, window)]
    assert replayed == sent and len(sent) == sum((len(m) - 1) // 2 for m in chats)
    assert window.trims > 0  # the window dropped steps: the prompts are not the whole chat
    sequences = training_sequences(chats, chat.encode, window=window)
    assert len(sequences) > len(chats)  # a sequence starts where the window dropped steps
    for messages in chats:  # each reply's tokens follow exactly its prompt's, in a sequence
        for prompt, reply in step_prompts(messages, window):
            prompt_ids = chat.encode(render_chat(prompt))
            answer = chat.encode(reply)
            assert any(
                s.input_ids[: len(prompt_ids)] == prompt_ids
                and s.labels[len(prompt_ids) : len(prompt_ids) + len(answer)] == answer
                for s in sequences
            ), reply


def test_only_the_replies_action_tokens_carry_loss(chat, window):
    chats = list(expert_chats(ENV, 2, window=window, env_kwargs=STEPS))
    sequences = training_sequences(chats, chat.encode, window=window)
    replies = [m["content"] for messages in chats for m in messages if m["role"] == "assistant"]
    labelled = []
    for sequence in sequences:
        span = []
        for token, label in zip(sequence.input_ids, sequence.labels, strict=True):
            assert label in (IGNORE, token)
            if label != IGNORE:
                span.append(label)
            elif span:
                labelled.append(span)
                span = []
        labelled += [span] if span else []
    assert labelled == [chat.encode(reply) for reply in replies]
    assert sum(s.label_tokens for s in sequences) < sum(len(s.input_ids) for s in sequences) / 10


def test_the_template_renders_as_llama_cpp_pythons_formatter_does(window):
    llama_chat_format = pytest.importorskip("llama_cpp.llama_chat_format")
    from importlib import resources

    text = resources.files("feedbackgym.chat").joinpath("prompts/gemma.jinja").read_text()
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=text, eos_token="<end_of_turn>", bos_token="<bos>"
    )
    messages = next(expert_chats(ENV, 1, env_kwargs=STEPS))
    for prompt, _ in step_prompts(messages, window):
        assert formatter(messages=prompt).prompt == render_chat(prompt)


def test_hint_dropout_withholds_hints_from_the_prompts():
    def hinted(dropout):
        chats = expert_chats(ENV, 6, dropout=dropout, env_kwargs=STEPS)
        return [any("Hint" in m["content"] for m in messages[1:]) for messages in chats]

    assert all(hinted(0.0)) and not any(hinted(1.0))
    assert 0 < sum(hinted(0.5)) < 6  # the arms' dropout, by episode


def test_the_loss_falls_on_a_fixed_batch(chat, window):
    from feedbackgym.training.llm.sft import batch_loss

    sequences = training_sequences(
        list(expert_chats(ENV, 2, env_kwargs=STEPS)), chat.encode, window=window
    )[:2]
    parameters = [p for p in chat.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=1e-2)
    losses = []
    for _ in range(12):
        loss, tokens = batch_loss(chat, sequences)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert tokens == sum(len(s.input_ids) for s in sequences)
    assert losses[-1] < 0.5 * losses[0], losses


def test_the_loss_is_the_models_own_over_the_labels_with_logits_only_where_they_count(chat, window):
    from feedbackgym.training.llm.sft import batch_loss

    (sequence,) = training_sequences(
        list(expert_chats(ENV, 1, env_kwargs={"max_episode_steps": 3})), chat.encode, window=window
    )
    with torch.no_grad():
        loss, _ = batch_loss(chat, [sequence])
        full = chat.model(
            input_ids=torch.tensor([sequence.input_ids]), labels=torch.tensor([sequence.labels])
        ).loss
    assert loss.item() == pytest.approx(full.item(), rel=1e-5)


def _sft(model, out, *more):
    args = ["sft", "--env", ENV, "--model", str(model), "--out", str(out)]
    args += [] if "--chats" in more else ["--demos", "2"]
    args += ["--epochs", "2", "--batch", "1", "--learning-rate", "1e-2", "--device", "cpu"]
    args += ["--cpu-threads", "1", "--save-every", "1", "--kwarg", "max_episode_steps=8"]
    assert main([*args, *more]) == 0


def _adapter(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter" / "adapter_model.safetensors"))


def test_the_command_trains_the_adapter_writes_the_run_and_resumes_to_the_same_weights(
    tiny_model, tmp_path
):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _sft(tiny_model, tmp_path / "straight", "--max-steps", "4")
    weights = _adapter(tmp_path / "straight")
    lora_b = [v for k, v in weights.items() if "lora_B" in k]
    assert lora_b and all(v.abs().sum() > 0 for v in lora_b)  # LoRA's B starts at zero
    state = json.loads((tmp_path / "straight" / "state.json").read_text())
    assert state["step"] == 3 and state["finished"] and state["tokens"] > 0
    (tb,) = (tmp_path / "straight" / "tb").iterdir()
    events = EventAccumulator(str(tb))
    events.Reload()
    assert {"sft/loss", "sft/tokens_per_s", "sft/label_tokens"} <= set(events.Tags()["scalars"])
    assert len(events.Scalars("sft/loss")) == 4

    _sft(tiny_model, tmp_path / "resumed", "--max-steps", "2")
    _sft(tiny_model, tmp_path / "resumed", "--max-steps", "4", "--resume")
    resumed = _adapter(tmp_path / "resumed")
    assert resumed.keys() == weights.keys()
    for key, value in weights.items():
        assert torch.allclose(resumed[key], value, atol=1e-6), key
    assert sorted(p.name for p in (tmp_path / "resumed" / "checkpoints").iterdir()) == [
        "round_0001.pt",
        "round_0002.pt",
        "round_0003.pt",
    ]


def test_transcripts_train_too_and_a_resume_refuses_other_settings(tiny_model, tmp_path):
    chats = tmp_path / "chats.jsonl"
    with chats.open("w") as file:
        for messages in expert_chats(ENV, 1, env_kwargs=STEPS):
            file.write(json.dumps({"seed": 0, "messages": messages}) + "\n")
    _sft(tiny_model, tmp_path / "run", "--chats", str(chats), "--max-steps", "1")
    assert read_chats(tmp_path / "run" / "chats.jsonl") == read_chats(chats)
    assert main(["sft", "--env", ENV, "--model", str(tiny_model), "--out", str(tmp_path / "run"),
                 "--chats", str(chats), "--learning-rate", "1e-3", "--resume"]) == 2  # fmt: skip


def test_a_file_that_is_not_transcripts_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "x"}]}) + "\n")
    with pytest.raises(ConfigError, match="bad.jsonl:1: messages must be system"):
        read_chats(bad)
    bad.write_text("not json\n")
    with pytest.raises(ConfigError, match="not an export-chat record"):
        read_chats(bad)


def test_expert_seeds_never_reach_the_held_out_ones():
    with pytest.raises(ValueError, match="10000000 is one"):
        next(expert_chats(ENV, 2, seed=9_999_999))


def test_the_server_the_warm_up_and_the_trainer_render_one_chat_alike():
    """Gemma's turns are written once (gemma.jinja): the server and the warm-up render it,
    GRPO takes its turn markup from it; one episode's chat comes out the same text."""
    from feedbackgym.chat.turns import TurnFormat

    turns = TurnFormat.load()
    messages = next(expert_chats(ENV, 1, env_kwargs=STEPS))
    system, users = messages[0]["content"], messages[1::2]
    replies = [m["content"] for m in messages[2::2]]
    trainer = turns.opening_text("<bos>", system.strip(), users[0]["content"].strip())
    for reply, user in zip(replies, users[1:], strict=False):
        trainer += reply + turns.stop + turns.next_text(user["content"].strip())
    assert trainer == render_chat(messages[: 2 * len(users)])
