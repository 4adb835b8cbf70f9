"""A MkDocs hook: pages show sections of the README, so the two never drift apart.

A page line ``<!-- readme: Results -->`` is replaced by the body of the README's
``## Results`` section. The README's links are relative to the repository root;
they are rewritten relative to the page, and a link to a file outside ``docs/``
(which the site does not hold) becomes plain text naming the path.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_PLACEHOLDER = re.compile(r"^<!-- readme: (.+?) -->$", flags=re.M)
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def readme_section(title: str, readme: str | None = None) -> str:
    """Returns the body of the README's ``## {title}`` section, without its heading.

    Args:
        title: The section's heading, without the ``## ``.
        readme: The README's text (read from the repository when None).

    Raises:
        KeyError: The README has no such section.
    """
    text = (ROOT / "README.md").read_text() if readme is None else readme
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    if match is None:
        raise KeyError(f"README.md has no '## {title}' section")
    return match.group(1).strip() + "\n"


def relink(markdown: str, page_dir: str) -> str:
    """Rewrites the README's repository-relative links relative to a page in ``docs/``.

    Args:
        markdown: Text from the README.
        page_dir: The page's folder inside ``docs/`` (``""`` for the top).
    """

    def _one(match: re.Match[str]) -> str:
        bang, text, target = match.groups()
        if re.match(r"[a-z][a-z0-9+.-]*:|#", target):
            return match.group(0)  # a URL or an anchor: as it is
        path, _, anchor = target.partition("#")
        if not path.startswith("docs/"):
            return f"{text} (`{path}`)" if not bang else f"`{path}`"
        new = posixpath.relpath(path.removeprefix("docs/"), page_dir or ".")
        return f"{bang}[{text}]({new}{'#' + anchor if anchor else ''})"

    return _LINK.sub(_one, markdown)


def on_page_markdown(markdown: str, *, page: Any, **kwargs: Any) -> str:
    """Fills each ``<!-- readme: ... -->`` line of a page (MkDocs' hook).

    Args:
        markdown: The page's Markdown.
        page: The page being built.
        **kwargs: The rest of MkDocs' arguments (unused).
    """
    page_dir = posixpath.dirname(page.file.src_uri)
    return _PLACEHOLDER.sub(lambda m: relink(readme_section(m.group(1)), page_dir), markdown)
