"""The supervised warm-up: LoRA fine-tuning on the standard answers, the prompts the agent's.

:func:`train_sft_run` loads the model and a LoRA adapter
(:func:`~.causal_lm.load_chat_model`, the LLM trainer's), builds the
examples (:mod:`~.sft_data`: ``demos`` expert episodes played by the agent's
loop, or ``export-chat`` transcripts; each step's prompt what the agent
sends, loss on the replies only), and takes ``epochs`` passes over them in
batches of ``batch`` sequences (AdamW, a constant learning rate, gradients
clipped to norm 1), a progress bar on stderr. The adapter it writes
(``adapter/``, a PEFT folder) is what ``feedbackgym agent --adapter`` plays
and ``feedbackgym train-llm --adapter`` goes on training by RL.

The run directory::

    config.json  state.json  chats.jsonl (the episodes trained on, one chat a line)
    tb/sft_seedS_N/   sft/loss, sft/tokens_per_s, sft/label_tokens, sft/learning_rate, system/
    checkpoints/      round_NNNN.pt (after optimizer step NNNN: the adapter and the optimizer)
    adapter/          the warm-up's adapter (PEFT), written at the end

``--resume`` goes on from the last checkpoint with the same examples
(``chats.jsonl``) in the same order.

Example:
    >>> config = SFTConfig("feedbackgym/OpsIncidentEasy-v0", "runs/sft", demos=10)
    >>> config.demos, config.epochs, config.batch
    (10, 3, 4)
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from feedbackgym.config import GuideConfig
from feedbackgym.errors import requires_extra
from feedbackgym.language.agent_arms import DEFAULT_AGENT_ARM, agent_arm
from feedbackgym.language.agent_loop import DEFAULT_MEMORY, prompt_budget
from feedbackgym.language.episode_chat import DEFAULT_TURNS, check_turns
from feedbackgym.language.model_server import DEFAULT_CONTEXT
from feedbackgym.language.prompt_window import PromptWindow
from feedbackgym.training.common.device import resolve_device
from feedbackgym.training.common.run_files import (
    drop_old_checkpoints,
    prepare_run_dir,
    read_state,
    tensorboard_dir,
    write_state,
)
from feedbackgym.training.common.system_metrics import SystemMonitor
from feedbackgym.training.llm.causal_lm import (
    ChatModel,
    LoraSettings,
    adapter_state,
    load_adapter_state,
    load_chat_model,
)
from feedbackgym.training.llm.sft_data import (
    IGNORE,
    TokenizerCounter,
    TrainingSequence,
    expert_chats,
    read_chats,
    training_sequences,
)

with requires_extra("llm-train", "torch"):
    import torch
    from torch.utils.tensorboard import SummaryWriter

__all__ = [
    "SFT_RESUMABLE_CHANGES",
    "SFTConfig",
    "batch_loss",
    "sft_window",
    "train_sft_run",
]

SFT_RESUMABLE_CHANGES = frozenset(
    {"epochs", "max_steps", "out_dir", "device", "cpu_threads", "keep_checkpoints", "save_every"}
)
"""The settings a resumed warm-up may change: its length, where it lives and runs, what it keeps."""
_GUIDE = GuideConfig()


@dataclass
class SFTConfig:
    """Everything one warm-up needs.

    Attributes:
        env_id: A registered env with a text mode and an expert.
        out_dir: The run directory.
        demos: Expert episodes to play for examples (ignored with ``chats``).
        chats: An ``export-chat`` JSONL file to train on instead.
        seed: The first expert seed, and the seed of the adapter's start and the data order.
        model: ``"packaged"``, a ``.gguf`` file or a local model folder.
        adapter: A saved PEFT adapter to start from (``None``: a new one).
        arm: The agent arm the demos are played in (its hints and reviews in the prompt).
        memory: Reviews the system message carries (the agent's ``--memory``).
        turns: What a later user turn carries (the agent's ``--turns``).
        dropout: Chance a hint is withheld (the arms' guide dropout).
        dropout_scope: ``"episode"`` or ``"step"``.
        level: What the demos' hints and reviews disclose (part of the warm-up's label).
        context: The served model's context (the agent's ``--context``): prompts
            keep within its budget as the agent's do.
        template: The server's chat template.
        epochs: Passes over the examples.
        batch: Sequences per optimizer step.
        max_steps: Stop after this many optimizer steps (``None``: all epochs).
        learning_rate: The adapter's learning rate (constant).
        lora_rank: A new adapter's rank.
        lora_alpha: A new adapter's alpha.
        save_every: Optimizer steps between checkpoints (the last step is always saved).
        keep_checkpoints: Newest checkpoints kept (0: every one).
        device: ``"auto"`` (CUDA when present), ``"cuda"`` or ``"cpu"``.
        cpu_threads: torch threads on the CPU (0: one per core).
        env_kwargs: More keyword arguments for ``gym.make``.
    """

    env_id: str
    out_dir: str
    resumable_changes: ClassVar[frozenset[str]] = SFT_RESUMABLE_CHANGES
    fresh_start: ClassVar[tuple[str, ...]] = ("state.json", "chats.jsonl", "checkpoints", "adapter")
    demos: int = 10
    chats: str | None = None
    seed: int = 0
    model: str = "packaged"
    adapter: str | None = None
    arm: str = DEFAULT_AGENT_ARM
    memory: int = DEFAULT_MEMORY
    turns: str = DEFAULT_TURNS
    dropout: float = _GUIDE.dropout
    dropout_scope: str = _GUIDE.dropout_scope
    level: str = _GUIDE.level
    context: int = DEFAULT_CONTEXT
    template: str = "gemma"
    epochs: int = 3
    batch: int = 4
    max_steps: int | None = None
    learning_rate: float = 2e-4
    lora_rank: int = 8
    lora_alpha: int = 16
    save_every: int = 10
    keep_checkpoints: int = 3
    device: str = "auto"
    cpu_threads: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("demos", "epochs", "batch", "save_every", "lora_rank"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {self.max_steps}")
        if self.keep_checkpoints < 0:
            raise ValueError(f"keep_checkpoints must be at least 0, got {self.keep_checkpoints}")
        if not 0.0 <= self.dropout <= 1.0:
            raise ValueError(f"dropout must be in [0, 1], got {self.dropout}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be above 0, got {self.learning_rate}")
        agent_arm(self.arm)  # an unknown arm fails here, before the model loads
        check_turns(self.turns)
        prompt_budget(self.context)

    def to_json(self) -> str:
        """The config as JSON."""
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SFTConfig:
        """Reads a config written by :meth:`to_json`."""
        return cls(**json.loads(text))


def sft_window(config: SFTConfig, tokenizer: Any) -> PromptWindow:
    """The agent's prompt window for ``config.context``, counting with the model's tokenizer."""
    return PromptWindow(prompt_budget(config.context), TokenizerCounter(tokenizer))


def batch_loss(chat: ChatModel, batch: Sequence[TrainingSequence]) -> tuple[Any, int]:
    """The mean loss over the batch's labelled tokens, and how many tokens it computed.

    Each sequence runs alone (no padding), the output layer only at the
    positions that predict a labelled token (``logits_to_keep``): Gemma's
    262,144-way output at every one of a 2,000-token prompt's positions would
    cost more than the rest of the model, for the 1% of tokens that carry loss.
    Every labelled token of the batch counts the same.
    """
    labelled = sum(s.label_tokens for s in batch)
    total = torch.zeros((), device=chat.device)
    for sequence in batch:
        targets = [(j - 1, label) for j, label in enumerate(sequence.labels) if label != IGNORE]
        ids = torch.tensor([sequence.input_ids], device=chat.device)
        keep = torch.tensor([position for position, _ in targets], device=chat.device)
        logits = chat.model(input_ids=ids, logits_to_keep=keep, use_cache=False).logits[0]
        wanted = torch.tensor([label for _, label in targets], device=chat.device)
        total = total + torch.nn.functional.cross_entropy(
            logits.float(), wanted, reduction="sum"
        ) / max(labelled, 1)
    return total, sum(len(s.input_ids) for s in batch)


def _chats(config: SFTConfig, window: PromptWindow, path: Path) -> list[list[dict[str, str]]]:
    """The episodes to train on: ``chats.jsonl`` when the run has it, else made and written."""
    if path.exists():
        return read_chats(path)
    if config.chats is not None:
        chats = read_chats(config.chats)
    else:
        made = expert_chats(
            config.env_id,
            config.demos,
            seed=config.seed,
            arm=config.arm,
            memory=config.memory,
            turns=config.turns,
            dropout=config.dropout,
            dropout_scope=config.dropout_scope,
            level=config.level,
            window=window,
            env_kwargs=config.env_kwargs,
        )
        chats = list(_bar(made, config.demos, "expert episodes", "episode"))
    with path.open("w") as file:
        for messages in chats:
            file.write(json.dumps({"messages": messages}) + "\n")
    return chats


def _bar(items: Any, total: int, label: str, unit: str, initial: int = 0) -> Any:
    """A progress bar on stderr over ``items`` (they as they are without tqdm)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, total=total, initial=initial, desc=label, unit=unit, file=sys.stderr)


def _order(count: int, epoch: int, seed: int) -> list[int]:
    """The sequences' order in ``epoch`` (the same on a resumed run)."""
    order = list(range(count))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


def train_sft_run(
    config: SFTConfig,
    *,
    resume: bool = False,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Runs the warm-up; returns its final state (``state.json``).

    Args:
        config: The warm-up's settings; ``out_dir`` receives every output.
        resume: Go on from the last checkpoint in ``out_dir`` when there is one.
        log: Where the run's lines go (the examples' size, where the adapter is).

    Raises:
        ConfigError: Resumed with other settings, or a model, adapter or chats
            file that cannot be read.
    """
    device = resolve_device(config.device)
    if device.type == "cpu":
        torch.set_num_threads(config.cpu_threads or os.cpu_count() or 1)
    state = prepare_run_dir(config, resume=resume)
    run_dir = Path(config.out_dir)
    torch.manual_seed(config.seed)
    chat = load_chat_model(
        config.model,
        adapter=config.adapter,
        lora=LoraSettings(config.lora_rank, config.lora_alpha),
        device=device,
    )
    window = sft_window(config, chat.tokenizer)
    chats = _chats(config, window, run_dir / "chats.jsonl")
    sequences = training_sequences(chats, chat.encode, window=window, template=config.template)
    per_epoch = math.ceil(len(sequences) / config.batch)
    steps = per_epoch * config.epochs
    if config.max_steps is not None:
        steps = min(steps, config.max_steps)
    log(
        f"sft: {len(chats)} episodes, {len(sequences)} sequences, "
        f"{sum(len(s.input_ids) for s in sequences)} tokens "
        f"({sum(s.label_tokens for s in sequences)} labelled); {steps} steps"
    )
    parameters = [p for p in chat.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=config.learning_rate, weight_decay=0.0)
    first = int(state.get("step", -1)) + 1
    if first > 0:
        checkpoint = torch.load(
            run_dir / "checkpoints" / f"round_{first - 1:04d}.pt", weights_only=True
        )
        load_adapter_state(chat.model, checkpoint["adapter"])
        optimizer.load_state_dict(checkpoint["optimizer"])
    writer = SummaryWriter(str(tensorboard_dir(run_dir / "tb", f"sft_seed{config.seed}", first)))
    monitor = SystemMonitor(steps=int(state.get("tokens", 0)))
    chat.model.train()
    bar = _bar(range(first, steps), steps, "sft", "step", initial=first)
    try:
        for step in bar:
            epoch, index = divmod(step, per_epoch)
            order = _order(len(sequences), epoch, config.seed)
            batch = [sequences[i] for i in order[index * config.batch : (index + 1) * config.batch]]
            started = time.perf_counter()
            loss, tokens = batch_loss(chat, batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            optimizer.step()
            optimizer.zero_grad()
            seconds = time.perf_counter() - started
            state = {
                "step": step,
                "epoch": epoch,
                "loss": loss.item(),
                "tokens": int(state.get("tokens", 0)) + tokens,
                "seconds": float(state.get("seconds", 0.0)) + seconds,
                "steps": steps,
            }
            writer.add_scalar("sft/loss", state["loss"], step + 1)
            writer.add_scalar("sft/tokens_per_s", tokens / max(seconds, 1e-9), step + 1)
            writer.add_scalar("sft/label_tokens", sum(s.label_tokens for s in batch), step + 1)
            writer.add_scalar("sft/learning_rate", config.learning_rate, step + 1)
            for key, value in monitor.sample(state["tokens"]).items():
                writer.add_scalar(f"system/{key}", value, step + 1)
            if hasattr(bar, "set_postfix"):
                bar.set_postfix(loss=f"{state['loss']:.3f}", tok_s=f"{tokens / seconds:.0f}")
            if (step + 1) % config.save_every == 0 or step + 1 == steps:
                _save(run_dir, config, chat, optimizer, state)
    finally:
        writer.close()
    chat.model.save_pretrained(str(run_dir / "adapter"))
    state = {**read_state(run_dir), "finished": True, "adapter": str(run_dir / "adapter")}
    write_state(run_dir, state)
    rate = state.get("tokens", 0) / max(state.get("seconds", 0.0), 1e-9)
    log(f"sft: adapter in {run_dir / 'adapter'} ({rate:.1f} training tokens/s)")
    return state


def _save(
    run_dir: Path, config: SFTConfig, chat: ChatModel, optimizer: Any, state: dict[str, Any]
) -> None:
    """Writes the step's checkpoint, then the state that points at it."""
    checkpoints = run_dir / "checkpoints"
    checkpoints.mkdir(exist_ok=True)
    torch.save(
        {"adapter": adapter_state(chat.model), "optimizer": optimizer.state_dict()},
        checkpoints / f"round_{state['step']:04d}.pt",
    )
    write_state(run_dir, state)
    drop_old_checkpoints(checkpoints, config.keep_checkpoints, ".pt")
