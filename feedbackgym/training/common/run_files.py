"""A run directory's files: the validation curve, the resume state, the checkpoints.

::

    config.json          the RunConfig
    tb/                  TensorBoard logs
    curve.csv            step, round, phase, validation success (scheduled and unguided), return
    checkpoints/round_NNNN.zip   a versioned checkpoint every round (.pt for the torch trainer)
    checkpoints/best.zip         the checkpoint with the best validation success (rollback target)
    state.json           what --resume restores
    trajectories/        recorded episodes (a TrajectoryStore)

Every write that a crash could cut in half goes through a temporary file and
an atomic rename.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CURVE_FIELDS",
    "append_curve",
    "drop_curve_rows_after",
    "drop_old_checkpoints",
    "read_curve",
    "read_state",
    "write_state",
]

CURVE_FIELDS = (
    "step",
    "round",
    "phase",
    "success",
    "success_unguided",
    "mean_return",
    "mean_length",
    "replayed_steps",
    "seconds",
)
"""The columns of ``curve.csv``: ``step`` counts env steps the learner took,
``replayed_steps`` the steps replayed to reach restarts so far (not in ``step``),
``seconds`` the wall-clock the run has trained so far (empty where not measured)."""


def append_curve(path: Path, row: dict[str, Any]) -> None:
    """Appends one validation to ``curve.csv`` (writing its header first if new).

    A curve written with fewer columns (an earlier version, resumed) is first
    rewritten with today's header, its rows' new columns empty.
    """
    new = not path.exists()
    if not new:
        with path.open(newline="") as file:
            header = next(csv.reader(file), [])
        if tuple(header) != CURVE_FIELDS:
            _rewrite(path, _rows(path))
    with path.open("a", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=CURVE_FIELDS)
        if new:
            writer.writeheader()
        writer.writerow(row)


def drop_curve_rows_after(path: Path, progress: int) -> None:
    """Drops validations past ``progress`` rounds (before resuming from there).

    A crash after a validation was written but before its round's state was
    saved would otherwise leave that validation in the curve twice.
    """
    if not path.exists():
        return
    rows = _rows(path)
    kept = [row for row in rows if float(row["round"]) <= progress]
    if len(kept) < len(rows):
        _rewrite(path, kept)


def _rows(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def _rewrite(path: Path, rows: list[dict[str, Any]]) -> None:
    """Writes ``rows`` as the whole curve, atomically, with today's columns."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=CURVE_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


def read_curve(run_dir: str | Path) -> dict[str, np.ndarray]:
    """Reads a run's ``curve.csv`` into arrays (``phase`` as strings)."""
    with (Path(run_dir) / "curve.csv").open() as file:
        rows = list(csv.DictReader(file))
    # A curve written before a column existed reads it as 0 (``replayed_steps``), or as
    # NaN for ``seconds`` (not measured).
    return {
        key: np.array([r[key] for r in rows])
        if key == "phase"
        else np.array([float(r.get(key) or (np.nan if key == "seconds" else 0)) for r in rows])
        for key in CURVE_FIELDS
    }


def read_state(run_dir: Path) -> dict[str, Any]:
    """The run's ``state.json`` (``{}`` when it has none yet)."""
    path = run_dir / "state.json"
    return json.loads(path.read_text()) if path.exists() else {}


def write_state(run_dir: Path, state: dict[str, Any]) -> None:
    """Writes ``state.json`` atomically: a crash never leaves half a state file."""
    tmp = run_dir / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(run_dir / "state.json")


def drop_old_checkpoints(checkpoints: Path, keep: int, suffix: str) -> None:
    """Deletes all but the ``keep`` newest round checkpoints (0 keeps every one)."""
    if keep:
        rounds = sorted(checkpoints.glob(f"round_*{suffix}"), key=lambda p: int(p.stem[6:]))
        for old in rounds[:-keep]:
            old.unlink()
