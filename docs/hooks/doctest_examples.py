"""A griffe extension: the project's ``Example:`` docstring sections render as examples.

The project's docstrings follow Gymnasium's Google style, whose doctest section is
headed ``Example:``. Griffe's Google parser knows only ``Examples:``; it reads
``Example:`` as an admonition and renders its ``>>>`` lines as nested block
quotes. This extension renames the heading before the docstring is parsed, so
the doctests show as Python code in the API pages.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", flags=re.M)


class DoctestExamples(griffe.Extension):
    """Reads each docstring's ``Example:`` heading as ``Examples:``."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Renames the heading in ``obj``'s docstring, if it has one.

        Args:
            obj: The object griffe has just created.
            **kwargs: The rest of griffe's arguments (unused).
        """
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
