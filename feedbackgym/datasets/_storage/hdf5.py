"""Imports h5py, or raises :class:`~feedbackgym.errors.DependencyNotInstalled` naming the extra."""

from __future__ import annotations

from feedbackgym.errors import DependencyNotInstalled

try:
    import h5py
except ImportError as error:
    raise DependencyNotInstalled.for_extra("h5py", "hdf5") from error

__all__ = ["h5py"]
