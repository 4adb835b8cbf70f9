"""The LLM trainer on CUDA: a warm-up, then a short GRPO phase; tokens/s, episodes/s, GPU use.

With the packaged model (Gemma 3 270M, from its GGUF) on OpsIncident easy (text):

1. warm-up: supervised LoRA training on expert episodes (loss on the expert's
   replies), timed in training tokens/s;
2. RL: ``feedbackgym train-llm``'s run (:func:`~feedbackgym.training.llm.run_llm.train_llm_run`)
   from that adapter, ``--rounds`` rounds of ``--groups`` x ``--group-size``
   episodes (320 by default), while a thread samples the GPU's utilisation
   through NVML (``nvidia-ml-py``) every half second.

It prints the warm-up's tokens/s, the RL phase's episodes/s and its rollout
and update tokens/s (from the run's TensorBoard ``llm/`` tags), the GPU
utilisation (mean and peak; the specification's goal: at least 80%) and the
peak GPU memory. On a machine without a CUDA GPU it says it needs one and
exits with status 0 (nothing to measure there).

Usage:
    python benchmarks/gpu_llm_check.py [--rounds 10] [--groups 4] [--group-size 8]
        [--warmup-episodes 50] [--model packaged] [--out runs/gpu-llm-check]
"""

from __future__ import annotations

import argparse
import glob
import sys
import threading
import time
from pathlib import Path
from typing import Any

ENV_ID = "feedbackgym/OpsIncidentEasy-v0"


class GpuSampler(threading.Thread):
    """Samples the GPU's utilisation (NVML) every ``every`` seconds until stopped."""

    def __init__(self, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.every = every
        self.samples: list[float] = []
        self.error = ""
        self._stop_event = threading.Event()

    def run(self) -> None:
        """Samples until :meth:`stop` (or notes why NVML is not there)."""
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception as error:  # no NVML: say so, measure the rest
            self.error = f"{type(error).__name__}: {error} (install nvidia-ml-py)"
            return
        while not self._stop_event.wait(self.every):
            self.samples.append(float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu))

    def stop(self) -> None:
        """Stops sampling."""
        self._stop_event.set()
        self.join(timeout=5)


def warm_up(chat: Any, episodes: int, max_turns: int) -> tuple[float, int]:
    """LoRA training on expert episodes' replies; returns (tokens/s, tokens trained on)."""
    import gymnasium as gym
    import torch

    from feedbackgym.chat import PromptTemplate
    from feedbackgym.language.episode_chat import EpisodeChat

    env = gym.make(ENV_ID, obs_mode="text", max_episode_steps=max_turns)
    meanings = env.unwrapped.action_meanings
    optimizer = torch.optim.AdamW([p for p in chat.model.parameters() if p.requires_grad], lr=2e-4)
    chat.model.train()
    tokens = 0
    torch.cuda.synchronize()
    start = time.perf_counter()
    for seed in range(episodes):
        text = EpisodeChat(PromptTemplate.load("agent"), ENV_ID, tuple(meanings), seed)
        obs, _ = env.reset(seed=seed)
        ids = chat.encode(
            chat.turns.opening_text(
                chat.bos, text.system()["content"], text.user(obs, None)["content"]
            )
        )
        labels = [-100] * len(ids)
        done = False
        while not done:
            action = env.unwrapped.expert_action()
            reply = chat.encode(meanings[action] + chat.turns.stop)
            ids, labels = ids + reply, labels + reply
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
            if not done:
                turn = chat.encode(chat.turns.next_text(text.user(obs, None)["content"]))
                ids, labels = ids + turn, labels + [-100] * len(turn)
        batch = torch.tensor([ids], device=chat.device)
        loss = chat.model(input_ids=batch, labels=torch.tensor([labels], device=chat.device)).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        tokens += len(ids)
    torch.cuda.synchronize()
    env.close()
    return tokens / (time.perf_counter() - start), tokens


def _scalars(run_dir: Path) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folder = sorted(glob.glob(str(run_dir / "tb" / "*")))[-1]
    events = EventAccumulator(folder)
    events.Reload()
    return {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--warmup-episodes", type=int, default=50)
    parser.add_argument("--max-turns", type=int, default=16)
    parser.add_argument("--model", default="packaged")
    parser.add_argument("--out", default="runs/gpu-llm-check")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print('needs torch and a CUDA GPU (pip install "feedbackgym[llm-train]"); nothing measured')
        return 0
    if not torch.cuda.is_available():
        print("gpu_llm_check needs a CUDA GPU; this machine has none: nothing measured")
        return 0
    from feedbackgym.training.llm.causal_lm import load_chat_model
    from feedbackgym.training.llm.llm_settings import LLMRunConfig
    from feedbackgym.training.llm.run_llm import train_llm_run

    out = Path(args.out)
    device = torch.device("cuda")
    start = time.perf_counter()
    chat = load_chat_model(args.model, device=device)
    print(
        f"{torch.cuda.get_device_name()}: {chat.name} loaded in {time.perf_counter() - start:.0f} s"
    )
    rate, tokens = warm_up(chat, args.warmup_episodes, args.max_turns)
    print(f"warm-up: {args.warmup_episodes} expert episodes, {tokens} tokens, {rate:.0f} tokens/s")
    adapter = out / "warmup-adapter"
    chat.model.save_pretrained(str(adapter))
    del chat
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()

    config = LLMRunConfig(
        ENV_ID,
        "guide-then-review+shaping",
        seed=0,
        total_rounds=args.rounds,
        out_dir=str(out / "rl"),
        model=args.model,
        adapter=str(adapter),
        groups=args.groups,
        group_size=args.group_size,
        seed_pool=max(16, args.groups),
        max_turns=args.max_turns,
        eval_every=args.rounds,
        eval_episodes=8,
        device="cuda",
    )
    sampler = GpuSampler()
    sampler.start()
    start = time.perf_counter()
    train_llm_run(config)
    wall = time.perf_counter() - start
    sampler.stop()
    episodes = args.rounds * args.groups * args.group_size
    scalars = _scalars(out / "rl")
    print(
        f"RL: {args.rounds} rounds, {episodes} episodes in {wall:.0f} s ({episodes / wall:.2f}/s, "
        "validations included)"
    )
    for tag in (
        "llm/episodes_per_s",
        "llm/tokens_per_s",
        "llm/generated_tokens_per_s",
        "llm/train_tokens_per_s",
        "llm/rollout_seconds",
        "llm/update_seconds",
    ):
        print(f"{tag}: mean {_mean(scalars.get(tag, [])):.2f} a round")
    if sampler.samples:
        mean, peak = _mean(sampler.samples), max(sampler.samples)
        verdict = "met" if mean >= 80 else "missed"
        print(f"GPU utilisation: mean {mean:.0f}%, peak {peak:.0f}% (goal >= 80%: {verdict})")
    else:
        print(f"GPU utilisation: not sampled ({sampler.error or 'no samples'})")
    print(f"GPU memory: peak {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB allocated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
