"""A PEFT LoRA adapter in llama.cpp's GGUF form, so the model server can apply it.

``feedbackgym sft`` (and PEFT's ``save_pretrained`` generally) writes an adapter
as ``adapter_config.json`` and ``adapter_model.safetensors`` with Hugging Face
tensor names (``base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight``).
llama.cpp loads a LoRA adapter only as a GGUF file of type ``adapter`` whose
tensors carry the base model's GGUF names with ``.lora_a`` / ``.lora_b``
suffixes (``blk.0.attn_q.weight.lora_a``) and whose ``adapter.lora.alpha`` sets
the scale (alpha / rank, as in PEFT). :func:`export_lora_gguf` writes that file
and checks every tensor against the base model's GGUF, so a mismatched adapter
fails here, naming the tensor, rather than inside the server.

Only plain LoRA on linear layers is exported: DoRA, per-module rank or alpha
patterns, bias training and fully trained modules (``modules_to_save``) have no
place in llama.cpp's adapter format and are refused. The file is written next
to its target and renamed into place, so a reader never sees half of it.

Example:
    >>> export_lora_gguf("runs/sft/adapter", "runs/sft/adapter/adapter.gguf")  # doctest: +SKIP
    PosixPath('runs/sft/adapter/adapter.gguf')
    >>> gguf_tensor_name("base_model.model.model.layers.3.mlp.down_proj.lora_B.weight", 18)
    ('blk.3.ffn_down.weight', 'lora_b')
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from feedbackgym.errors import ConfigError, DependencyNotInstalled

__all__ = ["export_lora_gguf", "gguf_tensor_name"]

_PEFT_PREFIX = "base_model.model."
_HALVES = {"lora_A": "lora_a", "lora_B": "lora_b"}
_UNSUPPORTED = {
    "use_dora": "DoRA",
    "rank_pattern": "a per-module rank",
    "alpha_pattern": "a per-module alpha",
    "modules_to_save": "fully trained modules",
}


def _gguf() -> Any:
    try:
        import gguf
    except ImportError as error:
        raise DependencyNotInstalled(
            "exporting a LoRA adapter needs gguf: pip install 'feedbackgym[llm-train]'"
        ) from error
    return gguf


def gguf_tensor_name(peft_name: str, blocks: int, arch: str = "gemma3") -> tuple[str, str]:
    """The base model's GGUF tensor and the half (``lora_a``/``lora_b``) of a PEFT tensor.

    Args:
        peft_name: A tensor's name in ``adapter_model.safetensors``.
        blocks: The base model's number of transformer blocks.
        arch: The base model's GGUF architecture (``general.architecture``).

    Raises:
        ConfigError: The name is no LoRA half, or the base model has no such tensor.

    Example:
        >>> gguf_tensor_name("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", 18)
        ('blk.0.attn_q.weight', 'lora_a')
        >>> gguf_tensor_name("base_model.model.model.layers.0.mlp.up_proj.bias", 18)
        Traceback (most recent call last):
        ...
        feedbackgym.errors.ConfigError: adapter tensor ...up_proj.bias: not a LoRA A or B matrix ...
    """
    module, _, rest = peft_name.removeprefix(_PEFT_PREFIX).rpartition(".lora_")
    half = _HALVES.get("lora_" + rest.removesuffix(".weight")) if module else None
    if half is None or not rest.endswith(".weight"):
        raise ConfigError(
            f"adapter tensor {peft_name}: not a LoRA A or B matrix "
            "(only plain LoRA exports to GGUF)"
        )
    name = _tensor_names(arch, blocks).get_name(module + ".weight", try_suffixes=(".weight",))
    if name is None:
        raise ConfigError(
            f"adapter tensor {peft_name}: the {arch} model has no tensor for {module}"
        )
    return name, half


@functools.lru_cache(maxsize=4)
def _tensor_names(arch: str, blocks: int) -> Any:
    """The map from Hugging Face to GGUF tensor names for a model (gguf's; built once: ~4 ms)."""
    gguf = _gguf()
    try:
        architecture = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch)
    except StopIteration:
        raise ConfigError(f"base model architecture {arch!r}: unknown to gguf") from None
    return gguf.get_tensor_name_map(architecture, blocks)


def _adapter_config(source: Path) -> dict[str, Any]:
    path = source / "adapter_config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ConfigError(f"adapter {source}: cannot read adapter_config.json: {error}") from error
    if config.get("peft_type", "LORA") != "LORA":
        raise ConfigError(f"adapter {source}: a {config['peft_type']} adapter, not LoRA")
    for key, what in _UNSUPPORTED.items():
        if config.get(key):
            raise ConfigError(f"adapter {source}: {what} ({key}) does not export to GGUF")
    if config.get("bias", "none") != "none":
        bias = config["bias"]
        raise ConfigError(f"adapter {source}: trained biases (bias={bias!r}) do not export")
    if not isinstance(config.get("lora_alpha"), (int, float)):
        raise ConfigError(f"adapter {source}: adapter_config.json has no numeric lora_alpha")
    return config


def _base_shapes(base: Path) -> tuple[str, int, dict[str, tuple[int, ...]]]:
    """The base GGUF's architecture, block count and tensor shapes (numpy order).

    Read once per file version (its metadata holds the whole vocabulary: seconds to parse).
    """
    stat = base.stat()
    return _read_base_shapes(str(base), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _read_base_shapes(
    base: str, mtime_ns: int, size: int
) -> tuple[str, int, dict[str, tuple[int, ...]]]:
    gguf = _gguf()
    try:
        reader = gguf.GGUFReader(base)
    except (OSError, ValueError) as error:
        raise ConfigError(f"base model {base}: cannot read it as GGUF: {error}") from error

    def field(key: str) -> Any:
        if key not in reader.fields:
            raise ConfigError(f"base model {base}: no {key} in its metadata")
        return reader.fields[key].contents()

    arch = field("general.architecture")
    shapes = {t.name: tuple(int(n) for n in reversed(t.shape)) for t in reader.tensors}
    return arch, int(field(f"{arch}.block_count")), shapes


def export_lora_gguf(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    base: str | os.PathLike[str] | None = None,
) -> Path:
    """Writes the PEFT adapter folder ``source`` as llama.cpp's GGUF LoRA at ``target``.

    Args:
        source: A PEFT adapter folder (``adapter_config.json``, ``adapter_model.safetensors``).
        target: The ``.gguf`` file to write (replaced whole if it exists).
        base: The base model's GGUF file the adapter was trained on (default: the
            packaged model); its architecture names the tensors and its shapes check them.

    Returns:
        ``target``.

    Raises:
        ConfigError: The adapter is not plain LoRA, a tensor has no counterpart in
            the base model or the wrong shape, or a LoRA half is missing.
        DependencyNotInstalled: gguf, safetensors or torch is not installed.
    """
    from feedbackgym.language.model_file import model_file

    source, target = Path(source), Path(target)
    config = _adapter_config(source)
    try:
        from safetensors.torch import load_file
    except ImportError as error:
        raise DependencyNotInstalled(
            "exporting a LoRA adapter needs safetensors and torch: "
            "pip install 'feedbackgym[llm-train]'"
        ) from error
    base_path = model_file(base).path
    arch, blocks, shapes = _base_shapes(base_path)
    pairs: dict[str, dict[str, Any]] = {}
    for peft_name, tensor in load_file(source / "adapter_model.safetensors").items():
        name, half = gguf_tensor_name(peft_name, blocks, arch)
        pairs.setdefault(name, {})[half] = tensor.float().numpy()
    if not pairs:
        raise ConfigError(f"adapter {source}: adapter_model.safetensors holds no tensors")
    for name, pair in pairs.items():
        _check(source, name, pair, shapes)
    gguf = _gguf()
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(handle)
    try:
        writer = gguf.GGUFWriter(partial, arch)
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(config["lora_alpha"]))
        for name in sorted(pairs):
            writer.add_tensor(f"{name}.lora_a", pairs[name]["lora_a"])
            writer.add_tensor(f"{name}.lora_b", pairs[name]["lora_b"])
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def _check(
    source: Path, name: str, pair: dict[str, Any], shapes: dict[str, tuple[int, ...]]
) -> None:
    """Raises unless A (rank x in) and B (out x rank) fit the base tensor (out x in)."""
    missing = {"lora_a", "lora_b"} - pair.keys()
    if missing:
        raise ConfigError(f"adapter {source}: {name} has no {' or '.join(sorted(missing))}")
    if name not in shapes:
        raise ConfigError(f"adapter {source}: the base model has no tensor {name}")
    a, b = pair["lora_a"].shape, pair["lora_b"].shape
    out, inner = shapes[name]
    if len(a) != 2 or len(b) != 2 or a[0] != b[1] or a[1] != inner or b[0] != out:
        raise ConfigError(
            f"adapter {source}: {name} is {out}x{inner} in the base model, but the adapter's "
            f"A is {'x'.join(map(str, a))} and B {'x'.join(map(str, b))} "
            "(was it trained on another model?)"
        )
