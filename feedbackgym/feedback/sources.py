"""Where feedback comes from: computed in-process, or asked of a remote service."""

from __future__ import annotations

from typing import TYPE_CHECKING

from feedbackgym.config import DEFAULT_DEADLINE_MS, checked_source

if TYPE_CHECKING:
    from feedbackgym.feedback.remote import RemoteFeedbackSource

__all__ = ["make_source"]


def make_source(
    source: str, *, deadline_ms: float = DEFAULT_DEADLINE_MS
) -> RemoteFeedbackSource | None:
    """Resolves a wrapper's ``source=`` argument.

    Args:
        source: ``"local"`` (generate in-process) or a ZeroMQ address of a
            ``feedbackgym serve-feedback`` service, e.g. ``"tcp://127.0.0.1:5557"``.
        deadline_ms: How long a step waits for a remote answer before going on
            without it.

    Returns:
        ``None`` for local generation, else the remote client (a guide and a
        reviewer, see :mod:`feedbackgym.feedback.generators`).

    Raises:
        ValueError: ``source`` is neither.
    """
    if checked_source(source) == "local":
        return None
    from feedbackgym.feedback.remote import RemoteFeedbackSource

    return RemoteFeedbackSource(source, deadline_ms=deadline_ms)
