"""The error a trajectory store raises when the file system refuses a write."""

from __future__ import annotations

import errno
import re
from pathlib import Path

from feedbackgym.errors import FeedbackGymError

__all__ = ["StoreError", "describe_os_error"]

_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EFBIG: "the file size limit is reached",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
}
_HDF5_ERRNO = re.compile(r"errno = (\d+)")


class StoreError(FeedbackGymError, OSError):
    """A trajectory store could not write (disk full, permissions, ...).

    The message says what failed and what is safe: episodes already written
    stay readable; the ones not yet written are named as lost.
    """


def describe_os_error(error: BaseException, action: str, path: Path) -> str:
    """One line saying what failed and why, for ``OSError`` from Python or from HDF5.

    Example:
        >>> describe_os_error(OSError(28, "No space left on device"), "write", Path("a.log"))
        'cannot write a.log: the disk is full (No space left on device)'
    """
    code = getattr(error, "errno", None)
    if code is None:
        found = _HDF5_ERRNO.search(str(error))
        code = int(found.group(1)) if found else None
    detail = getattr(error, "strerror", None) or str(error)
    reason = _REASONS.get(code or -1, "an I/O error")
    return f"cannot {action} {path}: {reason} ({detail})"
