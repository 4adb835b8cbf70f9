"""HDF5 trajectory store: recorder, crash safety, retention, replay sampling, Minari export.

Storage only: it imports nothing from the env, wrapper, baseline or command
layers (expert datasets are made in :mod:`feedbackgym.experts`).

Names load on first use (PEP 562), so ``import feedbackgym.datasets`` stays
light and h5py loads only when a store is used; without h5py they raise
:class:`~feedbackgym.errors.DependencyNotInstalled` naming the ``hdf5`` extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from feedbackgym.datasets.episode import Episode, EpisodeMeta, FeedbackEvent, FeedbackType
    from feedbackgym.datasets.errors import (
        DamagedFile,
        DamagedFileError,
        DamagedFileWarning,
        StoreError,
    )
    from feedbackgym.datasets.export import export_minari
    from feedbackgym.datasets.gathering import GatherReport, gather
    from feedbackgym.datasets.recorder import EpisodeRecorder
    from feedbackgym.datasets.retention import PrunePlan, prune
    from feedbackgym.datasets.store import EpisodeFilter, TrajectoryStore

__all__ = [
    "DamagedFile",
    "DamagedFileError",
    "DamagedFileWarning",
    "Episode",
    "EpisodeFilter",
    "EpisodeMeta",
    "EpisodeRecorder",
    "FeedbackEvent",
    "FeedbackType",
    "GatherReport",
    "PrunePlan",
    "StoreError",
    "TrajectoryStore",
    "export_minari",
    "gather",
    "prune",
]

_MODULES = {
    "DamagedFile": "errors",
    "DamagedFileError": "errors",
    "DamagedFileWarning": "errors",
    "Episode": "episode",
    "EpisodeFilter": "store",
    "EpisodeMeta": "episode",
    "EpisodeRecorder": "recorder",
    "FeedbackEvent": "episode",
    "FeedbackType": "episode",
    "GatherReport": "gathering",
    "PrunePlan": "retention",
    "StoreError": "errors",
    "TrajectoryStore": "store",
    "export_minari": "export",
    "gather": "gathering",
    "prune": "retention",
}


def __getattr__(name: str) -> Any:
    """Imports a public name's module on first use (PEP 562)."""
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
