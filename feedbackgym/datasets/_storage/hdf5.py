"""Imports h5py, or raises :class:`~feedbackgym.errors.DependencyNotInstalled` naming the extra."""

from __future__ import annotations

from feedbackgym.errors import requires_extra

with requires_extra("hdf5", "h5py"):
    import h5py

__all__ = ["h5py"]
