"""Exceptions raised by feedbackgym.

Every error derives from :class:`FeedbackGymError`, and where a standard
exception fits as well (``ImportError``, ``ValueError``) it derives from that
too, so plain ``except ValueError`` code keeps working.
"""

from __future__ import annotations

__all__ = [
    "ChatError",
    "ConfigError",
    "DependencyNotInstalled",
    "FeedbackGymError",
    "GeneratorError",
    "InvalidAction",
    "ReplyError",
    "SandboxError",
]


class FeedbackGymError(Exception):
    """Base class of every feedbackgym error."""


class DependencyNotInstalled(FeedbackGymError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    @classmethod
    def for_extra(cls, package: str, extra: str) -> DependencyNotInstalled:
        """Builds the error for a missing ``package`` that ``extra`` installs.

        Args:
            package: The import name that failed.
            extra: The feedbackgym extra that provides it.

        Returns:
            The error, with an install hint in its message.
        """
        return cls(f'{package} is not installed, run `pip install "feedbackgym[{extra}]"`')


class ConfigError(FeedbackGymError, ValueError):
    """A configuration value or file is invalid; the message names the field."""


class InvalidAction(FeedbackGymError, ValueError):
    """An action is outside the action space or text could not be parsed."""


class SandboxError(FeedbackGymError, RuntimeError):
    """A sandbox backend failed to start, run or clean up."""


class GeneratorError(FeedbackGymError, TypeError):
    """A feedback generator cannot be loaded, or does not meet its protocol (named)."""


class ChatError(FeedbackGymError, RuntimeError):
    """A chat model server could not be reached, timed out or answered with an error (named)."""


class ReplyError(FeedbackGymError, ValueError):
    """A chat model's reply does not meet the schema it was asked for (the message says how)."""
