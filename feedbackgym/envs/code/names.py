"""Random, readable names and values for generated projects.

A :class:`Namer` draws from fixed vocabularies with the episode's generator and
never hands out the same identifier twice in one project, so generated code
has no accidental shadowing and instances rarely repeat.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["MODULES", "NOUNS", "Namer"]

MODULES: tuple[str, ...] = (
    "inventory", "billing", "ledger", "payroll", "telemetry", "grading", "shipping",
    "routing", "booking", "weather", "fleet", "clinic", "warehouse", "survey", "catalog",
    "metrics", "scheduler", "tickets", "orders", "harvest", "transit", "kitchen", "studio",
    "garden", "museum", "market", "hotel", "stadium", "pharmacy", "bakery", "orchard",
    "harbor", "gallery", "theater", "dairy", "vineyard",
)  # fmt: skip
"""Module (file) names; none is a standard-library module."""

NOUNS: tuple[str, ...] = (
    "order", "ticket", "sample", "reading", "invoice", "parcel", "booking", "payment",
    "shipment", "record", "score", "visit", "batch", "task", "reply", "entry", "event",
    "review", "claim", "trade", "route", "signal", "vote", "bid", "lap", "dose", "shift",
    "loan", "fare", "meal", "crate", "badge", "patch", "quote",
)  # fmt: skip
"""Domain nouns; each takes a plain ``s`` plural."""

VERBS: tuple[str, ...] = (
    "total", "count", "collect", "pick", "select", "gather", "measure", "rank", "scale",
    "tally", "merge", "clip", "score", "check", "find", "build", "sum", "list", "label",
)  # fmt: skip

WORDS: tuple[str, ...] = (
    "amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heron", "iris", "juniper",
    "kestrel", "lotus", "maple", "nectar", "opal", "pebble", "quartz", "raven", "sage",
    "tulip", "umber", "violet", "willow", "yarrow", "zephyr", "aspen", "basil", "clover",
)  # fmt: skip
"""Lower-case words used as string values in tests."""

VARIABLES: dict[str, tuple[str, ...]] = {
    "seq": ("values", "items", "numbers", "amounts", "points", "sizes", "weights", "marks"),
    "one": ("value", "item", "number", "amount", "point", "size", "weight", "mark", "x"),
    "count": ("n", "count", "limit_n", "how_many", "k"),
    "index": ("i", "idx", "pos", "j"),
    "acc": ("total", "acc", "running", "result"),
    "limit": ("limit", "threshold", "cutoff", "bound", "level"),
    "default": ("default", "fallback", "otherwise", "empty_value"),
    "table": ("table", "registry", "lookup", "mapping", "index_by_key"),
    "key": ("key", "name", "code", "label", "tag"),
    "text": ("text", "raw", "source", "line"),
    "scale": ("scale", "factor", "per", "base_unit"),
    "part": ("part", "portion", "share_of", "piece"),
    "whole": ("whole", "total_of", "out_of", "denominator"),
    "sep": ("sep", "separator", "joiner", "glue"),
    "words": ("words", "parts", "names", "tokens"),
    "bucket": ("bucket", "into", "target", "collected"),
    "counts": ("counts", "tallies", "seen_counts", "histogram"),
    "low": ("low", "lo", "floor", "minimum"),
    "high": ("high", "hi", "ceiling", "maximum"),
    "start": ("start", "begin", "since", "t0"),
    "end": ("end", "until", "stop", "t1"),
    "rate": ("rate", "pct", "percent", "growth"),
    "base": ("base", "principal", "start_value", "amount_in"),
    "cache": ("cache", "memo", "results", "computed"),
    "price": ("price", "unit_price", "cost_each"),
    "qty": ("qty", "quantity", "units"),
    "gross": ("gross", "subtotal", "full_price"),
    "capacity": ("capacity", "room", "slots", "max_load"),
    "used": ("used", "taken", "booked", "loaded"),
    "rows": ("rows", "records", "entries", "lines_in"),
    "row": ("row", "record", "entry", "line_item"),
    "found": ("found", "matches", "picked", "out"),
    "field": ("name", "code", "label", "title", "owner"),
    "flag": ("active", "paid", "open", "valid", "done", "urgent"),
    "old": ("old", "before", "previous", "was"),
    "new": ("new", "after", "current", "now_value"),
    "pairs": ("pairs", "lines", "basket", "entries_in"),
}
"""Pools of variable names by role."""


class Namer:
    """Draws names and values for one project without repeating an identifier.

    Args:
        rng: The episode's generator.

    Example:
        >>> namer = Namer(np.random.default_rng(0))
        >>> a, b = namer.var("seq"), namer.var("seq")
        >>> a != b
        True
    """

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._used: set[str] = set()

    def choice(self, options: Sequence[str]) -> str:
        """One of ``options`` (repeats allowed)."""
        return str(options[int(self.rng.integers(len(options)))])

    def fresh(self, options: Sequence[str], suffixes: Sequence[str] = ("_2", "_3", "_4")) -> str:
        """One of ``options`` not handed out before (suffixed if all are taken)."""
        free = [o for o in options if o not in self._used]
        if not free:
            free = [o + s for s in suffixes for o in options if o + s not in self._used]
        name = self.choice(free)
        self._used.add(name)
        return name

    def var(self, role: str) -> str:
        """A fresh variable name for ``role`` (a key of :data:`VARIABLES`)."""
        return self.fresh(VARIABLES[role])

    def noun(self) -> str:
        """A domain noun (repeats allowed)."""
        return self.choice(NOUNS)

    def module(self) -> str:
        """A fresh module name."""
        return self.fresh(MODULES)

    def function(self, noun: str) -> str:
        """A fresh function name such as ``tally_readings``."""
        return self.fresh([f"{verb}_{noun}s" for verb in VERBS])

    def word(self) -> str:
        """A fresh lower-case word for test data."""
        return self.fresh(WORDS, ("x", "y", "z"))

    def integer(self, low: int, high: int) -> int:
        """An integer in ``[low, high]``."""
        return int(self.rng.integers(low, high + 1))

    def integers(self, count: int, low: int, high: int) -> list[int]:
        """``count`` distinct integers in ``[low, high]``, in random order."""
        return [int(v) for v in self.rng.choice(np.arange(low, high + 1), count, replace=False)]

    def shuffled(self, items: Sequence[str]) -> list[str]:
        """``items`` in random order."""
        return [items[int(i)] for i in self.rng.permutation(len(items))]
