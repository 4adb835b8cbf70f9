"""A run directory's files: the validation curve, the resume state, the checkpoints.

::

    config.json          the RunConfig
    tb/                  TensorBoard logs
    curve.csv            step, round, phase, validation success (scheduled and unguided), return
    checkpoints/round_NNNN.zip   a versioned checkpoint every round (.pt for the torch trainer)
    checkpoints/best.zip         the checkpoint with the best validation success (rollback target)
    state.json           what --resume restores
    trajectories/        recorded episodes (a TrajectoryStore)

:func:`prepare_run_dir` starts or resumes the directory of every trainer's run (PPO,
SB3, GRPO, the warm-up), and :func:`tensorboard_dir` names its TensorBoard folder.

Every write that a crash could cut in half goes through a temporary file and
an atomic rename.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from feedbackgym.errors import ConfigError

__all__ = [
    "CURVE_FIELDS",
    "SavedRunConfig",
    "append_curve",
    "best_checkpoint",
    "check_same_settings",
    "drop_curve_rows_after",
    "drop_old_checkpoints",
    "prepare_run_dir",
    "read_curve",
    "read_state",
    "tensorboard_dir",
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
    "curriculum",
)
"""The columns of ``curve.csv``: ``step`` counts env steps the learner took,
``replayed_steps`` the steps replayed to reach restarts so far (not in ``step``),
``seconds`` the wall-clock the run has trained so far (empty where not measured),
``curriculum`` the width of the training tasks in force at the validation (from the next
round on; empty without a curriculum: the preset's)."""


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
    # NaN for ``seconds`` (not measured) and ``curriculum`` (none: the preset's tasks).
    unknown = ("seconds", "curriculum")
    return {
        key: np.array([r[key] for r in rows])
        if key == "phase"
        else np.array([float(r.get(key) or (np.nan if key in unknown else 0)) for r in rows])
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


def best_checkpoint(run_dir: str | Path, suffix: str, *, exists: bool = True) -> Path:
    """The run's checkpoint with the best validation success: the rollback target.

    Args:
        run_dir: The run directory.
        suffix: The trainer's checkpoint suffix (``.zip`` for SB3, ``.pt`` for torch).
        exists: Raise when the run has none yet.

    Raises:
        FileNotFoundError: ``exists`` and the run has no best checkpoint yet.

    Example:
        >>> best_checkpoint("runs/a", ".pt", exists=False).as_posix()
        'runs/a/checkpoints/best.pt'
    """
    best = Path(run_dir) / "checkpoints" / f"best{suffix}"
    if exists and not best.exists():
        raise FileNotFoundError(f"{run_dir} has no best checkpoint yet")
    return best


def drop_old_checkpoints(checkpoints: Path, keep: int, suffix: str) -> None:
    """Deletes all but the ``keep`` newest round checkpoints (0 keeps every one)."""
    if keep:
        rounds = sorted(checkpoints.glob(f"round_*{suffix}"), key=lambda p: int(p.stem[6:]))
        for old in rounds[:-keep]:
            old.unlink()


class SavedRunConfig(Protocol):
    """A run's settings as its directory keeps them (``config.json``).

    Attributes:
        out_dir: The run directory.
        resumable_changes: The settings a resumed run may change.
        fresh_start: The files and folders of the directory a new run clears.
    """

    out_dir: str
    resumable_changes: ClassVar[frozenset[str]]
    fresh_start: ClassVar[tuple[str, ...]]

    def to_json(self) -> str:
        """The settings as JSON."""
        ...

    @classmethod
    def from_json(cls, text: str) -> Any:
        """Reads settings written by :meth:`to_json`."""
        ...


def prepare_run_dir(
    config: SavedRunConfig, *, resume: bool, rounds: int | None = None
) -> dict[str, Any]:
    """Starts (or, with ``resume``, continues) the run directory; returns its state.

    A new run (or one with no state saved yet) clears ``config.fresh_start``. A
    resumed run keeps them, refuses settings other than the saved run's (beyond
    ``config.resumable_changes``), and drops validations past its last saved round (a
    crash between a validation and its round's state would list it twice; with no
    round saved, every validation goes: the run validates again). Both write
    ``config.json``.

    Args:
        config: The run's settings.
        resume: Continue the run saved in the directory.
        rounds: The run's length in rounds (``state.json``'s ``round`` counts them),
            where it is known before the run starts; a resumed run that has trained
            them all is left as it is.

    Returns:
        The saved state (``{}`` for a new run), or ``{"finished": True, "state":
        ...}`` for a resumed run that has nothing left to do.

    Raises:
        ConfigError: An unfinished run resumed with other settings (each one named), or
            its saved ``config.json`` cannot be read.

    Example:
        >>> import tempfile
        >>> from feedbackgym.training.common.run_settings import RunConfig
        >>> out = tempfile.mkdtemp()
        >>> config = RunConfig(env_id="feedbackgym/OpsIncidentEasy-v1", arm="shaping",
        ...                    seed=0, total_steps=4096, out_dir=out)
        >>> prepare_run_dir(config, resume=False, rounds=config.rounds)
        {}
        >>> sorted(p.name for p in Path(out).iterdir())
        ['config.json']
    """
    run_dir = Path(config.out_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    state = read_state(run_dir) if resume else {}
    first_round = state.get("round", -1) + 1
    if resume and rounds is not None and first_round >= rounds:
        return {"finished": True, "state": state}
    saved = run_dir / "config.json"
    if state and saved.exists():
        _check_resumable(config, saved)
    if not state:
        for name in config.fresh_start:
            stale = run_dir / name
            if stale.is_dir():
                shutil.rmtree(stale)
            else:
                stale.unlink(missing_ok=True)
    else:
        drop_curve_rows_after(run_dir / "curve.csv", first_round if first_round else -1)
    saved.write_text(config.to_json())
    return state


def _check_resumable(config: SavedRunConfig, saved_file: Path) -> None:
    """Raises ConfigError naming each setting ``config`` changes from the saved run's.

    The saved config is read with today's defaults, so a field added since it was
    written is not a change.
    """
    try:
        saved = json.loads(type(config).from_json(saved_file.read_text()).to_json())
    except (ValueError, TypeError) as error:
        raise ConfigError(
            f"{saved_file}: cannot read the saved run's config to resume it: {error}"
        ) from error
    wanted = json.loads(config.to_json())
    check_same_settings(saved, wanted, config.resumable_changes, config.out_dir)


def check_same_settings(
    saved: dict[str, Any], wanted: dict[str, Any], resumable: Any, out_dir: str
) -> None:
    """Raises ConfigError naming each setting ``wanted`` changes from ``saved``.

    Args:
        saved: The settings the run was started with (as JSON data).
        wanted: The settings it is resumed with.
        resumable: The names of the settings a resumed run may change.
        out_dir: The run's directory, for the message.

    Example:
        >>> check_same_settings({"seed": 1}, {"seed": 1}, (), "runs/a")
        >>> check_same_settings({"seed": 1}, {"seed": 2}, (), "runs/a")
        Traceback (most recent call last):
        ...
        feedbackgym.errors.ConfigError: runs/a: resumed with other settings than the run \
was started with (seed: 1 -> 2); resume with the same settings, or start it in a new directory
    """
    changed = [
        f"{key}: {saved.get(key)!r} -> {wanted.get(key)!r}"
        for key in sorted(saved.keys() | wanted.keys())
        if key not in resumable and saved.get(key) != wanted.get(key)
    ]
    if changed:
        raise ConfigError(
            f"{out_dir}: resumed with other settings than the run was started with "
            f"({'; '.join(changed)}); resume with the same settings, or start it in a new "
            "directory"
        )


def tensorboard_dir(tb: Path, name: str, first_round: int) -> Path:
    """A run's TensorBoard folder, numbered as SB3 numbers them.

    A new run takes ``name_N+1`` after the highest ``name_N`` in ``tb``; a resumed
    one (``first_round > 0``) goes on writing in ``name_N``.

    Example:
        >>> import tempfile
        >>> tb = Path(tempfile.mkdtemp())
        >>> tensorboard_dir(tb, "shaping_seed0", 0).name
        'shaping_seed0_1'
        >>> (tb / "shaping_seed0_1").mkdir()
        >>> [tensorboard_dir(tb, "shaping_seed0", first).name for first in (3, 0)]
        ['shaping_seed0_1', 'shaping_seed0_2']
    """
    taken = [
        int(number)
        for path in tb.glob(f"{name}_*")
        if (number := path.name.rsplit("_", 1)[1]).isdigit()
    ]
    last = max(taken, default=0)
    return tb / f"{name}_{last if first_round > 0 and last else last + 1}"
