"""Real PEFT LoRA folders for Gemma 3 270M with seeded random weights, for llama.cpp to load.

``adapter_config.json`` and safetensors weights in PEFT's names and shapes for
the packaged model: what matters is that llama.cpp loads them and that they
change what it writes (each seed and scale its own change).
"""

import json

PREFIX = "base_model.model.model.layers"


def write_adapter(
    folder, *, seed=0, scale=0.05, layers=range(18), config=None, drop=None, shape=None
):
    """Writes a PEFT LoRA folder on down_proj and q_proj; returns it.

    ``drop`` leaves a tensor out, ``shape`` gives layer 0's down_proj A that shape.
    """
    import torch
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for i in layers:
        for module, inner, out in (("mlp.down_proj", 2048, 640), ("self_attn.q_proj", 640, 1024)):
            name = f"{PREFIX}.{i}.{module}"
            tensors[f"{name}.lora_A.weight"] = torch.randn(8, inner, generator=generator) * scale
            tensors[f"{name}.lora_B.weight"] = torch.randn(out, 8, generator=generator) * scale
    if shape is not None:
        tensors[f"{PREFIX}.0.mlp.down_proj.lora_A.weight"] = torch.zeros(shape)
    tensors.pop(drop, None)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, folder / "adapter_model.safetensors")
    settings = {"peft_type": "LORA", "r": 8, "lora_alpha": 16, "bias": "none"}
    (folder / "adapter_config.json").write_text(json.dumps({**settings, **(config or {})}))
    return folder
