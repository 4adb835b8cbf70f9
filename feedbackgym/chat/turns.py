r"""The packaged model's turn format, written once: ``prompts/gemma.jinja``.

Gemma's chat turns (the packaged model's GGUF carries no chat template) live in
one Jinja template. The model server renders chats with it (llama-cpp-python's
``Jinja2ChatFormatter``, registered by
:func:`~feedbackgym.language.llama_process.register_chat_template`); the
supervised warm-up trains on :func:`render_chat`'s text; and the GRPO trainer,
which tokenizes an episode turn by turn, takes its :class:`TurnFormat` from the
same template (:meth:`TurnFormat.from_template` renders it around placeholders).

Example:
    >>> turns = TurnFormat.from_template()
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from feedbackgym.chat.template import prompt_file
from feedbackgym.errors import ConfigError

__all__ = ["CHAT_TEMPLATES", "TurnFormat", "chat_template", "render_chat", "template_tokens"]

CHAT_TEMPLATES = ("gemma",)
"""The chat templates shipped in ``feedbackgym/chat/prompts/`` (``NAME.jinja``)."""
_TEMPLATE_TOKENS = {"gemma": ("<bos>", "<end_of_turn>")}
"""Each template's BOS text and its end of a turn (where a reply stops)."""


def chat_template(name: str = "gemma") -> str:
    """The shipped template ``name``'s text.

    Raises:
        ValueError: No template has that name.

    Example:
        >>> "<start_of_turn>" in chat_template()
        True
    """
    if name not in CHAT_TEMPLATES:
        raise ValueError(f"no chat template {name!r} (known: {', '.join(CHAT_TEMPLATES)})")
    return prompt_file(f"{name}.jinja")


def template_tokens(name: str = "gemma") -> tuple[str, str]:
    """The shipped template ``name``'s BOS text and end of a turn.

    Example:
        >>> template_tokens()
        ('<bos>', '<end_of_turn>')
    """
    chat_template(name)  # a clear error for an unknown name
    return _TEMPLATE_TOKENS[name]


def render_chat(
    messages: Sequence[Mapping[str, str]], name: str = "gemma", *, bos: str | None = None
) -> str:
    """The prompt text the server makes of ``messages`` with the shipped template ``name``.

    Rendered as llama-cpp-python's ``Jinja2ChatFormatter`` renders it (a sandboxed
    Jinja2 environment with ``trim_blocks`` and ``lstrip_blocks``, the generation
    prompt added), without loading llama-cpp-python: the supervised warm-up
    trains on the very text the agent's prompts become.

    Args:
        messages: The chat.
        name: A shipped template.
        bos: The BOS text (default: the template's).

    Raises:
        ValueError: No template has that name.

    Example:
        >>> print(render_chat([{"role": "system", "content": "Act."},
        ...                    {"role": "user", "content": "Alerts: none"}]), end="")
        <bos><start_of_turn>user
        Act.
        <BLANKLINE>
        Alerts: none<end_of_turn>
        <start_of_turn>model
    """
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    text = chat_template(name)
    default_bos, end_of_turn = _TEMPLATE_TOKENS[name]
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return environment.from_string(text).render(
        messages=[dict(m) for m in messages],
        bos_token=default_bos if bos is None else bos,
        eos_token=end_of_turn,
        add_generation_prompt=True,
    )


_MARK = "\x00{}\x00"
"""Placeholders :meth:`TurnFormat.from_template` renders the template around."""


@dataclass(frozen=True)
class TurnFormat:
    """The markup around an episode's messages, as the trainer tokenizes them turn by turn.

    Attributes:
        opening: The start of the sequence up to the first reply (``$bos``,
            ``$system``, ``$user``).
        next: What follows a reply's stop, up to the next reply (``$user``).
        stop: What ends a reply (the model's end of turn).
        source: Where it came from.
    """

    opening: string.Template
    next: string.Template
    stop: str
    source: str

    @classmethod
    def from_template(cls, name: str = "gemma") -> TurnFormat:
        """The markup of the shipped chat template ``name``: the one the server renders.

        The template renders a chat of placeholders (a system message, a user turn,
        a reply, a user turn); the text before the reply is the opening, and what
        follows the reply's stop is the next turn's markup.

        Raises:
            ValueError: No template has that name.
        """
        marks = {key: _MARK.format(key) for key in ("bos", "system", "user", "reply", "next")}
        chat = [
            {"role": "system", "content": marks["system"]},
            {"role": "user", "content": marks["user"]},
            {"role": "assistant", "content": marks["reply"]},
            {"role": "user", "content": marks["next"]},
        ]
        text = render_chat(chat, name, bos=marks["bos"]).replace("$", "$$")
        before, after = text.split(marks["reply"])
        stop = template_tokens(name)[1]
        if not after.startswith(stop):
            raise ConfigError(f"chat template {name!r}: a reply is not followed by {stop!r}")
        for key in ("bos", "system", "user"):
            before = before.replace(marks[key], f"${key}")
        following = after[len(stop) :].replace(marks["next"], "$user")
        return cls(string.Template(before), string.Template(following), stop, f"{name}.jinja")

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> TurnFormat:
        """The shipped template's markup (Gemma's turns), or a JSON file's at ``path``.

        A file (for a model of another family) has ``opening``, ``next`` and ``stop``
        strings, placeholders as in the attributes.

        Raises:
            ConfigError: The file cannot be read, or lacks a field.

        Example:
            >>> TurnFormat.load().next.template == TurnFormat.from_template().next.template
            True
        """
        if path is None:
            return cls.from_template()
        source = os.fspath(path)
        try:
            data = json.loads(Path(source).read_text())
            return cls(
                string.Template(data["opening"]),
                string.Template(data["next"]),
                str(data["stop"]),
                source,
            )
        except OSError as error:
            raise ConfigError(f"turn format {source}: {error.strerror}") from None
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
