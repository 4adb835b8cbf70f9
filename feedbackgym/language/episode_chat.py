r"""One episode's chat messages: the system message, each observation's turn, each action.

The agent loop (``feedbackgym agent``), the chat export, the supervised
warm-up and the LLM trainer all word an episode through :class:`EpisodeChat`,
so a model reads in training exactly what it reads when it plays. The system
message (the built-in ``agent`` prompt of
:class:`~feedbackgym.chat.PromptTemplate`, or your own) names the
env, lists its actions, carries the reviews of earlier attempts and ends
with the episode (env id, seed, keyword arguments) as JSON. Each user turn
is an observation with the hint given with it, if any; each assistant turn
the action taken, as the env words it.

With ``turns="delta"`` (the default) the first user turn carries the whole
observation and each later one only the lines that were not in the
observation before it (the chat above holds the rest): an OpsIncident easy
episode is then about a third of the tokens, each prompt extends the one
before it (a server reuses its cache, a warm-up trains on the episode as
one sequence). ``turns="full"`` repeats every observation whole.

Example:
    >>> chat = EpisodeChat(PromptTemplate.load("agent"), "feedbackgym/OpsIncidentEasy-v0",
    ...                    ("wait", "escalate"), seed=3)
    >>> print(chat.user("Step 0\nAlerts: db", {"text": "Hint: inspect db."})["content"])
    Step 0
    Alerts: db
    <BLANKLINE>
    Hint: inspect db.
    >>> chat.user("Step 1\nAlerts: db", None)["content"]
    'Step 1'
    >>> chat.assistant(1)
    {'role': 'assistant', 'content': 'escalate'}
"""

from __future__ import annotations

import functools
import json
from collections import deque
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from feedbackgym.chat import PromptTemplate
from feedbackgym.errors import ConfigError

__all__ = [
    "DEFAULT_MEMORY",
    "DEFAULT_TURNS",
    "TURN_MODES",
    "EpisodeChat",
    "ReviewMemory",
    "action_choices",
    "agent_template",
    "check_turns",
    "new_lines",
]

DEFAULT_MEMORY = 3
"""How many reviews of earlier episodes the system message carries."""


def action_choices(env: gym.Env[Any, Any]) -> tuple[str, ...]:
    """The episode's actions in words, less those the env's ``action_masks`` rules out.

    OpsIncident-v1 pads its action space to the preset's most services; a language
    model is offered only the actions on services the episode has.

    Example:
        >>> import feedbackgym
        >>> from feedbackgym.envs.incident import IncidentEnv
        >>> env = IncidentEnv("easy")
        >>> _ = env.reset(seed=0)
        >>> len(action_choices(env)) == 11 * len(env.services) + 3
        True
    """
    unwrapped: Any = env.unwrapped
    meanings = tuple(unwrapped.action_meanings)
    masks = getattr(unwrapped, "action_masks", None)
    if masks is None:
        return meanings
    return tuple(m for m, live in zip(meanings, masks(), strict=True) if live)


TURN_MODES = ("delta", "full")
"""What a later user turn carries: the new lines of the observation, or all of it."""
DEFAULT_TURNS = "delta"
"""The turn mode the agent, the warm-up and the trainer use unless told otherwise."""


@functools.cache
def agent_template() -> PromptTemplate:
    """The built-in ``agent`` prompt template, loaded once a process.

    Example:
        >>> agent_template() is agent_template()
        True
    """
    return PromptTemplate.load("agent")


def check_turns(turns: str) -> str:
    """``turns`` when it is one of :data:`TURN_MODES`.

    Raises:
        ConfigError: It is not.

    Example:
        >>> check_turns("whole")
        Traceback (most recent call last):
        ...
        feedbackgym.errors.ConfigError: turns must be one of delta, full, got 'whole'
    """
    if turns not in TURN_MODES:
        raise ConfigError(f"turns must be one of {', '.join(TURN_MODES)}, got {turns!r}")
    return turns


def new_lines(previous: str, current: str) -> str:
    r"""The lines of ``current`` that ``previous`` does not have, in order.

    Example:
        >>> new_lines("Step 1\nAlerts: db", "Step 2\nAlerts: db\n> wait")
        'Step 2\n> wait'
    """
    seen = set(previous.splitlines())
    return "\n".join(line for line in current.splitlines() if line not in seen)


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

    def render(self, limit: int | None = None) -> str:
        """The memory as the system message shows it (``""`` when empty).

        Args:
            limit: Show only the ``limit`` most recent reviews (default: all kept).
        """
        texts = list(self.texts)[len(self.texts) - limit :] if limit is not None else self.texts
        if not texts or limit == 0:
            return ""
        items = "".join("- " + text.replace("\n", "\n  ") + "\n" for text in texts)
        return f"\nReviews of your earlier attempts, most recent last:\n{items}"


class EpisodeChat:
    """Builds one episode's messages from a prompt template.

    Args:
        template: The prompt template (system and user messages).
        env_id: The env's id (the system message names it).
        meanings: The env's actions in words, by index.
        seed: The episode's seed (the system message's episode JSON has it).
        kwargs: The env's keyword arguments (likewise).
        turns: ``"delta"`` or ``"full"`` (see the module docstring).
        choices: The actions the system message lists (default: ``meanings``;
            :func:`action_choices` leaves out those the env masks).

    Raises:
        ConfigError: An unknown ``turns``.
    """

    def __init__(
        self,
        template: PromptTemplate,
        env_id: str,
        meanings: tuple[str, ...],
        seed: int | None,
        kwargs: Mapping[str, Any] | None = None,
        *,
        turns: str = DEFAULT_TURNS,
        choices: tuple[str, ...] | None = None,
    ) -> None:
        self.turns = check_turns(turns)
        self.template = template
        self.env_id = env_id
        self.meanings = meanings
        self._fields = {
            "env_id": env_id,
            "actions": "".join(f"- {m}\n" for m in (meanings if choices is None else choices)),
            "episode": json.dumps(
                {"kind": "episode", "env_id": env_id, "seed": seed, "kwargs": dict(kwargs or {})},
                sort_keys=True,
            ),
        }
        self._previous: str | None = None

    @classmethod
    def for_env(
        cls,
        template: PromptTemplate,
        env: gym.Env[Any, Any],
        seed: int | None,
        *,
        turns: str = DEFAULT_TURNS,
    ) -> EpisodeChat:
        """The chat of an episode of ``env`` (its spec's id and kwargs, its actions now)."""
        spec = env.spec
        unwrapped: Any = env.unwrapped
        return cls(
            template,
            spec.id if spec is not None else type(unwrapped).__name__,
            tuple(unwrapped.action_meanings),
            seed,
            spec.kwargs if spec is not None else {},
            turns=turns,
            choices=action_choices(env),
        )

    def system(
        self, memory: ReviewMemory | None = None, limit: int | None = None
    ) -> dict[str, str]:
        """The system message, with the ``limit`` latest reviews of ``memory`` (default: all)."""
        shown = memory.render(limit) if memory is not None else ""
        return self._messages(memory=shown, observation="", hint="")[0]

    def user(self, observation: Any, hint: Mapping[str, Any] | None) -> dict[str, str]:
        """The next user turn: the observation (whole, or its new lines) and the hint."""
        text = observation if isinstance(observation, str) else str(observation["text"])
        shown = text
        if self.turns == "delta" and self._previous is not None:
            shown = new_lines(self._previous, text)
        self._previous = text
        hint_text = f"\n\n{hint['text']}" if hint else ""
        return self._messages(memory="", observation=shown, hint=hint_text)[1]

    def assistant(self, action: Any) -> dict[str, str]:
        """The reply that took ``action`` (an index, or the action's words)."""
        name = self.meanings[action] if isinstance(action, int) else str(action)
        return {"role": "assistant", "content": name}

    def _messages(self, **fields: str) -> list[dict[str, str]]:
        return self.template.messages(**self._fields, **fields)
