"""Prompt templates: a system and a user message with ``$name`` placeholders.

A template is a text file: the system message, a line ``---``, the user
message (:class:`string.Template` placeholders). The built-in ones (``guide``,
``review``, ``agent``) ship in ``feedbackgym/chat/prompts/`` with the packaged
model's turn format (``gemma.jinja``): every prompt of the
project lives in that one folder.
"""

from __future__ import annotations

import os
import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import ClassVar

from feedbackgym.errors import ConfigError

__all__ = ["PromptTemplate", "prompt_file"]


def prompt_file(name: str) -> str:
    """The text of the shipped prompt file ``name`` (in ``feedbackgym/chat/prompts/``).

    Example:
        >>> prompt_file("agent.txt").count("---") >= 1
        True
    """
    return resources.files("feedbackgym.chat").joinpath(f"prompts/{name}").read_text()


@dataclass(frozen=True)
class PromptTemplate:
    """A system and a user message with ``$name`` placeholders.

    Attributes:
        system: The system message's template.
        user: The user message's template.
        source: Where it was read from (for error messages).

    Example:
        >>> template = PromptTemplate.load("agent")
        >>> sorted(template.placeholders())
        ['actions', 'env_id', 'episode', 'hint', 'memory', 'observation']
    """

    system: string.Template
    user: string.Template
    source: str

    BUILT_IN: ClassVar[tuple[str, ...]] = ("guide", "review", "agent")

    @classmethod
    def load(cls, name: str | os.PathLike[str]) -> PromptTemplate:
        """A built-in template by name (``"guide"``, ``"review"``, ``"agent"``) or a file.

        Raises:
            ConfigError: The file cannot be read or has no ``---`` line.
        """
        if name in cls.BUILT_IN:
            text = prompt_file(f"{name}.txt")
            source = f"the built-in {name} prompt"
        else:
            source = os.fspath(name)
            try:
                text = Path(source).read_text()
            except OSError as error:
                raise ConfigError(f"prompt template {source}: {error.strerror}") from None
        system, sep, user = text.partition("\n---\n")
        if not sep:
            raise ConfigError(
                f"prompt template {source}: no '---' line between the system and user messages"
            )
        return cls(string.Template(system.strip()), string.Template(user), source)

    def placeholders(self) -> set[str]:
        """The ``$name`` placeholders of both messages."""
        return set(self.system.get_identifiers()) | set(self.user.get_identifiers())

    def messages(self, **fields: str) -> list[dict[str, str]]:
        """The chat messages with the placeholders filled in.

        Raises:
            ConfigError: The template has a placeholder ``fields`` lacks.
        """
        try:
            return [
                {"role": "system", "content": self.system.substitute(fields)},
                {"role": "user", "content": self.user.substitute(fields).strip()},
            ]
        except KeyError as error:
            raise ConfigError(
                f"prompt template {self.source}: unknown placeholder ${error.args[0]} "
                f"(known: {', '.join(sorted(fields))})"
            ) from None
        except ValueError as error:
            raise ConfigError(f"prompt template {self.source}: {error}") from None
