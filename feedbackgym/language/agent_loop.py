"""An LLM agent loop: a chat model plays text episodes, with hints and reviews in its prompt.

Each episode is one chat. The system message (the built-in ``agent`` prompt,
or your own template) names the env, lists its actions, carries the texts of
the last ``memory`` reviews of earlier episodes (Reflexion-style memory) and
ends with the episode (env id, seed, keyword arguments) as JSON; each user
message is an observation with the hint given with it, if any; each assistant
message is the action taken, as the env words it. A reply that names no
action is asked again (``retries`` times, the wrong reply shown), then the
``fallback`` action is taken; both are counted.

The env runs with :class:`~feedbackgym.wrappers.AddGuide` and
:class:`~feedbackgym.wrappers.AddReview` on their ``info`` channel and,
given a store, :class:`~feedbackgym.wrappers.RecordTrajectories` outermost,
so every observation, action, reward, hint and review goes to the HDF5 store.
:func:`export_chat` turns stored episodes back into the same chats (JSONL, one
episode a line) for fine-tuning.

Command line: ``feedbackgym agent --env ID --base-url URL --model NAME`` and
``feedbackgym datasets export-chat PATH``.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import gymnasium as gym
from gymnasium import spaces

from feedbackgym.errors import ChatError, ConfigError, FeedbackGymError, InvalidAction
from feedbackgym.feedback.llm import DEFAULT_TIMEOUT_S, ChatClient, PromptTemplate
from feedbackgym.protocol import FEEDBACK, IS_SUCCESS, OUTCOME

if TYPE_CHECKING:
    from feedbackgym.datasets import Episode
    from feedbackgym.feedback.generators import Guide, Reviewer

__all__ = [
    "DEFAULT_MEMORY",
    "AgentResult",
    "ChatAgent",
    "ReviewMemory",
    "chat_records",
    "export_chat",
    "result_dict",
    "run_agent",
]

DEFAULT_MEMORY = 3
"""How many reviews of earlier episodes the system message carries."""
ROUND = "agent"
"""The store round the loop's episodes go to unless told otherwise."""


class ReviewMemory:
    r"""The texts of the last ``bound`` reviews, oldest first (Reflexion-style memory).

    Args:
        bound: How many reviews are kept (0: none).

    Example:
        >>> memory = ReviewMemory(2)
        >>> for n in range(3):
        ...     memory.add({"text": f"review {n}\n- Reuse steps 0-{n}."})
        >>> print(memory.render())
        <BLANKLINE>
        Reviews of your earlier attempts, most recent last:
        - review 1
          - Reuse steps 0-1.
        - review 2
          - Reuse steps 0-2.
        <BLANKLINE>
    """

    def __init__(self, bound: int = DEFAULT_MEMORY) -> None:
        if bound < 0:
            raise ConfigError(f"memory must be at least 0, got {bound}")
        self.texts: deque[str] = deque(maxlen=bound)

    def add(self, review: Mapping[str, Any] | None) -> None:
        """Keeps ``review``'s text (``Review.to_dict()``; empty or ``None``: nothing)."""
        if review and self.texts.maxlen:
            self.texts.append(str(review["text"]))

    def render(self) -> str:
        """The memory as the system message shows it (``""`` when empty)."""
        if not self.texts:
            return ""
        items = "".join("- " + text.replace("\n", "\n  ") + "\n" for text in self.texts)
        return f"\nReviews of your earlier attempts, most recent last:\n{items}"


class _Chat:
    """Builds one episode's messages from a template (the loop and the export share it)."""

    def __init__(self, template: PromptTemplate, env: gym.Env[Any, Any], seed: int | None) -> None:
        self.template = template
        spec = env.spec
        self.env_id = spec.id if spec is not None else type(env.unwrapped).__name__
        self.meanings: tuple[str, ...] = tuple(_unwrapped(env).action_meanings)
        self._fields = {
            "env_id": self.env_id,
            "actions": "".join(f"- {m}\n" for m in self.meanings),
            "episode": json.dumps(
                {
                    "kind": "episode",
                    "env_id": self.env_id,
                    "seed": seed,
                    "kwargs": dict(spec.kwargs) if spec is not None else {},
                },
                sort_keys=True,
            ),
        }

    def system(self, memory: ReviewMemory) -> dict[str, str]:
        return self._messages(memory=memory.render(), observation="", hint="")[0]

    def user(self, observation: Any, hint: Mapping[str, Any] | None) -> dict[str, str]:
        text = observation if isinstance(observation, str) else observation["text"]
        hint_text = f"\n\n{hint['text']}" if hint else ""
        return self._messages(memory="", observation=text, hint=hint_text)[1]

    def assistant(self, action: Any) -> dict[str, str]:
        name = self.meanings[action] if isinstance(action, int) else str(action)
        return {"role": "assistant", "content": name}

    def _messages(self, **fields: str) -> list[dict[str, str]]:
        return self.template.messages(**self._fields, **fields)


@dataclass
class AgentResult:
    """One episode the agent played.

    Attributes:
        seed: The reset seed.
        success: Whether the episode reached its goal.
        outcome: ``info["outcome"]`` at the end (``""`` when the env says none).
        length: Steps taken.
        episode_return: Sum of the rewards.
        invalid_replies: Replies that named no action.
        model_errors: Calls that failed (timeout, HTTP error, no server).
        fallbacks: Steps that took the fallback action.
        hints: Hints given during the episode.
        review: The review on the episode's last step (``Review.to_dict()``),
            or ``None`` when none came in time.
        messages: The chat, system message first.
    """

    seed: int
    success: bool
    outcome: str
    length: int
    episode_return: float
    invalid_replies: int
    model_errors: int
    fallbacks: int
    hints: int
    review: dict[str, Any] | None
    messages: list[dict[str, str]]


class ChatAgent:
    """Plays episodes of a text env by asking a chat model for each action.

    Args:
        client: The chat model.
        memory: How many reviews of earlier episodes the prompt carries.
        retries: How many times a reply that names no action (or a failed
            call) is asked again before the fallback action is taken.
        fallback: The action taken when no reply named one (default ``"wait"``
            when the env has it, else its first action).
        template: The prompt template (default: the built-in ``agent``).

    Example:
        >>> agent = ChatAgent(ChatClient("http://127.0.0.1:8000/v1", "qwen2.5-1.5b-instruct"))
        >>> agent.memory.render()
        ''
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        memory: int = DEFAULT_MEMORY,
        retries: int = 1,
        fallback: str | None = None,
        template: str | os.PathLike[str] | None = None,
    ) -> None:
        if retries < 0:
            raise ConfigError(f"retries must be at least 0, got {retries}")
        self.client = client
        self.memory = ReviewMemory(memory)
        self.retries = retries
        self.fallback = fallback
        self.template = PromptTemplate.load(template or "agent")

    def play(self, env: gym.Env[Any, Any], seed: int) -> AgentResult:
        """Plays one episode from ``reset(seed=seed)``; reviews that come go to the memory.

        Raises:
            InvalidAction: The fallback action is not one of the env's.
        """
        obs, info = env.reset(seed=seed)
        chat = _Chat(self.template, env, seed)
        fallback = _fallback_action(env, self.fallback)
        counts = dict.fromkeys(("invalid_replies", "model_errors", "fallbacks", "hints"), 0)
        self.memory.add(_feedback(info, "review"))  # a late review of an earlier episode
        messages = [chat.system(self.memory)]
        length, total, done = 0, 0.0, False
        while not done:
            hint = _feedback(info, "guide")
            counts["hints"] += hint is not None
            messages.append(chat.user(obs, hint))
            action = self._act(env, messages, counts)
            if action is None:
                action = fallback
                counts["fallbacks"] += 1
            messages.append(chat.assistant(action))
            obs, reward, terminated, truncated, info = env.step(action)
            length, total, done = length + 1, total + float(reward), terminated or truncated
            self.memory.add(_feedback(info, "review"))  # the next episodes' prompts carry it
        return AgentResult(
            seed=seed,
            success=bool(info.get(IS_SUCCESS, False)),
            outcome=str(info.get(OUTCOME, "")),
            length=length,
            episode_return=total,
            review=_feedback(info, "review"),
            messages=messages,
            **counts,
        )

    def _act(
        self, env: gym.Env[Any, Any], messages: list[dict[str, str]], counts: dict[str, int]
    ) -> Any:
        """The action the model names, or ``None`` when it named none within the retries."""
        ask = messages
        for _ in range(self.retries + 1):
            try:
                reply = self.client.reply(ask)
            except ChatError:
                counts["model_errors"] += 1
                continue
            try:
                return _parse_reply(env, reply)
            except InvalidAction:
                counts["invalid_replies"] += 1
                ask = [
                    *messages,
                    {"role": "assistant", "content": reply},
                    {
                        "role": "user",
                        "content": f"{reply.strip()[:80]!r} is not an action. Reply with exactly "
                        "one action from the list, and nothing else.",
                    },
                ]
        return None


def _feedback(info: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """``info["feedback"][kind]`` when it holds a hint or review, else ``None``."""
    value = info.get(FEEDBACK, {}).get(kind)
    return value or None


def _parse_reply(env: gym.Env[Any, Any], reply: str) -> Any:
    """The action a reply names: the whole reply, else its last non-empty line.

    Raises:
        InvalidAction: Neither names an action.
    """
    parse = _unwrapped(env).parse_action
    text = reply.strip().strip("`'\".")
    try:
        return parse(text)
    except InvalidAction:
        lines = [line.strip().strip("`'\".") for line in text.splitlines() if line.strip()]
        if len(lines) < 2:
            raise
        return parse(lines[-1])


def _fallback_action(env: gym.Env[Any, Any], fallback: str | None) -> Any:
    unwrapped = _unwrapped(env)
    if fallback is None:
        fallback = "wait" if "wait" in unwrapped.action_meanings else unwrapped.action_meanings[0]
    return unwrapped.parse_action(fallback)


def _unwrapped(env: gym.Env[Any, Any]) -> Any:
    """The base env: its ``action_meanings`` and ``parse_action`` (checked by :func:`_text_env`)."""
    return env.unwrapped


def _text_env(env_id: str, env_kwargs: Mapping[str, Any]) -> gym.Env[Any, Any]:
    """``gym.make`` with text observations (``obs_mode="text"`` unless the kwargs say ``both``).

    Raises:
        FeedbackGymError: The env has no text observation or no action words.
    """
    try:
        env = gym.make(env_id, **{"obs_mode": "text", **env_kwargs})
    except TypeError as error:  # no obs_mode, or another unknown keyword
        raise FeedbackGymError(f"{env_id} cannot be made for an LLM agent: {error}") from None
    space = env.observation_space
    has_text = isinstance(space, spaces.Text) or (
        isinstance(space, spaces.Dict) and "text" in space.spaces
    )
    unwrapped = env.unwrapped
    if not has_text or not hasattr(unwrapped, "action_meanings"):
        env.close()
        raise FeedbackGymError(
            f"{env_id} has no text observation or no action_meanings/parse_action: an LLM "
            "agent needs both (obs_mode text or both)"
        )
    return env


def run_agent(
    env_id: str,
    client: ChatClient,
    *,
    episodes: int,
    seed: int = 0,
    store: str | os.PathLike[str] | None = None,
    round: str = ROUND,
    env_kwargs: Mapping[str, Any] | None = None,
    guide: Guide | str | None = None,
    reviewer: Reviewer | str | None = None,
    deadline_ms: float = DEFAULT_TIMEOUT_S * 1000,
    memory: int = DEFAULT_MEMORY,
    retries: int = 1,
    fallback: str | None = None,
    template: str | os.PathLike[str] | None = None,
) -> Iterator[AgentResult]:
    """Plays ``episodes`` episodes (seeds ``seed, seed + 1, ...``), yielding each as it ends.

    Args:
        env_id: A registered id whose env has text observations (OpsIncident).
        client: The agent's chat model.
        episodes: How many episodes.
        seed: The first episode's seed.
        store: A trajectory store directory to record to (``None``: no recording).
        round: The store round the episodes go to.
        env_kwargs: More keyword arguments for ``gym.make``.
        guide: The guide (an object, a ``"module:Class"`` name, or ``None``
            for the built-in one).
        reviewer: The reviewer (likewise).
        deadline_ms: How long a step waits for an off-step guide or reviewer.
        memory: Reviews of earlier episodes the prompt carries.
        retries: Asks again after a reply that names no action.
        fallback: The action taken when none was named.
        template: The agent's prompt template (default: the built-in one).

    Raises:
        FeedbackGymError: The env has no text observation, or a generator or
            the fallback is bad.

    Example:
        >>> client = ChatClient("http://127.0.0.1:9/v1", "m", timeout_s=0.5)
        >>> [r.fallbacks == r.length for r in run_agent(
        ...     "feedbackgym/OpsIncidentEasy-v0", client, episodes=1, retries=0,
        ...     env_kwargs={"max_episode_steps": 3})]  # no server there: every step falls back
        [True]
    """
    from feedbackgym.wrappers import AddGuide, AddReview, RecordTrajectories

    agent = ChatAgent(client, memory=memory, retries=retries, fallback=fallback, template=template)
    env = _text_env(env_id, env_kwargs or {})
    try:
        env = AddGuide(env, channels=("info",), guide=guide, dropout=0.0, deadline_ms=deadline_ms)
        env = AddReview(env, channels=("info",), reviewer=reviewer, deadline_ms=deadline_ms)
        if store is not None:
            env = RecordTrajectories(env, store, task_id=env_id, round=round)
        for n in range(episodes):
            yield agent.play(env, seed + n)
    finally:
        env.close()


def chat_records(
    episodes: Iterable[Episode], *, memory: int = DEFAULT_MEMORY
) -> Iterator[dict[str, Any]]:
    """The stored episodes as chats: the messages the agent loop sent, and its answers.

    Memory is rebuilt as the loop kept it: reviews of the earlier episodes of
    the same shard, task and round, in order, ``memory`` at most. Each record
    holds ``task_id``, ``round``, ``seed``, ``success``, ``outcome``,
    ``episode_return``, ``length``, ``messages`` (system, then user and
    assistant in turn) and ``review`` (the episode's own review, or ``None``).

    Args:
        episodes: Episodes in the order they were recorded (per shard).
        memory: The agent's memory bound.
    """
    from feedbackgym.datasets.episode import FeedbackType

    memories: dict[tuple[str, str, str], ReviewMemory] = {}
    template = PromptTemplate.load("agent")
    for episode in episodes:
        meta = episode.meta
        mem = memories.setdefault((meta.shard, meta.task_id, meta.round), ReviewMemory(memory))
        env = _stored_env(episode)
        try:
            env.reset(seed=meta.seed)  # some envs word their actions per episode
            chat = _Chat(template, env, meta.seed)
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
        return _text_env(spec.id, spec.kwargs)
    return _text_env(meta.task_id, {})


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
) -> int:
    """Writes a store's episodes as JSONL chats (see :func:`chat_records`); returns how many.

    Args:
        store: The trajectory store.
        out: A file path, or an open text file.
        memory: The agent's memory bound, to rebuild its prompts.
        round: Only this round's episodes (default: all).

    Raises:
        StoreError: The store cannot be read.
    """
    from feedbackgym.datasets import TrajectoryStore

    filters = {} if round is None else {"round": round}
    episodes = TrajectoryStore(store).iter_episodes(**filters)  # type: ignore[arg-type]
    if isinstance(out, (str, os.PathLike)):
        with Path(out).open("w") as file:
            return _write(chat_records(episodes, memory=memory), file)
    return _write(chat_records(episodes, memory=memory), out)


def _write(records: Iterable[dict[str, Any]], file: IO[str]) -> int:
    count = 0
    for record in records:
        file.write(json.dumps(record) + "\n")
        count += 1
    return count


def result_dict(result: AgentResult) -> dict[str, Any]:
    """``result`` as JSON-safe data, without its messages."""
    data = asdict(result)
    del data["messages"]
    return data
