"""Observations of a web page: compact text for LLM agents, a fixed-size table for SB3.

The text lists the goal, the page's title and path, its messages and every
interactive element in view as ``[id] role "label" value=... state``. It is
normalised into :data:`CHARSET` (accents dropped, typographic punctuation made
ASCII, anything else becomes ``?``) and cut at :data:`MAX_TEXT_LENGTH`.

The vector form is a ``Dict`` of flat ``Box``/``MultiBinary``/``Discrete``
spaces: one row of :data:`ELEMENT_FEATURES` features per element slot (role,
states, position, hashed label and value words, and whether they match the
goal), hashed words of the goal, page and messages, which vocabulary values the
goal mentions, whether more elements lie above or below, the last action's
result and the elapsed fraction of the episode. Words are hashed with CRC-32,
so the encoding is the same in every process. Nothing reads a clock.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Iterable, Sequence

import numpy as np
from gymnasium import spaces

from feedbackgym.envs.base import CHARSET
from feedbackgym.envs.web.snapshot import FLAGS, ROLES, Element, PageSnapshot

__all__ = [
    "CHARSET",
    "ELEMENT_FEATURES",
    "LAST_RESULTS",
    "MAX_TEXT_LENGTH",
    "normalise",
    "render_text",
    "vector_space",
    "encode_vector",
]

MAX_TEXT_LENGTH = 8192
"""Longest text observation; longer ones keep their head."""
LAST_RESULTS: tuple[str, ...] = ("none", "done", "invalid")
"""Codes of ``last_result``: nothing yet, carried out, rejected as a no-op."""

_OPTIONS_SHOWN = 16
_LABEL_BUCKETS = 16
_GOAL_BUCKETS = 64
_PAGE_BUCKETS = 16
_GEOMETRY = 4
ELEMENT_FEATURES = 1 + len(ROLES) + len(FLAGS) + 3 + _GEOMETRY + 2 * _LABEL_BUCKETS
"""Features per element slot."""

_VIEW_WIDTH = 1024.0
_VIEW_HEIGHT = 768.0
_REPLACEMENTS = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2026": "...",
        "\u00d7": "x",
        "\u20ac": "EUR",
        "\u00a3": "GBP",
        "\u00a0": " ",
        "\t": " ",
        "\r": " ",
    }
)
_ALLOWED = frozenset(CHARSET)
_WORD = re.compile(r"[a-z0-9]+")


def normalise(text: str) -> str:
    """Maps ``text`` into :data:`CHARSET`, on one line.

    Example:
        >>> normalise("Café – “1 × 2”☃")
        'Cafe - "1 x 2"?'
    """
    text = unicodedata.normalize("NFKD", text.translate(_REPLACEMENTS))
    out = []
    for char in text:
        if unicodedata.combining(char):
            continue
        if char == "\n":
            char = " "
        out.append(char if char in _ALLOWED else "?")
    return "".join(out)


def _quote(text: str) -> str:
    return '"' + normalise(text).replace('"', "'") + '"'


def _describe(element: Element) -> str:
    parts = [f"[{element.id}] {element.role} {_quote(element.label)}"]
    if element.role in ("textbox", "select"):
        parts.append(f"value={_quote(element.value)}")
    if element.options:
        shown = element.options[:_OPTIONS_SHOWN]
        more = len(element.options) - len(shown)
        parts.append("options=" + normalise("|".join(shown)) + (f"|... (+{more})" if more else ""))
    parts += [flag for flag in FLAGS if getattr(element, flag) and flag != "invalid"]
    if element.invalid:
        parts.append(f"invalid {_quote(element.error)}" if element.error else "invalid")
    return " ".join(parts)


def render_text(
    goal: str,
    snapshot: PageSnapshot,
    *,
    step: int,
    max_steps: int,
    last_action: str = "",
    notice: str = "",
) -> str:
    """Renders the page for an LLM agent (see the module docstring)."""
    lines = [f"Goal: {normalise(goal)}", f"Page: {normalise(snapshot.title)} ({snapshot.path})"]
    if snapshot.heading and snapshot.heading != snapshot.title:
        lines.append(f"Heading: {normalise(snapshot.heading)}")
    if snapshot.messages:
        lines.append("Messages:")
        lines += [f"  ! {normalise(m)}" for m in snapshot.messages]
    lines.append("Elements:")
    if snapshot.more_above:
        lines.append("  (more above: scroll up)")
    lines += [f"  {_describe(e)}" for e in snapshot.elements] or ["  (none in view)"]
    if snapshot.more_below:
        lines.append("  (more below: scroll down)")
    if last_action:
        lines.append(f"Last action: {normalise(last_action)}" + (f" ({notice})" if notice else ""))
    lines.append(f"Step {step} of {max_steps}")
    text = "\n".join(lines)
    return "".join(c if c in _ALLOWED else "?" for c in text)[:MAX_TEXT_LENGTH]


def vector_space(slots: int, n_values: int) -> spaces.Dict:
    """The ``Dict`` space of :func:`encode_vector`.

    Args:
        slots: Element slots.
        n_values: Size of the ``type`` plus ``select`` vocabulary.
    """
    return spaces.Dict(
        {
            "elements": _unit(slots * ELEMENT_FEATURES),
            "goal": _unit(_GOAL_BUCKETS),
            "goal_values": spaces.MultiBinary(max(1, n_values)),
            "page": _unit(2 * _PAGE_BUCKETS),
            "more": spaces.MultiBinary(2),
            "last_result": spaces.Discrete(len(LAST_RESULTS)),
            "time": _unit(1),
        }
    )


def _unit(size: int) -> spaces.Box:
    return spaces.Box(0.0, 1.0, (size,), np.float32)


def words(text: str) -> set[str]:
    """Lower-case alphanumeric words of ``text``."""
    return set(_WORD.findall(normalise(text).lower()))


def _hashed(tokens: Iterable[str], buckets: int) -> np.ndarray:
    out = np.zeros(buckets, np.float32)
    for token in tokens:
        out[zlib.crc32(token.encode()) % buckets] = 1.0
    return out


def _row(element: Element, goal_words: set[str], goal_strings: set[str]) -> np.ndarray:
    role = np.zeros(len(ROLES), np.float32)
    role[ROLES.index(element.role)] = 1.0
    flags = [float(getattr(element, flag)) for flag in FLAGS]
    label_words = words(element.label)
    matches = [
        float(bool(element.value)),
        float(bool(label_words & goal_words)),
        float(normalise(element.value).casefold() in goal_strings),
    ]
    geometry = np.clip(
        [
            element.x / _VIEW_WIDTH,
            element.y / _VIEW_HEIGHT,
            element.width / _VIEW_WIDTH,
            element.height / _VIEW_HEIGHT,
        ],
        0.0,
        1.0,
    )
    return np.concatenate(
        [
            [1.0],
            role,
            flags,
            matches,
            geometry,
            _hashed(label_words, _LABEL_BUCKETS),
            _hashed(words(element.value), _LABEL_BUCKETS),
        ]
    ).astype(np.float32)


def encode_vector(
    goal: str,
    goal_strings: Sequence[str],
    goal_values: np.ndarray,
    snapshot: PageSnapshot,
    *,
    slots: int,
    step: int,
    max_steps: int,
    last_result: int,
) -> dict[str, np.ndarray | int]:
    """Encodes the page into the spaces of :func:`vector_space`.

    Args:
        goal: The goal text.
        goal_strings: The concrete strings the goal asks for (matched against
            element values).
        goal_values: Which vocabulary values the goal uses (MultiBinary).
        snapshot: The page.
        slots: Element slots.
        step: Steps taken in the episode.
        max_steps: The step count ``time`` is normalised by.
        last_result: Index into :data:`LAST_RESULTS`.
    """
    goal_words = words(goal)
    wanted = {normalise(s).casefold() for s in goal_strings if s}
    table = np.zeros((slots, ELEMENT_FEATURES), np.float32)
    for element in snapshot.elements[:slots]:
        table[element.id] = _row(element, goal_words, wanted)
    page_words = words(f"{snapshot.title} {snapshot.path} {snapshot.heading}")
    message_words = words(" ".join(snapshot.messages))
    return {
        "elements": table.reshape(-1),
        "goal": _hashed(goal_words, _GOAL_BUCKETS),
        "goal_values": goal_values.astype(np.int8).copy(),
        "page": np.concatenate(
            [_hashed(page_words, _PAGE_BUCKETS), _hashed(message_words, _PAGE_BUCKETS)]
        ),
        "more": np.array(
            [
                snapshot.more_above or snapshot.can_scroll_up,
                snapshot.more_below or snapshot.can_scroll_down,
            ],
            np.int8,
        ),
        "last_result": int(last_result),
        "time": np.array([min(1.0, step / max_steps)], np.float32),
    }
