r"""The markup around an episode's turns, as the LLM trainer tokenizes them.

The messages themselves are :class:`~feedbackgym.language.episode_chat.EpisodeChat`'s
(the agent loop's), so a trained adapter reads in training what
``feedbackgym agent`` shows it. :class:`TurnFormat` is the markup around
them, read from a template file (``feedbackgym/chat/prompts/turns.json``: Gemma's turns,
which the packaged model was trained with).

Example:
    >>> turns = TurnFormat.load()
    >>> turns.stop
    '<end_of_turn>'
    >>> print(turns.next_text("Alerts: none"), end="")
    <BLANKLINE>
    <start_of_turn>user
    Alerts: none<end_of_turn>
    <start_of_turn>model
"""

from __future__ import annotations

import json
import os
import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from feedbackgym.errors import ConfigError

__all__ = ["TurnFormat"]


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
            text = resources.files("feedbackgym.chat").joinpath("prompts/turns.json")
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
