r"""Holding a reply to a set of strings, and reading JSON out of one.

:func:`choice_grammar` writes a llama.cpp grammar (GBNF) whose only sentences
are the choices; :func:`choices_of_grammar` reads them back (the model server
decodes such a grammar by walking its choices' tokens). :func:`json_object`
and :func:`request_block` read the JSON a reply or a built-in prompt carries.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from feedbackgym.errors import ReplyError

__all__ = ["choice_grammar", "choices_of_grammar", "compact_json", "json_object", "request_block"]

_FENCE = re.compile(r"```json\n(.*?)\n```", re.S)


def json_object(content: str) -> dict[str, Any]:
    r"""The one JSON object a reply is (alone, or alone in a ```json fence).

    Raises:
        ReplyError: It is not.

    Example:
        >>> json_object('```json\n{"subgoal_ids": []}\n```')
        {'subgoal_ids': []}
    """
    text = content.strip()
    fenced = _FENCE.fullmatch(text)
    try:
        data = json.loads(fenced.group(1) if fenced else text)
    except json.JSONDecodeError as error:
        raise ReplyError(f"the reply is not JSON ({error}): {text[:80]!r}") from None
    if not isinstance(data, dict):
        raise ReplyError(f"the reply is JSON but not an object: {text[:80]!r}")
    return data


def choice_grammar(choices: Sequence[str]) -> str:
    r"""A llama.cpp grammar (GBNF) whose only sentences are ``choices``.

    Raises:
        ValueError: There are no choices.

    Example:
        >>> print(choice_grammar(["wait", 'say "hi"']))
        root ::= "wait" | "say \"hi\""
    """
    if not choices:
        raise ValueError("a choice grammar needs at least one choice")
    return "root ::= " + " | ".join(f'"{_gbnf_escape(choice)}"' for choice in choices)


_LITERAL = r'"(?:[^"\\]|\\.)*"'
_CHOICE_GRAMMAR = re.compile(rf"root ::= {_LITERAL}(?: \| {_LITERAL})*")
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|.)")


def choices_of_grammar(grammar: str) -> list[str] | None:
    r"""The choices of a grammar :func:`choice_grammar` wrote (``None`` for any other grammar).

    Example:
        >>> choices_of_grammar(choice_grammar(["wait", 'say "hi"\n']))
        ['wait', 'say "hi"\n']
        >>> choices_of_grammar('root ::= [a-z]+') is None
        True
    """
    text = grammar.strip()
    if not _CHOICE_GRAMMAR.fullmatch(text):
        return None
    literals = re.findall(_LITERAL, text.removeprefix("root ::= "))
    return [_ESCAPE.sub(_unescape, literal[1:-1]) for literal in literals]


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code.startswith("x") and len(code) == 3:
        return chr(int(code[1:], 16))
    return {"n": "\n", "r": "\r", "t": "\t"}.get(code, code)


def _gbnf_escape(text: str) -> str:
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "".join(out)


def request_block(content: str) -> dict[str, Any] | None:
    r"""The request a built-in prompt carries: its last ```json block, when it has a ``kind``.

    Example:
        >>> request_block('Request:\n```json\n{"kind": "hint"}\n```\n')
        {'kind': 'hint'}
    """
    for block in reversed(_FENCE.findall(content)):
        try:
            data = json.loads(block)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and "kind" in data:
            return data
    return None


def compact_json(data: Any) -> str:
    """``data`` as compact JSON with sorted keys (prompts' request blocks, cache keys).

    Example:
        >>> compact_json({"b": 1, "a": [1, 2]})
        '{"a":[1,2],"b":1}'
    """
    return json.dumps(data, sort_keys=True, separators=(",", ":"))
