"""An LLM agent loop: a chat model plays text episodes, with hints and reviews in its prompt.

Each episode is one chat. The system message (the built-in ``agent`` prompt,
or your own template) names the env, lists its actions, carries the texts of
the last ``memory`` reviews of earlier episodes (Reflexion-style memory) and
ends with the episode (env id, seed, keyword arguments) as JSON; each user
message is an observation (by default only its lines that are new since the
last one) with the hint given with it, if any; each assistant message is the
action taken, as the env words it (:mod:`~feedbackgym.language.episode_chat`).

Each reply is asked for as exactly one of the env's current actions (the
client's ``constrain``: a llama.cpp grammar by default, see
:meth:`~feedbackgym.chat.ChatClient.constraint`), so a server that
honours it cannot answer anything else. Servers that ignore the field are
still parsed: a reply that names no action is asked again (``retries``
times, the wrong reply shown), then the ``fallback`` action is taken; both
are counted. The prompt is the system message and the last steps that fit
the model's context (:class:`~feedbackgym.language.prompt_window.PromptWindow`),
so no episode outgrows it; the episode's whole chat is kept and recorded.

A server that fails ``max_errors`` calls in a row (down, hanging past the
timeout, answering errors) stops the run: the episode in flight is truncated
at that step and recorded, then :class:`ModelUnavailable` is raised. Never a
hang, never a lost episode.

The env runs with :class:`~feedbackgym.wrappers.AddGuide` and
:class:`~feedbackgym.wrappers.AddReview` on their ``info`` channel and,
given a store, :class:`~feedbackgym.wrappers.RecordTrajectories` outermost,
so every observation, action, reward, hint and review goes to the HDF5 store.
:func:`~feedbackgym.language.chat_export.export_chat` turns stored episodes back
into the same chats (JSONL, one episode a line) for fine-tuning.

Command line: ``feedbackgym agent --env ID`` (the packaged model, served locally; or
``--base-url URL --model NAME``) and ``feedbackgym datasets export-chat PATH``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import gymnasium as gym
from gymnasium import spaces

from feedbackgym.chat import DEFAULT_TIMEOUT_S, ChatClient, PromptTemplate, Replier
from feedbackgym.core import DEFAULT_HINT_LEVEL
from feedbackgym.errors import ChatError, ConfigError, FeedbackGymError, InvalidAction, ReplyError
from feedbackgym.language.agent_arms import DEFAULT_AGENT_ARM, AgentArm, LabelAttempt, agent_arm
from feedbackgym.language.episode_chat import (
    DEFAULT_MEMORY,
    DEFAULT_TURNS,
    EpisodeChat,
    ReviewMemory,
    action_choices,
    check_turns,
)
from feedbackgym.language.prompt_window import TURN_TOKENS, PromptWindow, token_counter
from feedbackgym.protocol import FEEDBACK, IS_SUCCESS, OUTCOME

if TYPE_CHECKING:
    from feedbackgym.feedback.generators import Guide, Reviewer

__all__ = [
    "DEFAULT_MAX_ERRORS",
    "DEFAULT_MEMORY",
    "REPLY_TOKENS",
    "AgentResult",
    "ChatAgent",
    "ModelUnavailable",
    "ReviewMemory",
    "prompt_budget",
    "result_dict",
    "run_agent",
    "text_env",
]

ROUND = "agent"
"""The store round the loop's episodes go to unless told otherwise."""
REPLY_TOKENS = 48
"""The most tokens an action reply may take (an action is a few words)."""
DEFAULT_MAX_ERRORS = 3
"""Failed calls in a row after which the model is taken to be down."""
_CORRECTION_TOKENS = 64
"""Room for the retry's correction message (the wrong reply is a reply's room more)."""


class ModelUnavailable(ChatError):
    """The model failed ``max_errors`` calls in a row: the episode in flight was truncated there."""


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
        messages: The chat, system message first (the whole episode; each
            prompt held its last steps that fit).
        stopped: Why the episode was cut short (the model stopped answering),
            or ``""``.
        arm: The feedback arm it was played in (:mod:`~feedbackgym.language.agent_arms`).
        attempt: The attempt at its seed, counted from 1.
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
    stopped: str = ""
    arm: str = DEFAULT_AGENT_ARM
    attempt: int = 1


class _Truncation(gym.Wrapper[Any, Any, Any, Any]):
    """Ends the episode on the next step when told to (the model stopped answering)."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.pending = False

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.pending = False
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated or self.pending, info


def _truncation(env: gym.Env[Any, Any]) -> _Truncation | None:
    while isinstance(env, gym.Wrapper):
        if isinstance(env, _Truncation):
            return env
        env = env.env
    return None


class ChatAgent:
    """Plays episodes of a text env by asking a chat model for each action.

    Args:
        client: The chat model (a :class:`~feedbackgym.chat.ChatClient`, or any
            :class:`~feedbackgym.chat.Replier`).
        memory: How many reviews of earlier episodes the prompt carries.
        arm: The feedback arm (:data:`~feedbackgym.language.agent_arms.AGENT_ARMS`):
            whether hints go into the prompt on an attempt, and which reviews
            the system message carries (the same seed's earlier attempts, or
            any earlier episode's). A late review goes to the seed of the
            episode it names (``review_episode``, counted over this agent's
            episodes).
        retries: How many times a reply that names no action (or a failed
            call) is asked again before the fallback action is taken.
        fallback: The action taken when no reply named one (default ``"wait"``
            when the env has it, else its first action).
        template: The prompt template (default: the built-in ``agent``).
        window: Sizes each prompt to the model's context (``None``: the whole chat).
        max_errors: Failed calls in a row after which the model is taken to be
            down (see :class:`ModelUnavailable`).
        reply_tokens: The most tokens a reply may take.
        turns: What a later user turn carries: ``"delta"`` (the observation's
            new lines) or ``"full"`` (:mod:`~feedbackgym.language.episode_chat`).

    Attributes:
        down: Why the model is taken to be down (``""`` while it answers).
        memory: The reviews kept for arms that carry any episode's
            (``guide+review``); other arms keep one memory per seed.

    Example:
        >>> agent = ChatAgent(ChatClient("http://127.0.0.1:8000/v1", "qwen2.5-1.5b-instruct"))
        >>> agent.memory.render()
        ''
    """

    def __init__(
        self,
        client: Replier,
        *,
        memory: int = DEFAULT_MEMORY,
        arm: str = DEFAULT_AGENT_ARM,
        retries: int = 1,
        fallback: str | None = None,
        template: str | os.PathLike[str] | None = None,
        window: PromptWindow | None = None,
        max_errors: int = DEFAULT_MAX_ERRORS,
        reply_tokens: int = REPLY_TOKENS,
        turns: str = DEFAULT_TURNS,
    ) -> None:
        if retries < 0 or max_errors < 1 or reply_tokens < 1:
            raise ConfigError(
                "retries must be at least 0, max_errors and reply_tokens at least 1; got "
                f"{retries}, {max_errors}, {reply_tokens}"
            )
        self.client = client
        self.arm: AgentArm = agent_arm(arm)
        self.memory = ReviewMemory(memory)
        self._by_seed: dict[int | None, ReviewMemory] = {}
        self._seeds: list[int | None] = []
        """The seed of each episode played, by number (what ``review_episode`` counts)."""
        self.retries = retries
        self.fallback = fallback
        self.template = PromptTemplate.load(template or "agent")
        self.window = window
        self.max_errors = max_errors
        self.reply_tokens = reply_tokens
        self.turns = check_turns(turns)
        self.down = ""
        self._errors_in_row = 0

    @classmethod
    def within(cls, client: ChatClient, context: int | None, **settings: Any) -> ChatAgent:
        """An agent whose prompts keep within the model's ``context`` (``None``: no bound).

        The prompt budget is :func:`prompt_budget`'s, counted by the server's
        tokenizer when it has an endpoint for it, else bounded by UTF-8 bytes;
        ``settings`` are the constructor's.
        """
        window = None
        if context is not None:
            counter = token_counter(client.base_url, client.model, timeout_s=client.timeout_s)
            window = PromptWindow(prompt_budget(context), counter)
        return cls(client, window=window, **settings)

    def play_seeds(
        self,
        attempt_env: Callable[[int], gym.Env[Any, Any]],
        *,
        episodes: int,
        seed: int = 0,
        attempts: int = 1,
        cut_short: Callable[[AgentResult], str],
    ) -> Iterator[AgentResult]:
        """Plays ``episodes`` seeds (``seed``, ``seed + 1``, ...) ``attempts`` times each.

        Args:
            attempt_env: The env an attempt (counted from 1) plays.
            episodes: How many seeds.
            seed: The first seed.
            attempts: Episodes played at each seed, in a row.
            cut_short: What became of an episode the model's failure stopped (for the error).

        Raises:
            ConfigError: ``attempts`` is below 1.
            ModelUnavailable: (after yielding the episode it stopped) The model failed
                ``max_errors`` calls in a row.
        """
        if attempts < 1:
            raise ConfigError(f"attempts must be at least 1, got {attempts}")
        for n in range(episodes):
            for attempt in range(1, attempts + 1):
                result = self.play(attempt_env(attempt), seed + n, attempt)
                yield result
                if result.stopped:
                    raise ModelUnavailable(
                        f"the model stopped answering ({self.down}); the episode at seed "
                        f"{result.seed} {cut_short(result)}"
                    )

    def play(self, env: gym.Env[Any, Any], seed: int, attempt: int = 1) -> AgentResult:
        """Plays one episode from ``reset(seed=seed)``; reviews that come go to the memory.

        The arm says whether this ``attempt`` (counted from 1) shows the env's
        hints, and which reviews the system message carries.

        When the model is down (:attr:`down`), no call is made: the episode is
        truncated at the next step when the env came from :func:`run_agent`,
        else played out with the fallback action.

        Raises:
            InvalidAction: The fallback action is not one of the env's.
            PromptTooLong: The system message and one step do not fit the window.
        """
        obs, info = env.reset(seed=seed)
        self._seeds.append(seed)
        chat = EpisodeChat.for_env(self.template, env, seed, turns=self.turns)
        fallback = _fallback_action(env, self.fallback)
        truncation = _truncation(env)
        counts = dict.fromkeys(("invalid_replies", "model_errors", "fallbacks", "hints"), 0)
        hints = self.arm.hints_on(attempt)
        self._remember(info)  # a late review of an earlier episode
        memory = self.memory_for(seed)
        hint = _feedback(info, "guide") if hints else None
        opening = chat.user(obs, hint)
        messages = [self._system(chat, memory, opening, counts)]
        first: dict[str, str] | None = opening
        if self.window is not None:
            self.window.reset()
        length, total, done, stopped = 0, 0.0, False, ""
        while not done:
            hint = _feedback(info, "guide") if hints else None
            counts["hints"] += hint is not None
            messages.append(first or chat.user(obs, hint))
            first = None
            action = None if self.down else self._act(env, messages, counts)
            if action is None:
                action = fallback
                counts["fallbacks"] += 1
            if self.down and not stopped:
                stopped = f"stopped at step {length}: {self.down}"
                if truncation is not None:
                    truncation.pending = True
            messages.append(chat.assistant(action))
            obs, reward, terminated, truncated, info = env.step(action)
            length, total, done = length + 1, total + float(reward), terminated or truncated
            self._remember(info)  # the next episodes' prompts carry it
        return AgentResult(
            seed=seed,
            success=bool(info.get(IS_SUCCESS, False)),
            outcome=str(info.get(OUTCOME, "")),
            length=length,
            episode_return=total,
            review=_feedback(info, "review"),
            messages=messages,
            stopped=stopped,
            arm=self.arm.name,
            attempt=attempt,
            **counts,
        )

    def memory_for(self, seed: int | None) -> ReviewMemory:
        """The reviews an episode at ``seed`` carries, as the arm says (empty for no reviews)."""
        if self.arm.memory == "all":
            return self.memory
        if self.arm.memory == "seed":
            return self._by_seed.setdefault(seed, ReviewMemory(self.memory.texts.maxlen or 0))
        return ReviewMemory(0)

    def _remember(self, info: Mapping[str, Any]) -> None:
        """Keeps a review that came in ``info``, in the memory of the seed it is about."""
        review = _feedback(info, "review")
        if review is None or self.arm.memory == "none":
            return
        episode = int(info.get(FEEDBACK, {}).get("review_episode", -1))
        seed = self._seeds[episode] if 0 <= episode < len(self._seeds) else self._seeds[-1]
        self.memory_for(seed).add(review)

    def _system(
        self,
        chat: EpisodeChat,
        memory: ReviewMemory,
        first: dict[str, str],
        counts: dict[str, int],
    ) -> dict[str, str]:
        """The system message, with as many reviews in memory as the window leaves room for."""
        system = chat.system(memory)
        if self.window is None or self.down:
            return system
        try:
            for limit in range(len(memory.texts) - 1, -1, -1):
                if self.window.size([system, first]) <= self.window.budget:
                    break
                system = chat.system(memory, limit)
        except ChatError as error:  # counting tokens asks the server too
            self._failed(error, counts)
        return system

    def _failed(self, error: ChatError, counts: dict[str, int]) -> bool:
        """Counts a failed call; whether the model is now taken to be down."""
        counts["model_errors"] += 1
        self._errors_in_row += 1
        if self._errors_in_row >= self.max_errors:
            self.down = f"{self._errors_in_row} calls in a row failed, the last: {error}"
        return bool(self.down)

    def _act(
        self, env: gym.Env[Any, Any], messages: list[dict[str, str]], counts: dict[str, int]
    ) -> Any:
        """The action the model names, or ``None`` when it named none within the retries.

        Counting the prompt's tokens asks the server too: a failure there is a failed call.
        """
        retry: list[dict[str, str]] = []
        choices = action_choices(env)
        for _ in range(self.retries + 1):
            try:
                prompt = self.window.fit(messages) if self.window is not None else messages
                reply = self.client.reply(
                    [*prompt, *retry], choices=choices, max_tokens=self.reply_tokens
                )
            except ReplyError:
                counts["invalid_replies"] += 1  # no text at all
                self._errors_in_row = 0
                continue
            except ChatError as error:
                if self._failed(error, counts):
                    return None
                continue
            self._errors_in_row = 0
            try:
                return _parse_reply(
                    env, _unquote(reply) if self.client.constrain == "json" else reply
                )
            except InvalidAction:
                counts["invalid_replies"] += 1
                retry = [
                    {"role": "assistant", "content": reply},
                    {
                        "role": "user",
                        "content": f"{reply.strip()[:80]!r} is not an action. Reply with exactly "
                        "one action from the list, and nothing else.",
                    },
                ]
        return None


def _unquote(reply: str) -> str:
    """A JSON string reply's text (the ``json`` constraint's form); other replies as they are."""
    try:
        value = json.loads(reply)
    except json.JSONDecodeError:
        return reply
    return value if isinstance(value, str) else reply


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


def text_env(env_id: str, env_kwargs: Mapping[str, Any]) -> gym.Env[Any, Any]:
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
    attempts: int = 1,
    arm: str = DEFAULT_AGENT_ARM,
    store: str | os.PathLike[str] | None = None,
    round: str = ROUND,
    env_kwargs: Mapping[str, Any] | None = None,
    guide: Guide | str | None = None,
    reviewer: Reviewer | str | None = None,
    level: str = DEFAULT_HINT_LEVEL,
    deadline_ms: float = DEFAULT_TIMEOUT_S * 1000,
    memory: int = DEFAULT_MEMORY,
    retries: int = 1,
    fallback: str | None = None,
    template: str | os.PathLike[str] | None = None,
    context: int | None = None,
    max_errors: int = DEFAULT_MAX_ERRORS,
    turns: str = DEFAULT_TURNS,
) -> Iterator[AgentResult]:
    """Plays ``episodes`` seeds (``seed, seed + 1, ...``) ``attempts`` times each, yielding each.

    Each seed is played ``attempts`` times in a row (attempt 1, 2, ...), in the
    feedback ``arm`` (:mod:`~feedbackgym.language.agent_arms`): the guide
    speaks only on the attempts the arm shows hints on, the reviewer only in
    arms that carry reviews (so an arm without them never asks for one), and
    each recorded episode's env spec names its arm and attempt
    (:class:`~feedbackgym.language.agent_arms.LabelAttempt`).

    Args:
        env_id: A registered id whose env has text observations (OpsIncident).
        client: The agent's chat model.
        episodes: How many seeds.
        seed: The first seed.
        attempts: Episodes played at each seed, in a row.
        arm: The feedback arm.
        store: A trajectory store directory to record to (``None``: no recording).
        round: The store round the episodes go to.
        env_kwargs: More keyword arguments for ``gym.make``.
        guide: The guide (an object, a ``"module:Class"`` name, or ``None``
            for the built-in one).
        reviewer: The reviewer (likewise).
        level: What hints and reviews disclose (``"phase"``, ``"target"``,
            ``"action"``: :mod:`feedbackgym.feedback.levels`), part of the result's label.
        deadline_ms: How long a step waits for an off-step guide or reviewer.
        memory: Reviews of earlier episodes the prompt carries.
        retries: Asks again after a reply that names no action.
        fallback: The action taken when none was named.
        template: The agent's prompt template (default: the built-in one).
        context: The model's context in tokens: each prompt keeps within it,
            less room for the reply and a retry (:func:`prompt_budget`),
            counted by the server's tokenizer when it has an endpoint for it,
            else bounded by UTF-8 bytes. ``None``: the whole chat each step.
        max_errors: Failed calls in a row that stop the run.
        turns: What a later user turn carries (``"delta"`` or ``"full"``).

    Raises:
        FeedbackGymError: The env has no text observation, or a generator,
            the arm or the fallback is bad.
        ModelUnavailable: (after yielding the episode it cut short) The model
            failed ``max_errors`` calls in a row.
        PromptTooLong: The system message and one step do not fit ``context``.

    Example:
        >>> client = ChatClient("http://127.0.0.1:9/v1", "m", timeout_s=0.5)
        >>> results = run_agent("feedbackgym/OpsIncidentEasy-v0", client, episodes=2, retries=0)
        >>> r = next(results)  # no server there: three failed calls, then the episode is cut short
        >>> r.length, r.model_errors, r.fallbacks, r.stopped[:20]
        (3, 3, 3, 'stopped at step 2: 3')
        >>> next(results)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        feedbackgym.language.agent_loop.ModelUnavailable: the model stopped answering...
    """
    from feedbackgym.wrappers import AddGuide, AddReview

    agent = ChatAgent.within(
        client,
        context,
        memory=memory,
        arm=arm,
        retries=retries,
        fallback=fallback,
        template=template,
        max_errors=max_errors,
        turns=turns,
    )
    env: gym.Env[Any, Any] = _Truncation(text_env(env_id, env_kwargs or {}))
    recorder = None
    try:
        env = hinted = AddGuide(
            env,
            channels=("info",),
            guide=guide,
            dropout=0.0,
            level=level,
            deadline_ms=deadline_ms,
        )
        env = reviewed = AddReview(
            env, channels=("info",), reviewer=reviewer, level=level, deadline_ms=deadline_ms
        )
        recorder = _Recorder(env, store, env_id, round)

        def attempt_env(attempt: int) -> gym.Env[Any, Any]:
            hinted.set_weight(1.0 if agent.arm.hints_on(attempt) else 0.0)
            reviewed.set_weight(1.0 if agent.arm.reviews else 0.0)
            return recorder.labelled(agent.arm.name, attempt)

        yield from agent.play_seeds(
            attempt_env,
            episodes=episodes,
            seed=seed,
            attempts=attempts,
            cut_short=lambda r: f"was cut short after {r.length} steps and recorded",
        )
    finally:
        if recorder is not None:
            recorder.close()
        env.close()


class _Recorder:
    """Records each episode of ``env`` to a store, its env spec naming its arm and attempt.

    A :class:`~feedbackgym.wrappers.RecordTrajectories` over a
    :class:`~feedbackgym.language.agent_arms.LabelAttempt` per episode, all on
    one store (the spec is read when the recorder is made).
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        store: str | os.PathLike[str] | None,
        task_id: str,
        round: str,
    ) -> None:
        from feedbackgym.datasets import TrajectoryStore

        self.env = env
        self.store = TrajectoryStore(store) if store is not None else None
        self.task_id = task_id
        self.round = round

    def labelled(self, arm: str, attempt: int) -> gym.Env[Any, Any]:
        """``env`` labelled with ``arm`` and ``attempt``, recorded when there is a store."""
        from feedbackgym.wrappers import RecordTrajectories

        labelled: gym.Env[Any, Any] = LabelAttempt(self.env, arm, attempt)
        if self.store is None:
            return labelled
        return RecordTrajectories(labelled, self.store, task_id=self.task_id, round=self.round)

    def close(self) -> None:
        """Closes the store (every finished episode is in it)."""
        if self.store is not None:
            self.store.close()


def prompt_budget(context: int, reply_tokens: int = REPLY_TOKENS) -> int:
    """The most tokens a prompt may take in a ``context``: less a reply, and a retry's room.

    Raises:
        ConfigError: Nothing is left for the prompt.

    Example:
        >>> prompt_budget(2048)
        1856
    """
    budget = context - 2 * reply_tokens - _CORRECTION_TOKENS - 2 * TURN_TOKENS - 16
    if budget < 1:
        raise ConfigError(f"a context of {context} tokens leaves no room for a prompt")
    return budget


def result_dict(result: AgentResult) -> dict[str, Any]:
    """``result`` as JSON-safe data, without its messages."""
    data = asdict(result)
    del data["messages"]
    return data
