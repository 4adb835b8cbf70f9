"""Exceptions raised by feedbackgym.

Every error derives from :class:`FeedbackGymError`, and where a standard
exception fits as well (``ImportError``, ``ValueError``) it derives from that
too, so plain ``except ValueError`` code keeps working.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "ChatError",
    "ConfigError",
    "DependencyNotInstalled",
    "FeedbackGymError",
    "GeneratorError",
    "InvalidAction",
    "ReplyError",
    "SandboxError",
    "requires_extra",
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


@contextmanager
def requires_extra(extra: str, package: str | None = None) -> Iterator[None]:
    """Imports in the block that fail raise :class:`DependencyNotInstalled` naming ``extra``.

    The message names the module that failed to import (else ``package``, else
    the extra). An error that already names its extra passes through.

    Args:
        extra: The feedbackgym extra that installs what the block imports.
        package: The package to name when the failed import has no name.

    Example:
        >>> with requires_extra("baselines"):
        ...     import no_such_module_here
        Traceback (most recent call last):
        ...
        feedbackgym.errors.DependencyNotInstalled: no_such_module_here is not installed, \
run `pip install "feedbackgym[baselines]"`
    """
    try:
        yield
    except DependencyNotInstalled:
        raise
    except ImportError as error:
        raise DependencyNotInstalled.for_extra(error.name or package or extra, extra) from error


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
