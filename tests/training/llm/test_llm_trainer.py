"""The LLM trainer: GRPO rounds of a tiny Gemma 3 (built in the test), the run directory, resume.

The packaged model takes a minute to load and minutes a round on 2 cores, too
slow for the suite: these runs use a model of the same architecture with
random weights and a word-level vocabulary, nudged towards the expert's
actions so that a group's returns differ (GRPO learns nothing from a group
whose episodes all return the same).
"""

import glob
import json

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")
torch = pytest.importorskip("torch")

from feedbackgym.cli import main  # noqa: E402
from feedbackgym.envs.ops.actions import ACTION_MEANINGS  # noqa: E402

ENV = "feedbackgym/OpsIncidentEasy-v0"


def _train(tiny_model, out, *more):
    args = [
        "train-llm",
        "--env",
        ENV,
        "--rounds",
        "2",
        "--model",
        str(tiny_model),
        "--out",
        str(out),
        "--groups",
        "2",
        "--group-size",
        "4",
        "--seed-pool",
        "2",
        "--max-turns",
        "8",
        "--eval-every",
        "1",
        "--eval-episodes",
        "2",
        "--learning-rate",
        "1e-3",
        "--device",
        "cpu",
        "--cpu-threads",
        "1",
        "--switch-at",
        "0.5",
        "--fade",
        "0",
        "--fixed-switch",
        "--dropout",
        "0",
        *more,
    ]
    assert main(args) == 0


@pytest.fixture(scope="module")
def run(tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("llm-run")
    _train(tiny_model, out)
    return out


def _chats(out):
    return [json.loads(line) for line in (out / "chats.jsonl").read_text().splitlines()]


def _scalars(out):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (folder,) = glob.glob(str(out / "tb" / "*"))
    events = EventAccumulator(folder)
    events.Reload()
    return {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def _lora_b(path):
    adapter = torch.load(path, weights_only=True)["adapter"]
    return {key: value for key, value in adapter.items() if "lora_B" in key}


def test_two_rounds_train_the_adapter_with_hints_before_the_switch_and_none_after(run):
    first, second = (
        _lora_b(run / "checkpoints/round_0000.pt"),
        _lora_b(run / "checkpoints/round_0001.pt"),
    )
    # A new adapter's B matrices start at zero: a GRPO step with differing returns moves them.
    assert any(value.abs().sum() > 0 for value in second.values())
    assert any(not torch.equal(first[key], second[key]) for key in first) or any(
        value.abs().sum() > 0 for value in first.values()
    )
    chats = _chats(run)
    assert len(chats) == 2 * 8
    guide = [c for c in chats if c["round"] == 0]
    review = [c for c in chats if c["round"] == 1]
    assert {c["phase"] for c in guide} == {"guide"} and {c["phase"] for c in review} == {"review"}
    assert all(c["hints"] >= 1 and "Hint:" in c["messages"][1]["content"] for c in guide)
    assert all(c["hints"] == 0 for c in review)
    assert not any("Hint:" in m["content"] for c in review for m in c["messages"])
    # Every reply names an action: the decoding is held to the action list.
    replies = [m["content"] for c in chats for m in c["messages"] if m["role"] == "assistant"]
    assert replies and set(replies) <= set(ACTION_MEANINGS)


def test_the_run_directory_has_its_tensorboard_tags_curve_versions_and_state(run):
    scalars = _scalars(run)
    for tag in (
        "rollout/ep_rew_mean",
        "rollout/success_rate",
        "train/loss",
        "feedback/phase",
        "feedback/guide_weight",
        "feedback/hint_rate",
        "feedback/hint_reliance",
        "feedback/validation_success",
        "feedback/validation_success_unguided",
        "llm/tokens_per_s",
        "llm/episodes_per_s",
        "llm/train_tokens_per_s",
        "system/rss_mb",
    ):
        assert tag in scalars, tag
    assert scalars["feedback/hint_rate"] == [1.0, 0.0]
    assert scalars["feedback/guide_weight"] == [1.0, 0.0]
    curve = (run / "curve.csv").read_text().splitlines()
    assert curve[0].startswith("step,round,phase,success,success_unguided") and len(curve) == 3
    registry = json.loads((run / "versions/registry.json").read_text())
    assert [v["number"] for v in registry["versions"]] == [1, 2]
    assert (run / "versions/v0002/adapter_config.json").exists()
    state = json.loads((run / "state.json").read_text())
    assert state["round"] == 1 and state["controller"]["round"] == 1
    checkpoint = torch.load(run / "checkpoints/round_0001.pt", weights_only=True)
    assert checkpoint["adapter"] and checkpoint["optimizer"]["state"]


def test_a_resumed_run_goes_on_from_its_checkpoint_with_the_reviews_of_earlier_attempts(
    run, tiny_model
):
    _train(tiny_model, run, "--resume", "--rounds", "3")
    state = json.loads((run / "state.json").read_text())
    assert state["round"] == 2 and state["controller"]["round"] == 2
    chats = _chats(run)
    third = [c for c in chats if c["round"] == 2]
    assert len(third) == 8 and {c["phase"] for c in third} == {"review"}
    # Round 1 (the first after the switch) reviewed seeds 0 and 1; round 2 plays them again,
    # each prompt carrying the review of an earlier attempt.
    assert all(c["memory"] >= 1 for c in third)
    assert all("Reviews of your earlier attempts" in c["messages"][0]["content"] for c in third)
    assert len((run / "curve.csv").read_text().splitlines()) == 4
    assert (run / "checkpoints/round_0002.pt").exists()


def test_a_config_file_edit_applies_at_the_next_round_and_episodes_are_recorded(
    tiny_model, tmp_path
):
    config = tmp_path / "feedback.yaml"
    config.write_text("guide:\n  dropout: 0.0\nschedule:\n  switch_at: 0.9\n  adaptive: null\n")
    edits = []

    def edit(steps):  # after round 0 closes (round 1's state is set by then): from round 2 on
        if not edits:
            edits.append(steps)
            config.write_text(
                "guide:\n  dropout: 1.0\nschedule:\n  switch_at: 0.9\n  adaptive: null\n"
            )

    from feedbackgym.training.llm.llm_settings import LLMRunConfig
    from feedbackgym.training.llm.run_llm import train_llm_run

    settings = LLMRunConfig(
        ENV,
        "guide",
        seed=1,
        total_rounds=3,
        out_dir=str(tmp_path / "run"),
        model=str(tiny_model),
        groups=1,
        group_size=2,
        max_turns=4,
        eval_every=5,
        eval_episodes=1,
        device="cpu",
        cpu_threads=1,
        feedback_file=str(config),
        record=True,
    )
    train_llm_run(settings, progress=edit)
    chats = _chats(tmp_path / "run")
    assert [(c["round"], c["hints"] > 0) for c in chats] == [
        (0, True),
        (0, True),
        (1, True),
        (1, True),
        (2, False),
        (2, False),
    ]
    assert _scalars(tmp_path / "run")["feedback/config_version"] == [1.0, 1.0, 2.0]
    from feedbackgym.datasets import TrajectoryStore

    stored = list(TrajectoryStore(tmp_path / "run" / "trajectories").iter_episodes())
    assert sorted(e.meta.round for e in stored) == ["0", "0", "1", "1", "2", "2"]
