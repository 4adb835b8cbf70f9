"""One LLM run: GRPO through TRL in the same run directory as the other trainers.

Each round plays ``groups`` groups of ``group_size`` episodes, each group on
one seed (:class:`~.grpo_rollout.GroupRollout`, TRL's ``rollout_func``; the
model server plays them with the adapter published before the round, or the
model in torch: ``rollouts``, :mod:`~.served_rollouts`), and
takes one optimizer step of TRL's ``GRPOTrainer`` on the adapter. Then, as
with the PPO trainers (:class:`~feedbackgym.training.common.round_book.RoundBook`):
the controller gets the round's trend and pushes the next round's feedback
to the envs (a config file edited meanwhile applies now), the round's
checkpoint is saved (``checkpoints/round_NNNN.pt``: the adapter, the
optimizer and the review memories; ``best.pt`` the best), every
``eval_every`` rounds and at the last the model plays the env's held-out
seeds with hints shown and masked (``curve.csv``; each validation's adapter
becomes a version in ``versions/``, promoted when it passes), and
``state.json`` says where ``--resume`` goes on from.

The run directory::

    config.json  curve.csv  state.json  chats.jsonl (every training episode's chat)
    tb/ARM_seedS_N/    rollout/, train/ (TRL's losses), feedback/, llm/, system/
    checkpoints/       round_NNNN.pt, best.pt
    versions/          v0001/ ... (PEFT adapters), registry.json
    served/            the adapter published for the model server each round (the last two kept)
    trajectories/      with --record
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from feedbackgym.errors import requires_extra
from feedbackgym.language.episode_chat import ReviewMemory
from feedbackgym.language.versions import VersionRegistry
from feedbackgym.protocol import SET_FEEDBACK_STATE, FeedbackState, call_envs
from feedbackgym.registration import evaluation_kwargs
from feedbackgym.training.common.device import resolve_device
from feedbackgym.training.common.feedback_metrics import feedback_metrics
from feedbackgym.training.common.round_book import RoundBook
from feedbackgym.training.common.run_files import append_curve, prepare_run_dir, tensorboard_dir
from feedbackgym.training.common.run_settings import close_run
from feedbackgym.training.common.system_metrics import SystemMonitor
from feedbackgym.training.common.trainer_names import Progress, RunState
from feedbackgym.training.common.validation import Evaluation
from feedbackgym.training.llm.action_choice import Chooser, rollout_threads
from feedbackgym.training.llm.causal_lm import (
    ChatModel,
    LoraSettings,
    adapter_state,
    load_adapter_state,
    load_chat_model,
    saved_adapter,
)
from feedbackgym.training.llm.episode_tokens import play_episode
from feedbackgym.training.llm.feedback_targets import HintedEnvs
from feedbackgym.training.llm.grpo_rollout import (
    GroupRollout,
    RolloutMechanisms,
    RoundEpisodes,
    episode_return_reward,
    seed_prompt,
)
from feedbackgym.training.llm.llm_settings import LLMRunConfig
from feedbackgym.training.llm.served_rollouts import ServedAdapter
from feedbackgym.wrappers.stack import make

with requires_extra("llm-train", "transformers"):
    import torch
    from torch.utils.tensorboard import SummaryWriter
    from transformers import PrinterCallback, TrainerCallback

__all__ = ["AdapterRounds", "train_llm_run"]


class AdapterRounds(RoundBook):
    """The round book of an LLM run: validations played by the model; versions of its adapter.

    A validation plays the held-out seeds (the test split's, on an env with
    splits) twice, hints shown and masked, in the round's feedback state,
    greedily by default (``eval_temperature`` 0; above 0 sampled from a
    generator seeded by the run's seed: reproducible either way); its adapter
    becomes a version in ``versions/``, which passes when its success with
    hints masked (the way it is served) reaches ``promote_above``, and is
    promoted when it passes and does at least as well as the current version.
    With ``rollback_drop``, a validation that falls more than that below the
    current version sends training back to the current version's adapter
    (the registry notes a ``rollback`` to it; the round's checkpoint holds it).

    Args:
        config: The run's settings.
        controller: The run's controller.
        eval_env: The validation env (the arm's stack).
        chat: The model being trained.
        progress: Called with the env steps done after each round.
    """

    def __init__(
        self,
        config: LLMRunConfig,
        controller: Any,
        eval_env: Any,
        chat: ChatModel,
        *,
        progress: Callable[[int], None] | None = None,
        served: ServedAdapter | None = None,
    ) -> None:
        super().__init__(config, controller, [eval_env], suffix=".pt", progress=progress)
        self.eval_env = eval_env
        self.llm = config
        self.chat = chat
        self.served = served
        self._chooser: Callable[[], Chooser] | None = None
        self.registry = VersionRegistry(self.run_dir / "versions")
        self.rollbacks = 0

    def _play(self, state: FeedbackState, generator: Any) -> tuple[float, float, float]:
        call_envs(self.eval_env, SET_FEEDBACK_STATE, state)
        with rollout_threads(self.chat.device):
            episodes = self._episodes(generator)
        count = max(1, len(episodes))
        return (
            sum(e.success for e in episodes) / count,
            sum(e.env_return for e in episodes) / count,
            sum(e.length for e in episodes) / count,
        )

    def _episodes(self, generator: Any) -> list[Any]:
        return [
            play_episode(
                self.chat,
                self.eval_env,
                seed,
                turns=self.llm.turns,
                temperature=self.llm.eval_temperature,
                generator=generator,
                max_tokens=self.llm.max_tokens,
                chooser=self._chooser,
            )
            for seed in self.seeds
        ]

    def _evaluate(self, round_: int, timesteps: int, policy: Any) -> Evaluation:
        controller = self.controller
        state = controller.state if controller.round == round_ else controller.state_at(round_)
        generator = torch.Generator().manual_seed(self.llm.seed)
        if self.served is not None:  # the adapter the next round's rollouts play
            self._chooser = self.served.chooser(round_)
        success, mean_return, mean_length = self._play(state.masked(False), generator)
        unguided = success
        if state.guide_weight != 0:
            unguided = self._play(state.masked(), generator)[0]
        call_envs(self.eval_env, SET_FEEDBACK_STATE, state.masked(False))
        evaluation = Evaluation(success, unguided, mean_return, mean_length)
        append_curve(
            self.run_dir / "curve.csv",
            evaluation.curve_row(timesteps, round_, state.phase, seconds=self.seconds),
        )
        self._add_version(round_ - 1, evaluation)
        return evaluation

    def _add_version(self, round_: int, evaluation: Evaluation) -> None:
        validation = {
            "success": evaluation.success,
            "success_unguided": evaluation.success_unguided,
            "mean_return": evaluation.mean_return,
            "mean_length": evaluation.mean_length,
        }
        passed = evaluation.success_unguided >= self.llm.promote_above
        version = self.registry.add(
            self.chat.model.save_pretrained, round=round_, validation=validation, passed=passed
        )
        current = self.registry.state.current
        best = (
            -1.0
            if current is None
            else self.registry.get(current).validation.get("success_unguided", 0.0)
        )
        if passed and evaluation.success_unguided >= best:
            self.registry.promote(version.number)
        elif (
            current is not None
            and self.llm.rollback_drop is not None
            and evaluation.success_unguided < best - self.llm.rollback_drop
        ):
            self._roll_back(round_, current)

    def _roll_back(self, round_: int, number: int) -> None:
        """Training goes back to version ``number``'s adapter; round ``round_``'s checkpoint too."""
        load_adapter_state(self.chat.model, saved_adapter(self.registry.path(number)))
        if self.served is not None:
            self.served.forget()
        self.registry.rollback(number)
        path = self.checkpoint(round_)
        checkpoint = torch.load(path, weights_only=True)
        checkpoint["adapter"] = adapter_state(self.chat.model)
        torch.save(checkpoint, path)
        self.rollbacks += 1


class _Rounds(TrainerCallback):
    """Closes each round when TRL logs its optimizer step (logging every step)."""

    def __init__(
        self,
        config: LLMRunConfig,
        book: AdapterRounds,
        rollout: GroupRollout,
        writer: Any,
        first_round: int,
        checkpoint: dict[str, Any] | None,
        timesteps: int,
    ) -> None:
        self.config = config
        self.book = book
        self.rollout = rollout
        self.writer = writer
        self.first_round = first_round
        self.checkpoint = checkpoint
        self.timesteps = timesteps
        self.system = SystemMonitor(steps=timesteps)
        self.chats = Path(config.out_dir) / "chats.jsonl"
        self.played_at = time.perf_counter()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        optimizer = kwargs.get("optimizer")
        if self.checkpoint is not None and optimizer is not None:
            optimizer.load_state_dict(self.checkpoint["optimizer"])

    def played(self, episodes: RoundEpisodes) -> None:
        """Notes when a round's rollouts ended (its update starts then)."""
        self.played_at = time.perf_counter()

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if not logs or "loss" not in logs:
            return
        update_seconds = time.perf_counter() - self.played_at
        played = self.rollout.last
        if played is None:
            raise RuntimeError("TRL logged a step before any rollout")
        round_ = played.round
        summary = played.summary()
        self.timesteps += int(summary["steps"])
        controller = self.book.controller
        last = round_ + 1 >= self.config.rounds
        trend = {
            "loss": float(logs["loss"]),
            "mean_return": summary["mean_return"],
            "success": summary["success"],
        }

        def log(tag: str, value: float, step: int = round_ + 1) -> None:
            self.writer.add_scalar(tag, value, step)

        self.book.add_replayed(sum(e.replayed for e in played.episodes))
        self._log_round(log, played, summary, logs, update_seconds)
        self._write_chats(played)
        if not last:
            controller.update(round_ + 1, **trend)
        optimizer = kwargs.get("optimizer")
        memories = {str(seed): list(m.texts) for seed, m in self.rollout.memories.items()}

        def save(path: Path) -> None:
            torch.save(
                {
                    "adapter": adapter_state(self.book.chat.model),
                    "optimizer": optimizer.state_dict() if optimizer is not None else {},
                    "memories": memories,
                },
                path,
            )

        self.book.finish(
            round_,
            timesteps=self.timesteps,
            save=save,
            policy=_played_by_the_book,
            pending_report=trend if last else None,
            log=log,
        )
        self.writer.flush()

    def _log_round(
        self,
        log: Callable[[str, float], None],
        played: RoundEpisodes,
        summary: dict[str, float],
        logs: dict[str, Any],
        update_seconds: float,
    ) -> None:
        log("rollout/ep_rew_mean", summary["mean_return"])
        log("rollout/env_return_mean", summary["env_return"])
        log("rollout/success_rate", summary["success"])
        log("rollout/ep_len_mean", summary["length"])
        for key, value in logs.items():
            if isinstance(value, (int, float)) and key != "epoch":
                log(f"train/{key}", float(value))
        stats = call_envs(self.rollout.env, "feedback_stats")
        controller = self.book.controller
        for key, value in feedback_metrics(controller, stats, summary["mean_return"]).items():
            log(f"feedback/{key}", value)
        log("feedback/hint_rate", summary["hint_rate"])
        log("feedback/hints_per_turn", summary["hints_per_turn"])
        log("feedback/reviews_in_prompt", summary["reviews_in_prompt"])
        for key in ("replayed_groups", "rescued_groups", "restarted_groups", "distilled_choices"):
            log(f"feedback/{key}", summary[key])
        log("feedback/rollbacks", float(self.book.rollbacks))
        log("llm/replay_episodes", summary["replay_episodes"])
        log("llm/tokens_per_s", summary["tokens_per_s"])
        log("llm/generated_tokens_per_s", summary["generated_per_s"])
        log("llm/episodes_per_s", summary["episodes_per_s"])
        log("llm/train_tokens_per_s", summary["tokens"] / max(update_seconds, 1e-9))
        log("llm/rollout_seconds", played.seconds)
        log("llm/update_seconds", update_seconds)
        for key, value in self.system.sample(self.timesteps).items():
            log(f"system/{key}", value)

    def _write_chats(self, played: RoundEpisodes) -> None:
        with self.chats.open("a") as file:
            for episode in played.episodes:
                record = {"round": played.round, "phase": played.phase, **episode.chat_record()}
                file.write(json.dumps(record) + "\n")


def _grpo_args(config: LLMRunConfig, first_round: int, device: torch.device) -> Any:
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(Path(config.out_dir) / "trl"),
        per_device_train_batch_size=config.group_size,
        gradient_accumulation_steps=config.groups,
        num_generations=config.group_size,
        max_steps=config.rounds - first_round,
        learning_rate=config.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        beta=config.beta,
        epsilon=config.epsilon,
        temperature=max(config.temperature, 1e-6),
        num_iterations=1,
        shuffle_dataset=False,
        mask_truncated_completions=False,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        seed=config.seed + first_round,
        use_cpu=device.type == "cpu",
        bf16=device.type == "cuda",
        dataloader_num_workers=0,
    )


def train_llm_run(
    config: LLMRunConfig, *, resume: bool = False, progress: Progress = None
) -> RunState:
    """Trains one run by GRPO.

    Arguments and result as :class:`~feedbackgym.training.common.trainer_names.TrainRun`.
    """
    from datasets import Dataset

    from feedbackgym.training.llm.chosen_token_grpo import ChosenTokenGRPOTrainer

    device = resolve_device(config.device)
    if device.type == "cpu":
        torch.set_num_threads(config.cpu_threads or os.cpu_count() or 1)
    state = prepare_run_dir(config, resume=resume, rounds=config.rounds)
    if state.get("finished"):
        return state["state"]
    first_round = state.get("round", -1) + 1
    run_dir = Path(config.out_dir)
    torch.manual_seed(config.seed + first_round)
    controller = config.controller()
    store = None
    if config.record:
        from feedbackgym.datasets import TrajectoryStore

        store = TrajectoryStore(run_dir / "trajectories")
    env: Any = None
    eval_env: Any = None
    writer = None
    hinted: HintedEnvs | None = None
    served: ServedAdapter | None = None
    try:
        chat = load_chat_model(
            config.model,
            adapter=config.adapter,
            lora=LoraSettings(config.lora_rank, config.lora_alpha),
            device=device,
        )
        if config.served_rollouts:
            served = ServedAdapter(
                chat,
                run_dir / "served",
                model=config.model,
                context=config.max_tokens,
                threads=config.cpu_threads or None,
            )
        if config.env_url is not None:  # the server's sessions: its stack, our controller
            from feedbackgym.serving.remote_env import RemoteEnv

            env, eval_env = RemoteEnv(config.env_url), RemoteEnv(config.env_url)
        else:
            env = make(config.env_id, controller.config, record=store, **config.env_arguments())
            eval_env = make(
                config.env_id,
                controller.config,
                **evaluation_kwargs(config.env_id, config.env_arguments()),
            )
        book = AdapterRounds(config, controller, eval_env, chat, progress=progress, served=served)
        checkpoint = None
        if first_round > 0:
            checkpoint = torch.load(book.checkpoint(first_round - 1), weights_only=True)
            load_adapter_state(chat.model, checkpoint["adapter"])
        controller.attach(env)
        controller.attach(eval_env)
        if "controller" in state:
            controller.load_state_dict(state["controller"])
        pending = state.get("pending_report")
        if first_round == 0 or pending is not None:
            controller.update(first_round, **(pending or {}))
        writer = SummaryWriter(
            str(tensorboard_dir(run_dir / "tb", f"{config.arm}_seed{config.seed}", first_round))
        )
        if config.failure_hints:
            hinted = HintedEnvs(config.env_id, controller.config, config.env_arguments())
        rollout = GroupRollout(
            chat,
            env,
            lambda trainer: first_round + int(trainer.state.global_step),
            phase=lambda: controller.state.phase,
            memory=config.memory,
            turns=config.turns,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            generator=torch.Generator().manual_seed(config.seed + first_round),
            mechanisms=RolloutMechanisms(
                hinted_envs=hinted,
                weight_cap=config.hint_weight_cap,
                distill=config.distill,
                distill_flagged=config.distill_steps == "flagged",
            ),
            served=served,
        )
        if checkpoint is not None:
            for seed, texts in checkpoint.get("memories", {}).items():
                memory = rollout.memories.setdefault(int(seed), ReviewMemory(config.memory))
                memory.texts.extend(texts)
        rounds = _Rounds(
            config, book, rollout, writer, first_round, checkpoint, int(state.get("timesteps", 0))
        )
        rollout.on_round = rounds.played
        prompts = [
            seed_prompt(seed)
            for round_ in range(first_round, config.rounds)
            for seed in config.round_seeds(round_)
        ]
        trainer = ChosenTokenGRPOTrainer(
            model=chat.model,
            reward_funcs=episode_return_reward,
            args=_grpo_args(config, first_round, device),
            train_dataset=Dataset.from_dict({"prompt": prompts}),
            processing_class=chat.tokenizer,
            rollout_func=rollout,
            callbacks=[rounds],
            distill_coef=config.distill_coef,
            distill_alpha=config.distill_alpha,
        )
        trainer.remove_callback(PrinterCallback)  # the round's scalars go to TensorBoard
        trainer.train()
    finally:
        if served is not None:
            served.close()
        if hinted is not None:
            hinted.close()
        closed = close_run(config, controller, [env, eval_env, writer], store)  # type: ignore[arg-type]
    return closed


def _played_by_the_book(observations: list[Any]) -> list[int]:
    """No policy of observations: :class:`AdapterRounds` plays its validations with the model."""
    raise NotImplementedError("the LLM trainer's validations play chats")
