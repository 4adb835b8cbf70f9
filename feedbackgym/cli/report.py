"""The ``report`` command: one results table and plot from the runs of several comparisons.

Usage::

    feedbackgym report --out DIR [--rename SRC:ARM=LABEL ...] SRC [SRC ...]

The arms of one study are often run as separate comparisons; this reads every
``SRC/runs/*/curve.csv`` (each run's arm and seed from its ``config.json``) and
writes ``results.csv``, ``results.md``, ``improvement.csv``, ``sooner.csv`` and ``curves.png``
into ``DIR``, as ``compare`` does (see :mod:`feedbackgym.training.experiments.report`).
Runs still in progress count with the validations they have: ``results.md``
ends with a note on each, and on each run left out (no validation after a round yet).
A run warm-started from N expert demonstrations (``--bc-episodes N``) is
reported as ``bcN+ARM``; when the runs have more than one N, the report adds
``demonstrations.csv``, ``.md`` and ``.png``: success against N per arm
(see :mod:`feedbackgym.training.experiments.demonstrations`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from feedbackgym.cli._helpers import CommandError

__all__ = ["add_commands"]


def add_commands(commands: Any) -> None:
    """Adds ``report`` to the top-level subparsers ``commands``."""
    report = commands.add_parser(
        "report", help="one results table and plot from the runs of several comparisons"
    )
    report.add_argument("--out", required=True, help="output directory")
    report.add_argument(
        "--rename",
        action="append",
        default=[],
        metavar="SRC:ARM=LABEL",
        help="report SRC's runs of ARM as LABEL (runs made when the arm's name meant "
        "something else, e.g. guide-then-review before it lost shaping)",
    )
    report.add_argument(
        "sources", nargs="+", metavar="SRC", help="a comparison's output directory (with runs/)"
    )
    report.set_defaults(run=_cmd_report)


def _cmd_report(args: argparse.Namespace) -> int:
    from feedbackgym.training.experiments.report import find_runs, write_report

    runs, notes = find_runs(args.sources, _renames(args.rename, args.sources))
    for note in notes:
        print(f"feedbackgym report: {note}", file=sys.stderr)
    if not runs:
        raise CommandError("no run has a validation yet")
    envs = ", ".join(sorted({run.env_id for run in runs if run.env_id})) or "runs"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    title = f"{envs}: {len(runs)} runs from {len(args.sources)} comparisons"
    write_report(out, runs, title=title, notes=notes)
    print((out / "results.md").read_text())
    tables = ", ".join(f"{out}/{name}" for name in ("results.csv", "improvement.csv", "sooner.csv"))
    print(f"tables: {tables}, curves: {out}/curves.png")
    if len({run.demonstrations for run in runs}) > 1:
        from feedbackgym.training.experiments.demonstrations import write_demonstrations

        write_demonstrations(out, runs, title=f"{envs}: success against demonstrations")
        print((out / "demonstrations.md").read_text())
        print(f"demonstrations: {out}/demonstrations.csv, {out}/demonstrations.png")
    return 0


def _renames(values: list[str], sources: list[str]) -> dict[tuple[str, str], str]:
    """``SRC:ARM=LABEL`` flags as ``{(SRC, ARM): LABEL}``.

    Raises:
        CommandError: A flag is malformed or names a source not given.
    """
    renames = {}
    for value in values:
        source, _, mapping = value.rpartition(":")
        arm, _, label = mapping.partition("=")
        if not (source and arm and label):
            raise CommandError(f"--rename {value!r}: expected SRC:ARM=LABEL")
        if source not in sources:
            raise CommandError(f"--rename {value!r}: {source} is not one of the sources")
        renames[source, arm] = label
    return renames
