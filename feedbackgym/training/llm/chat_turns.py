r"""An episode's chat as text: the turn markup, the system message, each user turn.

The system message is the agent loop's (the built-in ``agent`` prompt of
:class:`~feedbackgym.feedback.llm.PromptTemplate`: the env, its actions, the
reviews of earlier attempts, the episode as JSON), so a trained adapter reads
in training what ``feedbackgym agent`` shows it. Each user turn is an
observation with the hint given with it, if any. The first user turn carries
the whole observation; with ``turns="delta"`` (the default) each later one
carries only the lines that were not in the previous observation (the chat
above holds the rest), which keeps an episode's sequence short enough to
train on; ``turns="full"`` repeats every observation whole.

:class:`TurnFormat` is the markup around the messages, read from a template
file (``prompts/turns.json``: Gemma's turns, which the packaged model was
trained with).

Example:
    >>> turns = TurnFormat.load()
    >>> turns.stop
    '<end_of_turn>'
    >>> print(turns.next_text("Alerts: none"), end="")
    <BLANKLINE>
    <start_of_turn>user
    Alerts: none<end_of_turn>
    <start_of_turn>model
    >>> new_lines("Step 1\nAlerts: db", "Step 2\nAlerts: db\n> wait")
    'Step 2\n> wait'
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from feedbackgym.errors import ConfigError
from feedbackgym.feedback.llm import PromptTemplate
from feedbackgym.language.agent_loop import ReviewMemory

__all__ = ["TURN_MODES", "EpisodeText", "TurnFormat", "new_lines"]

TURN_MODES = ("delta", "full")
"""What a later user turn carries: the new lines of the observation, or all of it."""


@dataclass(frozen=True)
class TurnFormat:
    """The markup around an episode's messages.

    Attributes:
        opening: The start of the sequence up to the first reply (``$bos``,
            ``$system``, ``$user``).
        next: What follows a reply's stop, up to the next reply (``$user``).
        stop: What ends a reply (the model's end of turn).
        source: Where it was read from.
    """

    opening: string.Template
    next: string.Template
    stop: str
    source: str

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> TurnFormat:
        """The built-in markup (Gemma's turns), or the JSON file at ``path``.

        The file has ``opening``, ``next`` and ``stop`` strings.

        Raises:
            ConfigError: The file cannot be read, or lacks a field.
        """
        if path is None:
            text = resources.files("feedbackgym.training.llm").joinpath("prompts/turns.json")
            source, raw = "the built-in turns", text.read_text()
        else:
            source = os.fspath(path)
            try:
                raw = Path(source).read_text()
            except OSError as error:
                raise ConfigError(f"turn format {source}: {error.strerror}") from None
        try:
            data = json.loads(raw)
            return cls(
                string.Template(data["opening"]),
                string.Template(data["next"]),
                str(data["stop"]),
                source,
            )
        except (ValueError, KeyError, TypeError) as error:
            raise ConfigError(
                f"turn format {source}: needs 'opening', 'next' and 'stop' strings ({error})"
            ) from None

    def opening_text(self, bos: str, system: str, user: str) -> str:
        """The sequence's start: the system message and the first user turn, then the reply's."""
        return self.opening.substitute(bos=bos, system=system, user=user)

    def next_text(self, user: str) -> str:
        """After a reply's stop: the next user turn, then the reply's opening."""
        return self.next.substitute(user=user)


def new_lines(previous: str, current: str) -> str:
    """The lines of ``current`` that ``previous`` does not have, in order."""
    seen = set(previous.splitlines())
    return "\n".join(line for line in current.splitlines() if line not in seen)


class EpisodeText:
    r"""The texts of one episode's chat: the system message and each user turn.

    Args:
        env_id: The env's id (the system message names it).
        meanings: The env's actions in words.
        seed: The episode's seed (the system message's episode JSON has it).
        kwargs: The env's keyword arguments (likewise).
        memory: The reviews of earlier attempts the system message carries.
        turns: ``"delta"`` or ``"full"`` (see the module docstring).
        template: The agent's prompt template (default: the built-in one).

    Raises:
        ConfigError: An unknown ``turns``.

    Example:
        >>> text = EpisodeText("feedbackgym/OpsIncidentEasy-v0", ("wait",), 3)
        >>> print(text.user("Step 0", {"text": "Hint: inspect db."}))
        Step 0
        <BLANKLINE>
        Hint: inspect db.
        >>> text.user("Step 0\nStep 1", None)
        'Step 1'
    """

    def __init__(
        self,
        env_id: str,
        meanings: tuple[str, ...],
        seed: int,
        kwargs: Mapping[str, Any] | None = None,
        *,
        memory: ReviewMemory | None = None,
        turns: str = "delta",
        template: PromptTemplate | None = None,
    ) -> None:
        if turns not in TURN_MODES:
            raise ConfigError(f"turns must be one of {', '.join(TURN_MODES)}, got {turns!r}")
        self.turns = turns
        self.template = template or PromptTemplate.load("agent")
        self.memory = memory if memory is not None else ReviewMemory(0)
        self._fields = {
            "env_id": env_id,
            "actions": "".join(f"- {m}\n" for m in meanings),
            "episode": json.dumps(
                {"kind": "episode", "env_id": env_id, "seed": seed, "kwargs": dict(kwargs or {})},
                sort_keys=True,
            ),
        }
        self._previous: str | None = None

    def system(self) -> str:
        """The system message: the env, its actions, the reviews, the episode."""
        fields = {**self._fields, "memory": self.memory.render(), "observation": "", "hint": ""}
        return self.template.messages(**fields)[0]["content"]

    def user(self, observation: Any, hint: Mapping[str, Any] | None) -> str:
        """The next user turn: the observation (whole, or its new lines) and the hint."""
        text = observation if isinstance(observation, str) else str(observation["text"])
        shown = text
        if self.turns == "delta" and self._previous is not None:
            shown = new_lines(self._previous, text)
        self._previous = text
        fields = {
            **self._fields,
            "memory": "",
            "observation": shown,
            "hint": f"\n\n{hint['text']}" if hint else "",
        }
        return self.template.messages(**fields)[1]["content"]
