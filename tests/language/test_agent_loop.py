"""The LLM agent loop and export-chat, against a real chat server process on loopback.

The model is ``feedbackgym.language.stand_in_server``: a STAND-IN for fault injection that
answers the agent with the env's expert action and the feedback prompts with the built-in
generators' answers (not a language model); ``stand-in:bad-json`` answers text that names no
action, ``stand-in:error`` HTTP 500, ``stand-in:slow=S`` after S seconds. The packaged model
plays in ``test_packaged_model.py``.
"""

import json
import subprocess
import sys

import pytest

import feedbackgym  # noqa: F401
from feedbackgym.errors import FeedbackGymError
from feedbackgym.language.agent_loop import (
    ModelUnavailable,
    ReviewMemory,
    prompt_budget,
    run_agent,
)
from feedbackgym.language.chat_export import export_chat
from feedbackgym.language.prompt_window import TURN_TOKENS

pytest.importorskip("openai")
pytest.importorskip("h5py")
from feedbackgym.chat import ChatClient  # noqa: E402
from feedbackgym.datasets import TrajectoryStore  # noqa: E402
from feedbackgym.language.stand_in_server import stand_in_server  # noqa: E402

ENV = "feedbackgym/OpsIncidentEasy-v0"


@pytest.fixture(scope="module")
def url():
    with stand_in_server() as base_url:
        yield base_url


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "feedbackgym", *args], capture_output=True, text=True, timeout=120
    )


def test_the_agent_command_records_episodes_and_export_chat_writes_them(url, tmp_path):
    store, chats = tmp_path / "store", tmp_path / "chats.jsonl"
    run = _cli(
        "agent",
        "--env",
        ENV,
        "--base-url",
        url,
        "--model",
        "stand-in",
        "--episodes",
        "2",
        "--out",
        str(store),
        "--feedback",
        "llm",
        "--memory",
        "1",
    )
    assert run.returncode == 0, run.stderr
    assert "2 episodes, 100.0% success" in run.stdout and "fallbacks 0" in run.stdout
    metas = TrajectoryStore(store).episodes()
    assert [m.round for m in metas] == ["agent", "agent"]
    assert "LLMReviewer" in metas[0].env_spec  # the recorded spec names the generators

    export = _cli("datasets", "export-chat", str(store), "--out", str(chats), "--memory", "1")
    assert export.returncode == 0, export.stderr
    first, second = [json.loads(line) for line in chats.read_text().splitlines()]
    assert first["success"] and first["review"]["credit"] == []  # the LLM reviewer's review
    system, user, assistant = first["messages"][:3]
    assert system["role"] == "system" and "- declare resolved" in system["content"]
    assert "Reviews of your earlier attempts" not in system["content"]
    assert user["content"].startswith("Goal:") and "\n\nHint: first" in user["content"]
    assert assistant == {"role": "assistant", "content": "inspect metrics db_primary"}
    assert len(first["messages"]) == 1 + 2 * first["length"]
    assert first["review"]["summary"] in second["messages"][0]["content"]  # the memory


def test_export_gives_the_chats_the_loop_sent(url, tmp_path):
    client = ChatClient(url, "stand-in")
    results = list(run_agent(ENV, client, episodes=3, seed=5, store=tmp_path, memory=2))
    records = [json.loads(line) for line in _lines(tmp_path)]
    assert [r["messages"] for r in records] == [r.messages for r in results]
    assert results[2].messages[0]["content"].count("- Review of your last attempt") == 2


def _lines(store):
    out = store / "chats.jsonl"
    assert export_chat(store, out, memory=2) == 3
    return out.read_text().splitlines()


def test_replies_that_name_no_action_are_asked_again_then_fall_back(url):
    client = ChatClient(url, "stand-in:bad-json")
    (result,) = run_agent(ENV, client, episodes=1, env_kwargs={"max_episode_steps": 3}, retries=1)
    assert (result.length, result.invalid_replies, result.fallbacks) == (3, 6, 3)
    assert {m["content"] for m in result.messages[2::2]} == {"wait"}


def test_memory_is_bounded():
    memory = ReviewMemory(1)
    memory.add({"text": "old"})
    memory.add({})
    memory.add({"text": "new"})
    assert list(memory.texts) == ["new"]


def test_an_env_without_text_is_refused():
    with pytest.raises(FeedbackGymError, match="CartPole-v1 cannot be made for an LLM agent"):
        next(run_agent("CartPole-v1", ChatClient("http://127.0.0.1:1/v1", "m"), episodes=1))


@pytest.mark.parametrize(
    "args, message",
    [
        (
            (
                "agent",
                "--env",
                "feedbackgym/Nope-v0",
                "--base-url",
                "http://127.0.0.1:1/v1",
                "--model",
                "m",
            ),
            "unknown env id",
        ),
        (
            (
                "agent",
                "--env",
                ENV,
                "--base-url",
                "http://127.0.0.1:1/v1",
                "--model",
                "m",
                "--timeout",
                "2",
            ),
            "http://127.0.0.1:1/v1: APIConnectionError",
        ),
        (("datasets", "export-chat", "no/such/store"), "no store at no/such/store"),
    ],
)
def test_cli_mistakes_are_one_line_errors(args, message):
    run = _cli(*args)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and message in run.stderr, run.stderr


# --- faults: a server that errors, hangs or answers garbage ---------------------------------


@pytest.mark.parametrize(
    "model, timeout, cause",
    [("stand-in:error", 10, "HTTP 500"), ("stand-in:slow=3", 0.3, "no reply within 0.3 s")],
)
def test_a_model_that_stops_answering_cuts_the_episode_short_and_stops_the_run(
    url, tmp_path, model, timeout, cause
):
    client = ChatClient(url, model, timeout_s=timeout)
    results = run_agent(ENV, client, episodes=3, store=tmp_path, retries=1, max_errors=3)
    first = next(results)  # step 0: two failed calls, step 1: the third, then truncated
    assert (first.length, first.model_errors, first.fallbacks) == (2, 3, 2)
    assert first.stopped.startswith("stopped at step 1: 3 calls in a row failed") and cause in (
        first.stopped
    )
    with pytest.raises(ModelUnavailable, match="cut short after 2 steps and recorded"):
        next(results)
    store = TrajectoryStore(tmp_path)
    (meta,) = store.episodes()  # the cut episode is recorded, truncated
    (episode,) = store.iter_episodes()
    assert meta.length == 2 and not meta.success
    assert list(episode.truncations) == [False, True] and not any(episode.terminations)


def test_the_agent_command_ends_in_one_line_when_the_model_stops_answering(url, tmp_path):
    run = _cli(
        "agent", "--env", ENV, "--base-url", url, "--model", "stand-in:error",
        "--episodes", "3", "--out", str(tmp_path), "--max-errors", "2",
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert run.stdout.splitlines()[0] == (
        f"model: stand-in:error at {url}; arm guide+review, hints at the phase level"
    )
    assert "model errors 2 fallbacks 1" in run.stdout
    assert run.stderr.count("\n") == 1 and "the model stopped answering" in run.stderr
    assert "1 episodes recorded in" in run.stderr


def test_garbage_replies_are_counted_misses_and_the_episode_goes_on(url):
    client = ChatClient(url, "stand-in:off-schema", constrain="json")
    (result,) = run_agent(ENV, client, episodes=1, env_kwargs={"max_episode_steps": 4}, retries=0)
    assert (result.length, result.invalid_replies, result.fallbacks, result.stopped) == (
        4,
        4,
        4,
        "",
    )


def test_constrained_replies_reach_a_server_that_ignores_the_fields(url):
    for constrain in ("grammar", "json", "none"):
        client = ChatClient(url, "stand-in", constrain=constrain)
        (result,) = run_agent(ENV, client, episodes=1, context=8192)
        assert result.success and result.invalid_replies == result.fallbacks == 0


def test_a_long_episode_never_outgrows_the_context(url):
    client = ChatClient(url, "stand-in:bad-json")  # never acts: the episode runs until the SLO
    sizes = []
    original = client.reply

    def reply(messages, **kwargs):
        sizes.append(sum(len(m["content"].encode()) + TURN_TOKENS for m in messages))
        return original(messages, **kwargs)

    client.reply = reply
    (result,) = run_agent(ENV, client, episodes=1, retries=0, context=4096, memory=0)
    assert result.length > 60 and len(result.messages) == 1 + 2 * result.length  # all kept
    assert max(sizes) <= prompt_budget(4096) and len(set(sizes)) > 10


def test_an_adapter_that_is_neither_gguf_nor_peft_is_a_clear_error(tmp_path):
    from feedbackgym.cli import main
    from feedbackgym.errors import ConfigError
    from feedbackgym.language.model_server import served_adapter

    with pytest.raises(ConfigError, match="neither a .gguf LoRA file nor a PEFT adapter folder"):
        served_adapter(tmp_path)
    with pytest.raises(ConfigError, match="no such GGUF file"):
        served_adapter(tmp_path / "missing.gguf")
    gguf = tmp_path / "lora.gguf"
    gguf.write_bytes(b"GGUF")
    assert served_adapter(gguf) == gguf  # taken as it is
    args = ["agent", "--env", "feedbackgym/OpsIncidentEasy-v0", "--adapter", str(gguf)]
    assert main([*args, "--base-url", "http://127.0.0.1:9/v1"]) == 2  # a local server's option


def test_delta_turns_make_each_prompt_extend_the_one_before(url):
    client = ChatClient(url, "stand-in")
    prompts = []
    original = client.reply

    def reply(messages, **kwargs):
        prompts.append([dict(m) for m in messages])
        return original(messages, **kwargs)

    client.reply = reply
    (result,) = run_agent(ENV, client, episodes=1, context=8192)  # counted in bytes here
    assert result.success and len(prompts) == result.length > 3
    for before, after in zip(prompts, prompts[1:], strict=False):
        assert after[: len(before)] == before  # a server's prefix cache holds the whole chat
    users = [m["content"] for m in result.messages if m["role"] == "user"]
    assert users[0].startswith("Goal:") and not any("Goal:" in u for u in users[1:])


def test_full_turns_repeat_each_observation_and_export_rebuilds_them(url, tmp_path):
    client = ChatClient(url, "stand-in")
    results = list(run_agent(ENV, client, episodes=2, store=tmp_path, turns="full"))
    users = [m["content"] for m in results[0].messages if m["role"] == "user"]
    assert all(u.startswith("Goal:") for u in users)
    out = tmp_path / "chats.jsonl"
    export_chat(tmp_path, out, turns="full")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["messages"] for r in records] == [r.messages for r in results]
    with pytest.raises(FeedbackGymError, match="turns must be one of delta, full"):
        next(run_agent(ENV, client, episodes=1, turns="whole"))
