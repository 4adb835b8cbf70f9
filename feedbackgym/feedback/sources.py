"""Where feedback comes from: computed in-process, or asked of a remote service."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from feedbackgym.feedback.remote import RemoteFeedbackSource

__all__ = ["make_source"]


def make_source(source: str, *, deadline_ms: float = 50.0) -> RemoteFeedbackSource | None:
    """Resolves a wrapper's ``source=`` argument.

    Args:
        source: ``"local"`` (generate in-process) or a ZeroMQ address of a
            ``feedbackgym serve-feedback`` service, e.g. ``"tcp://127.0.0.1:5557"``.
        deadline_ms: How long a step waits for a remote answer before going on
            without it.

    Returns:
        ``None`` for local generation, else the remote client.

    Raises:
        ValueError: ``source`` is neither.
    """
    if source == "local":
        return None
    if source.startswith(("tcp://", "ipc://")):
        from feedbackgym.feedback.remote import RemoteFeedbackSource

        return RemoteFeedbackSource(source, deadline_ms=deadline_ms)
    raise ValueError(f"source must be 'local' or a tcp:// or ipc:// address, got {source!r}")
