"""What a trajectory store reports: a refused write (an error), a damaged file (a warning)."""

from __future__ import annotations

import errno
import re
from dataclasses import dataclass
from pathlib import Path

from feedbackgym.errors import FeedbackGymError

__all__ = [
    "DamagedFile",
    "DamagedFileError",
    "DamagedFileWarning",
    "StoreError",
    "damaged_file",
    "describe_os_error",
]

_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EFBIG: "the file size limit is reached",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
}
_HDF5_ERRNO = re.compile(r"errno = (\d+)")
_HDF5_OPEN = re.compile(r"Unable to (?:synchronously )?open file \((.*)\)", re.DOTALL)
_HDF5_TRUNCATED = re.compile(r"truncated file: eof = (\d+),.*stored_eof = (\d+)", re.DOTALL)


class StoreError(FeedbackGymError, OSError):
    """A trajectory store could not write (disk full, permissions, ...).

    The message says what failed and what is safe: episodes already written
    stay readable; the ones not yet written are named as lost.
    """


@dataclass(frozen=True)
class DamagedFile:
    """A file of a store that cannot be read; its episodes are left out, the file left in place.

    Attributes:
        path: The file (a segment ``*.h5`` or a log ``*.log``).
        reason: Why it cannot be read.

    Example:
        >>> print(DamagedFile(Path("store/a-000000.h5"), "not an HDF5 file"))
        store/a-000000.h5: not an HDF5 file
    """

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class DamagedFileWarning(UserWarning):
    """A store file cannot be read (truncated, not HDF5, not a feedbackgym file, unreadable).

    Issued once per file by each reader of the store (again if the reason changes);
    the store's other episodes read as usual. ``warnings.simplefilter("error",
    DamagedFileWarning)`` turns it into an exception instead.
    """


class DamagedFileError(FeedbackGymError, OSError):
    """A store file whose index read fine turned out damaged when its data was read.

    Reading the store on (:meth:`~feedbackgym.datasets.TrajectoryStore.iter_episodes`,
    ``datasets inspect``) skips such a file with a :class:`DamagedFileWarning`
    instead; this is raised where skipping would lose data or a draw: sampling
    (the next draw leaves the file out), retention and gathering (nothing is
    moved or deleted).

    Attributes:
        damaged: The file and why it cannot be read.

    Example:
        >>> error = DamagedFileError(DamagedFile(Path("a-000000.h5"), "a checksum fails"))
        >>> print(error)
        cannot read a-000000.h5: a checksum fails
        >>> isinstance(error, OSError)
        True
    """

    def __init__(self, damaged: DamagedFile) -> None:
        super().__init__(f"cannot read {damaged}")
        self.damaged = damaged

    def __reduce__(self) -> tuple[type[DamagedFileError], tuple[DamagedFile]]:
        return type(self), (self.damaged,)


def damaged_file(path: Path, error: OSError | ValueError) -> DamagedFile:
    """The report for ``path``, given the error reading it raised.

    Example:
        >>> error = OSError("Unable to synchronously open file (file signature not found)")
        >>> damaged_file(Path("x.h5"), error).reason
        'not an HDF5 file'
    """
    text = str(error)
    truncated = _HDF5_TRUNCATED.search(text)
    if truncated:
        size, expected = truncated.groups()
        return DamagedFile(path, f"truncated ({size} of {expected} bytes)")
    if "file signature not found" in text:
        return DamagedFile(path, "not an HDF5 file")
    if isinstance(error, OSError) and error.errno in _REASONS:
        return DamagedFile(path, f"cannot read it: {_REASONS[error.errno]}")
    opening = _HDF5_OPEN.search(text)
    return DamagedFile(path, opening.group(1) if opening else text)


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
