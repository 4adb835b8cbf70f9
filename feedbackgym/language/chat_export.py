"""Stored episodes back as the agent loop's chats (JSONL, one episode a line), for fine-tuning.

:func:`chat_records` rebuilds each episode's chat as the agent
(:class:`~feedbackgym.language.agent_loop.ChatAgent`) sent it: its system message
with the reviews it remembered, each observation with its hint, each action as the
env words it. :func:`export_chat` writes them. Command line: ``feedbackgym datasets
export-chat PATH``.

It lives beside the agent loop rather than in :mod:`feedbackgym.datasets`: the chats are
the agent's prompts (:mod:`~feedbackgym.language.episode_chat`), a layer above the store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import gymnasium as gym

from feedbackgym.language.agent_arms import DEFAULT_AGENT_ARM, agent_arm, attempt_label
from feedbackgym.language.agent_loop import text_env
from feedbackgym.language.episode_chat import (
    DEFAULT_MEMORY,
    DEFAULT_TURNS,
    EpisodeChat,
    ReviewMemory,
    agent_template,
)

if TYPE_CHECKING:
    from feedbackgym.datasets import Episode

__all__ = ["chat_records", "export_chat"]


def chat_records(
    episodes: Iterable[Episode], *, memory: int = DEFAULT_MEMORY, turns: str = DEFAULT_TURNS
) -> Iterator[dict[str, Any]]:
    """The stored episodes as chats: the messages the agent loop sent, and its answers.

    Memory is rebuilt as the loop kept it, by the episode's arm (named in its
    env spec): reviews of the earlier episodes of the same shard, task, round
    and arm, in order, ``memory`` at most; for the arms that carry the same
    seed's reviews only, those of the earlier attempts at that seed; none for
    the arms without reviews. Each record holds ``task_id``, ``round``,
    ``arm`` and ``attempt`` (``None`` for episodes recorded before the agent
    had arms, whose memory is rebuilt as ``guide+review``'s), ``seed``,
    ``success``, ``outcome``, ``episode_return``, ``length``, ``messages``
    (system, then user and assistant in turn) and ``review`` (the episode's
    own review, or ``None``).

    Args:
        episodes: Episodes in the order they were recorded (per shard).
        memory: The agent's memory bound.
        turns: The agent's turn mode (``"delta"`` or ``"full"``), to rebuild its prompts.
    """
    from feedbackgym.datasets.episode import FeedbackType

    memories: dict[tuple[Any, ...], ReviewMemory] = {}
    template = agent_template()
    for episode in episodes:
        meta = episode.meta
        arm_name, attempt = attempt_label(meta.env_spec)
        scope = agent_arm(arm_name or DEFAULT_AGENT_ARM).memory
        key: tuple[Any, ...] = (meta.shard, meta.task_id, meta.round, arm_name)
        if scope == "seed":
            key = (*key, meta.seed)
        mem = memories.setdefault(key, ReviewMemory(memory if scope != "none" else 0))
        env = _stored_env(episode)
        try:
            env.reset(seed=meta.seed)  # some envs word their actions per episode
            chat = EpisodeChat.for_env(template, env, meta.seed, turns=turns)
        finally:
            env.close()
        hints = {e.row: e.payload for e in episode.events if e.type & FeedbackType.GUIDE}
        reviews = [(e.row, e.payload) for e in episode.events if e.type & FeedbackType.REVIEW]
        for _, payload in (r for r in reviews if r[0] == 0):
            mem.add(payload)  # came with the reset: the loop saw it before its system message
        messages = [chat.system(mem)]
        observations = _text_column(episode)
        actions = episode.actions
        for t in range(meta.length):
            messages.append(chat.user(observations[t], hints.get(t)))
            messages.append(chat.assistant(int(actions[t])))
        own = None
        for row, payload in reviews:
            if row > 0:
                mem.add(payload)
                own = payload if row == meta.length else own
        yield {
            "task_id": meta.task_id,
            "round": meta.round,
            "arm": arm_name,
            "attempt": attempt,
            "seed": meta.seed,
            "success": meta.success,
            "outcome": meta.outcome,
            "episode_return": meta.episode_return,
            "length": meta.length,
            "messages": messages,
            "review": own,
        }


def _stored_env(episode: Episode) -> gym.Env[Any, Any]:
    """The env an episode was recorded from (its stored spec; else its task id)."""
    meta = episode.meta
    if meta.env_spec:
        spec = gym.envs.registration.EnvSpec.from_json(meta.env_spec)
        return text_env(spec.id, spec.kwargs)
    return text_env(meta.task_id, {})


def _text_column(episode: Episode) -> list[str]:
    observations = episode.observations
    column = observations["text"] if isinstance(observations, dict) else observations
    return [o.decode() if isinstance(o, bytes) else str(o) for o in column]


def export_chat(
    store: str | os.PathLike[str],
    out: str | os.PathLike[str] | IO[str],
    *,
    memory: int = DEFAULT_MEMORY,
    round: str | None = None,
    turns: str = DEFAULT_TURNS,
) -> int:
    """Writes a store's episodes as JSONL chats (see :func:`chat_records`); returns how many.

    Args:
        store: The trajectory store.
        out: A file path, or an open text file.
        memory: The agent's memory bound, to rebuild its prompts.
        round: Only this round's episodes (default: all).
        turns: The agent's turn mode, to rebuild its prompts.

    Raises:
        StoreError: The store cannot be read.
    """
    from feedbackgym.datasets import TrajectoryStore

    filters = {} if round is None else {"round": round}
    episodes = TrajectoryStore(store).iter_episodes(**filters)  # type: ignore[arg-type]
    records = chat_records(episodes, memory=memory, turns=turns)
    if isinstance(out, (str, os.PathLike)):
        with Path(out).open("w") as file:
            return _write(records, file)
    return _write(records, out)


def _write(records: Iterable[dict[str, Any]], file: IO[str]) -> int:
    count = 0
    for record in records:
        file.write(json.dumps(record) + "\n")
        count += 1
    return count
