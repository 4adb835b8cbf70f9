"""Correct helper functions that fill out a project, each with a test and decoy edits.

A decoy is a plausible-looking change to a correct line that breaks the
function's visible test: the candidate set mixes them with the fix, so an
agent that edits without reading the tests pays for it.
"""

from __future__ import annotations

from collections.abc import Callable

from feedbackgym.envs.code.families import case, check, make_unit
from feedbackgym.envs.code.names import Namer
from feedbackgym.envs.code.project import Unit

__all__ = ["DISTRACTORS"]


def capitalise(n: Namer) -> Unit:
    """Capitalise every word of a text."""
    names = {"fn": n.fresh(["title_case", "capitalise_words", "headline", "proper_case"])}
    names |= {"text": n.var("text"), "w": n.var("one")}
    a, b = n.word(), n.word()
    return make_unit(
        '''
def $fn($text):
    """Return $text with every word capitalised."""
@@    return " ".join($w.capitalize() for $w in $text.split())
''',
        names,
        decoys=[
            '    return " ".join($w.upper() for $w in $text.split())',
            '    return "".join($w.capitalize() for $w in $text.split())',
        ],
        tests=[
            case(
                f"test_{names['fn']}",
                check(f'{names["fn"]}("{a} {b}")', f"{a.title()} {b.title()}"),
                names["fn"],
            )
        ],
    )


def spread(n: Namer) -> Unit:
    """The gap between the largest and smallest value."""
    names = {"fn": n.fresh(["spread", "value_range", "span_of", "width_of"]), "xs": n.var("seq")}
    values = n.integers(3, 1, 99)
    if values[0] == min(values):
        values.reverse()
    return make_unit(
        '''
def $fn($xs):
    """Return the gap between the largest and the smallest of $xs."""
@@    return max($xs) - min($xs)
''',
        names,
        decoys=["    return min($xs) - max($xs)", "    return max($xs) - $xs[0]"],
        tests=[
            case(
                f"test_{names['fn']}",
                check(f"{names['fn']}({values})", max(values) - min(values)),
                names["fn"],
            )
        ],
    )


def is_multiple(n: Namer) -> Unit:
    """Whether a number is a multiple of another."""
    names = {"fn": n.fresh(["is_multiple", "divides_evenly", "fits_exactly"])}
    names |= {"n": n.var("count"), "k": n.fresh(["step", "every", "unit_size"])}
    k = n.integer(3, 9)
    m = k * n.integer(2, 9)
    fn = names["fn"]
    return make_unit(
        '''
def $fn($n, $k):
    """Return whether $n is a multiple of $k."""
@@    return $n % $k == 0
''',
        names,
        decoys=["    return $k % $n == 0", "    return $n // $k == 0"],
        tests=[
            case(
                f"test_{fn}",
                [
                    *check(f"{fn}({m}, {k})", True, same=True),
                    *check(f"{fn}({m + 1}, {k})", False, same=True),
                ],
                fn,
            )
        ],
    )


def count_equal(n: Namer) -> Unit:
    """How many values equal a target."""
    names = {"fn": n.fresh(["count_equal", "occurrences", "how_often"]), "xs": n.var("seq")}
    names |= {"x": n.var("one"), "target": n.fresh(["target", "wanted", "needle"])}
    target = n.integer(2, 9)
    values = [target, n.integer(10, 20), target, n.integer(21, 30), target]
    fn = names["fn"]
    return make_unit(
        '''
def $fn($xs, $target):
    """Return how many of $xs equal $target."""
@@    return sum(1 for $x in $xs if $x == $target)
''',
        names,
        decoys=[
            "    return sum(1 for $x in $xs if $x != $target)",
            "    return sum($x for $x in $xs if $x == $target)",
        ],
        tests=[case(f"test_{fn}", check(f"{fn}({values}, {target})", 3), fn)],
    )


def clock(n: Namer) -> Unit:
    """Seconds as minutes:seconds."""
    names = {
        "fn": n.fresh(["clock_text", "as_minutes", "mm_ss"]),
        "s": n.fresh(["seconds", "secs", "elapsed_s"]),
    }
    minutes, seconds = n.integer(1, 59), n.integer(1, 9)
    fn = names["fn"]
    return make_unit(
        '''
def $fn($s):
    """Format $s seconds as minutes:seconds, e.g. 125 -> "2:05"."""
@@    return f"{$s // 60}:{$s % 60:02d}"
''',
        names,
        decoys=['    return f"{$s // 60}:{$s % 60}"', '    return f"{$s / 60}:{$s % 60:02d}"'],
        tests=[
            case(
                f"test_{fn}", check(f"{fn}({minutes * 60 + seconds})", f"{minutes}:0{seconds}"), fn
            )
        ],
    )


def percent_change(n: Namer) -> Unit:
    """The change between two values in percent."""
    names = {"fn": n.fresh(["percent_change", "growth_pct", "change_pct"])}
    names |= {"old": n.var("old"), "new": n.var("new")}
    old = n.integer(10, 60)
    new = old + n.integer(20, 90)
    fn = names["fn"]
    return make_unit(
        '''
def $fn($old, $new):
    """Return the change from $old to $new in percent, to 1 place."""
@@    return round(($new - $old) / $old * 100, 1)
''',
        names,
        decoys=[
            "    return round(($old - $new) / $old * 100, 1)",
            "    return round(($new - $old) / $new * 100, 1)",
        ],
        tests=[
            case(f"test_{fn}", check(f"{fn}({old}, {new})", round((new - old) / old * 100, 1)), fn)
        ],
    )


def initials(n: Namer) -> Unit:
    """The upper-case initials of a name."""
    names = {
        "fn": n.fresh(["initials", "monogram", "short_name"]),
        "name": n.var("text"),
        "w": n.var("one"),
    }
    a, b = n.word(), n.word()
    fn = names["fn"]
    return make_unit(
        '''
def $fn($name):
    """Return the upper-case initials of $name."""
@@    return "".join($w[0].upper() for $w in $name.split())
''',
        names,
        decoys=[
            '    return "".join($w[-1].upper() for $w in $name.split())',
            '    return "".join($w[0] for $w in $name.split())',
        ],
        tests=[case(f"test_{fn}", check(f'{fn}("{a} {b}")', (a[0] + b[0]).upper()), fn)],
    )


def weighted_total(n: Namer) -> Unit:
    """The sum of count times price over pairs."""
    names = {
        "fn": n.fresh(["weighted_total", "basket_total", "line_total"]),
        "pairs": n.var("pairs"),
    }
    names |= {"c": n.var("qty"), "p": n.var("price")}
    pairs = [(n.integer(2, 9), n.integer(3, 50)) for _ in range(3)]
    fn = names["fn"]
    return make_unit(
        '''
def $fn($pairs):
    """Return the sum of count times price over the (count, price) $pairs."""
@@    return sum($c * $p for $c, $p in $pairs)
''',
        names,
        decoys=[
            "    return sum($c + $p for $c, $p in $pairs)",
            "    return sum($p for $c, $p in $pairs)",
        ],
        tests=[case(f"test_{fn}", check(f"{fn}({pairs})", sum(c * p for c, p in pairs)), fn)],
    )


DISTRACTORS: tuple[Callable[[Namer], Unit], ...] = (
    capitalise,
    spread,
    is_multiple,
    count_equal,
    clock,
    percent_change,
    initials,
    weighted_total,
)
"""Makers of correct helper units."""
