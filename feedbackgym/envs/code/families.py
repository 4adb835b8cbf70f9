"""The bug families: templates that make a faulty function, its fix, wrong fixes and tests.

Every family draws names and values from a :class:`~feedbackgym.envs.code.names.Namer`
(and picks among a few variants), so instances rarely repeat; a test checks
that each family yields at least 200 distinct ones. For each instance:

* exactly one visible test fails on the buggy code (the first one);
* the fix passes every visible and hidden test;
* every wrong fix fails some test; in most families one of them passes the
  visible tests and fails only hidden ones (it fits the visible tests, not
  the intent).

Expected values are computed here with the intended semantics and written as
literals. Templates use ``$name`` placeholders; ``@@`` marks the faulty line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from feedbackgym.envs.code.names import Namer
from feedbackgym.envs.code.project import Bug, TestCase, Unit, render

__all__ = ["FAMILIES", "case", "check", "make_unit", "raises"]


def case(name: str, body: Sequence[str], *uses: str) -> TestCase:
    """A test case ``name`` with ``body`` statements, importing ``uses``."""
    return TestCase(name, tuple(body), uses)


def check(expression: str, expected: object, *, same: bool = False) -> list[str]:
    """Lines asserting ``expression == expected`` (``is`` when ``same``), showing the value."""
    operator = "is" if same else "=="
    return [f"got = {expression}", f"assert got {operator} {expected!r}, got"]


def raises(statement: str, error: str, *, contains: str | None = None) -> list[str]:
    """Lines asserting that ``statement`` raises ``error`` (with ``contains`` in its message)."""
    handler = f"    assert {contains!r} in str(exc), str(exc)" if contains else "    pass"
    return [
        "try:",
        f"    {statement}",
        f"except {error} as exc:",
        handler,
        "else:",
        f'    raise AssertionError("no {error}")',
    ]


def make_unit(
    template: str,
    names: dict[str, str],
    *,
    decoys: Sequence[str],
    tests: Sequence[TestCase],
    hidden: Sequence[TestCase] = (),
    preamble: Sequence[str] = (),
    needs: Sequence[str] = (),
) -> Unit:
    """Renders ``template`` and ``decoys`` (templates of the marked line) into a unit."""
    code, marked = render(template, names)
    return Unit(
        name=names["fn"],
        code=code,
        decoy_line=marked,
        decoys=tuple(_line(d, names) for d in decoys),
        tests=tuple(tests),
        hidden=tuple(hidden),
        preamble=tuple(_line(p, names) for p in preamble),
        needs=tuple(needs),
    )


def _line(template: str, names: dict[str, str]) -> str:
    return render(template, names)[0][0]


def _bug(family: str, unit: Unit, fix: str, names: dict[str, str]) -> Bug:
    return Bug(family, unit, _line(fix, names))


def off_by_one(n: Namer) -> Bug:
    """A loop that stops one item early."""
    noun = n.noun()
    names = {"fn": n.function(noun), "xs": n.var("seq"), "n": n.var("count")}
    names |= {"acc": n.var("acc"), "i": n.var("index"), "noun": noun}
    fn, values, shown = names["fn"], n.integers(6, 1, 60), n.integer(2, 4)
    unit = make_unit(
        '''
def $fn($xs, $n):
    """Return the sum of the first $n $noun values in $xs."""
    $acc = 0
@@    for $i in range($n - 1):
        $acc += $xs[$i]
    return $acc
''',
        names,
        decoys=[
            "    for $i in range(1, $n):",
            "    for $i in range($n + 1):",
            "    for $i in range(len($xs) - 1):",
            f"    for $i in range(min($n, {shown})):",
        ],
        tests=[
            case(
                f"test_{fn}_first_{shown}",
                check(f"{fn}({values}, {shown})", sum(values[:shown])),
                fn,
            ),
            case(f"test_{fn}_none", check(f"{fn}({values[:2]}, 0)", 0), fn),
        ],
        hidden=[
            case(f"test_{fn}_all", check(f"{fn}({values}, 6)", sum(values)), fn),
            case(f"test_{fn}_one", check(f"{fn}({values[2:]}, 1)", values[2]), fn),
        ],
    )
    return _bug("off_by_one", unit, "    for $i in range($n):", names)


_COMPARISONS = {
    # operator: (phrase, buggy operator, wrong fix that agrees with it on integers only)
    ">=": ("at least", ">", "$x > $limit - 1"),
    "<=": ("at most", "<", "$x < $limit + 1"),
    ">": ("strictly above", ">=", "$x >= $limit + 1"),
    "<": ("strictly below", "<=", "$x <= $limit - 1"),
}


def wrong_comparison(n: Namer) -> Bug:
    """A strict comparison where an inclusive one is meant, or the reverse."""
    good = n.choice(sorted(_COMPARISONS))
    phrase, bad, integer_only = _COMPARISONS[good]
    noun = n.noun()
    names = {"fn": n.function(noun), "xs": n.var("seq"), "x": n.var("one")}
    names |= {"limit": n.var("limit"), "noun": noun, "phrase": phrase, "bad": bad}
    fn, limit = names["fn"], n.integer(20, 80)
    keep = {
        ">=": lambda v: v >= limit,
        "<=": lambda v: v <= limit,
        ">": lambda v: v > limit,
        "<": lambda v: v < limit,
    }[good]
    ints = [limit - n.integer(1, 9), limit, limit + n.integer(1, 9), limit - n.integer(10, 19)]
    ints = [int(v) for v in n.rng.permutation(ints)]
    floats = [limit - 0.5, limit + 0.5, float(limit), limit + 2.0]
    others = sorted({">", ">=", "<", "<=", "==", "!="} - {good, bad})
    picked = [others[int(i)] for i in n.rng.choice(len(others), 2, replace=False)]
    unit = make_unit(
        '''
def $fn($xs, $limit):
    """Return the $noun values in $xs that are $phrase $limit, in order."""
@@    return [$x for $x in $xs if $x $bad $limit]
''',
        names,
        decoys=[
            *(f"    return [$x for $x in $xs if $x {op} $limit]" for op in picked),
            f"    return [$x for $x in $xs if {integer_only}]",
        ],
        tests=[
            case(
                f"test_{fn}_mixed",
                check(f"{fn}({ints}, {limit})", [v for v in ints if keep(v)]),
                fn,
            ),
            case(f"test_{fn}_empty", check(f"{fn}([], {limit})", []), fn),
        ],
        hidden=[
            case(
                f"test_{fn}_fractions",
                check(f"{fn}({floats}, {limit})", [v for v in floats if keep(v)]),
                fn,
            ),
        ],
    )
    return _bug(
        "wrong_comparison", unit, f"    return [$x for $x in $xs if $x {good} $limit]", names
    )


def missing_edge_case(n: Namer) -> Bug:
    """An empty input that the function does not handle."""
    noun = n.noun()
    names = {"fn": n.function(noun), "xs": n.var("seq"), "noun": noun}
    fn = names["fn"]
    if n.integer(0, 1):
        names["total"] = n.var("acc")
        three = n.integers(3, 1, 40)
        while sum(three) % 3 == 0:
            three[0] += 1
        pair = n.integers(2, 1, 40)
        if sum(pair) % 2 == 0:
            pair[0] += 1
        single = n.integer(1, 90)
        unit = make_unit(
            '''
def $fn($xs):
    """Return the mean of the $noun values in $xs, or 0.0 when there are none."""
    $total = sum($xs)
@@    return $total / len($xs)
''',
            names,
            decoys=[
                "    return $total / (len($xs) + 1)",
                "    return $total / len($xs) if len($xs) > 1 else 0.0",
                "    return $total // len($xs) if $xs else 0.0",
                "    return 0.0 if $xs else $total / len($xs)",
            ],
            tests=[
                case(f"test_{fn}_empty", check(f"{fn}([])", 0.0), fn),
                case(f"test_{fn}_three", check(f"{fn}({three})", sum(three) / 3), fn),
            ],
            hidden=[
                case(f"test_{fn}_single", check(f"{fn}([{single}])", float(single)), fn),
                case(f"test_{fn}_pair", check(f"{fn}({pair})", sum(pair) / 2), fn),
            ],
        )
        return _bug(
            "missing_edge_case", unit, "    return $total / len($xs) if $xs else 0.0", names
        )
    names["default"] = n.var("default")
    values = n.integers(3, 1, 90)
    values = [max(values), *(v for v in values if v != max(values))]
    fallback, single = -n.integer(1, 9), n.integer(1, 90)
    unit = make_unit(
        '''
def $fn($xs, $default=None):
    """Return the largest of $xs, or $default when $xs is empty."""
@@    return max($xs)
''',
        names,
        decoys=[
            "    return max($xs, default=0)",
            "    return max($xs) if $xs else None",
            "    return min($xs) if $xs else $default",
            "    return max($xs[1:]) if $xs else $default",
        ],
        tests=[
            case(f"test_{fn}_empty", check(f"{fn}([])", None, same=True), fn),
            case(f"test_{fn}_some", check(f"{fn}({values})", values[0]), fn),
        ],
        hidden=[
            case(f"test_{fn}_fallback", check(f"{fn}([], {fallback})", fallback), fn),
            case(f"test_{fn}_single", check(f"{fn}([{single}])", single), fn),
        ],
    )
    return _bug("missing_edge_case", unit, "    return max($xs) if $xs else $default", names)


def wrong_default(n: Namer) -> Bug:
    """A keyword default that disagrees with the documented one."""
    noun = n.noun()
    fn = n.function(noun)
    if n.integer(0, 1):
        names = {"fn": fn, "part": n.var("part"), "whole": n.var("whole"), "scale": n.var("scale")}
        bad, *others = n.shuffled(["10", "1", "1000"])
        names |= {"bad": bad, "noun": noun}
        part, whole = n.integer(1, 40), n.integer(41, 90)
        p2, w2, s2 = n.integer(1, 40), n.integer(41, 90), n.integer(2, 9)
        p3, w3, s3 = n.integer(1, 40), n.integer(41, 90), n.integer(11, 60)
        scale = names["scale"]
        unit = make_unit(
            '''
@@def $fn($part, $whole, $scale=$bad):
    """Return $part as a share of $whole times $scale (default 100), to 2 places."""
    return round($part * $scale / $whole, 2)
''',
            names,
            decoys=[
                *(f"def $fn($part, $whole, $scale={value}):" for value in others),
                "def $fn($part, $whole, *, $scale=100):",
            ],
            tests=[
                case(
                    f"test_{fn}_default",
                    check(f"{fn}({part}, {whole})", round(part * 100 / whole, 2)),
                    fn,
                ),
                case(
                    f"test_{fn}_scaled",
                    check(f"{fn}({p2}, {w2}, {scale}={s2})", round(p2 * s2 / w2, 2)),
                    fn,
                ),
            ],
            hidden=[
                case(
                    f"test_{fn}_positional",
                    check(f"{fn}({p3}, {w3}, {s3})", round(p3 * s3 / w3, 2)),
                    fn,
                ),
            ],
        )
        return _bug("wrong_default", unit, "def $fn($part, $whole, $scale=100):", names)
    names = {"fn": fn, "words": n.var("words"), "sep": n.var("sep")}
    bad, *others = n.shuffled(['","', '" "', '"; "'])
    names |= {"bad": bad}
    words = [n.word() for _ in range(3)]
    sep = names["sep"]
    unit = make_unit(
        '''
@@def $fn($words, $sep=$bad):
    """Join $words with $sep (default ", ")."""
    return $sep.join($words)
''',
        names,
        decoys=[
            *(f"def $fn($words, $sep={value}):" for value in others),
            'def $fn($words, *, $sep=", "):',
        ],
        tests=[
            case(f"test_{fn}_default", check(f"{fn}({words})", ", ".join(words)), fn),
            case(
                f"test_{fn}_dash", check(f'{fn}({words[:2]}, {sep}="-")', "-".join(words[:2])), fn
            ),
        ],
        hidden=[
            case(f"test_{fn}_positional", check(f'{fn}({words}, "/")', "/".join(words)), fn),
        ],
    )
    return _bug("wrong_default", unit, 'def $fn($words, $sep=", "):', names)


def mutable_default(n: Namer) -> Bug:
    """A mutable default argument shared by every call."""
    noun = n.noun()
    fn = n.function(noun)
    a, b, c, d = (n.word() for _ in range(4))
    if n.integer(0, 1):
        names = {"fn": fn, "item": n.var("one"), "bucket": n.var("bucket"), "noun": noun}
        unit = make_unit(
            '''
@@def $fn($item, $bucket=[]):
    """Add $item to $bucket (a new list when none is given) and return it."""
    if $bucket is None:
        $bucket = []
    $bucket.append($item)
    return $bucket
''',
            names,
            decoys=[
                "def $fn($item, $bucket=list()):",
                "def $fn($item, $bucket=()):",
                "def $fn($item, $bucket=[None]):",
            ],
            tests=[
                case(f"test_{fn}_fresh_list", [f"{fn}({a!r})", *check(f"{fn}({b!r})", [b])], fn),
                case(f"test_{fn}_given_list", check(f"{fn}({c!r}, [{d!r}])", [d, c]), fn),
            ],
            hidden=[
                case(
                    f"test_{fn}_same_list",
                    [
                        f"mine = [{d!r}]",
                        f"got = {fn}({c!r}, mine)",
                        f"assert got is mine and mine == {[d, c]!r}, mine",
                    ],
                    fn,
                ),
                case(f"test_{fn}_again", check(f"{fn}({a!r})", [a]), fn),
            ],
        )
        return _bug("mutable_default", unit, "def $fn($item, $bucket=None):", names)
    names = {"fn": fn, "key": n.var("key"), "counts": n.var("counts")}
    unit = make_unit(
        '''
@@def $fn($key, $counts={}):
    """Count one more $key in $counts (a new dict when none is given) and return it."""
    if $counts is None:
        $counts = {}
    $counts[$key] = $counts.get($key, 0) + 1
    return $counts
''',
        names,
        decoys=[
            "def $fn($key, $counts=dict()):",
            "def $fn($key, $counts={}.copy()):",
            "def $fn($key, $counts=[]):",
        ],
        tests=[
            case(f"test_{fn}_fresh_dict", [f"{fn}({a!r})", *check(f"{fn}({b!r})", {b: 1})], fn),
            case(f"test_{fn}_given_dict", check(f"{fn}({c!r}, {{{c!r}: 2}})", {c: 3}), fn),
        ],
        hidden=[
            case(
                f"test_{fn}_same_dict",
                [
                    f"mine = {{{d!r}: 1}}",
                    f"got = {fn}({d!r}, mine)",
                    f"assert got is mine and mine == {{{d!r}: 2}}, mine",
                ],
                fn,
            ),
            case(f"test_{fn}_again", check(f"{fn}({a!r})", {a: 1}), fn),
        ],
    )
    return _bug("mutable_default", unit, "def $fn($key, $counts=None):", names)


def wrong_exception(n: Namer) -> Bug:
    """The wrong exception type (or none) for bad input."""
    noun = n.noun()
    fn = n.function(noun)
    if n.integer(0, 1):
        names = {"fn": fn, "table": n.var("table"), "key": n.var("key"), "noun": noun}
        k1, k2, k3 = n.word(), n.word(), n.word()
        v1 = n.integer(1, 99)
        table = {k1: v1, k3: n.integer(1, 99)}
        unit = make_unit(
            '''
def $fn($table, $key):
    """Return the $noun under $key; raise ValueError naming $key when it is missing."""
    if $key not in $table:
@@        raise KeyError($key)
    return $table[$key]
''',
            names,
            decoys=[
                '        raise TypeError(f"unknown $noun: {$key}")',
                "        return None",
                '        raise ValueError("unknown $noun")',
                "        raise LookupError($key)",
            ],
            tests=[
                case(f"test_{fn}_missing", raises(f"{fn}({table!r}, {k2!r})", "ValueError"), fn),
                case(f"test_{fn}_found", check(f"{fn}({table!r}, {k1!r})", v1), fn),
            ],
            hidden=[
                case(
                    f"test_{fn}_names_key",
                    raises(f"{fn}({table!r}, {k2 + 'q'!r})", "ValueError", contains=k2 + "q"),
                    fn,
                ),
            ],
        )
        return _bug(
            "wrong_exception", unit, '        raise ValueError(f"unknown $noun: {$key}")', names
        )
    names = {"fn": fn, "text": n.var("text"), "value": n.var("one"), "noun": noun}
    shown, hidden_value, ok = n.integer(1, 9), n.integer(10, 99), n.integer(2, 500)
    unit = make_unit(
        '''
def $fn($text):
    """Parse $text as a count of ${noun}s; raise ValueError naming it when negative."""
    $value = int($text)
    if $value < 0:
@@        return 0
    return $value
''',
        names,
        decoys=[
            "        return abs($value)",
            '        raise TypeError(f"negative count: {$text}")',
            '        raise ValueError("negative count")',
            "        return None",
        ],
        tests=[
            case(f"test_{fn}_negative", raises(f'{fn}("-{shown}")', "ValueError"), fn),
            case(f"test_{fn}_plain", check(f'{fn}("{ok}")', ok), fn),
        ],
        hidden=[
            case(
                f"test_{fn}_names_value",
                raises(f'{fn}("-{hidden_value}")', "ValueError", contains=f"-{hidden_value}"),
                fn,
            ),
            case(f"test_{fn}_zero", check(f'{fn}("0")', 0), fn),
        ],
    )
    return _bug(
        "wrong_exception", unit, '        raise ValueError(f"negative count: {$text}")', names
    )


def swapped_arguments(n: Namer) -> Bug:
    """A call that passes a helper's arguments in the wrong order."""
    noun = n.noun()
    fn = n.function(noun)
    if n.integer(0, 1):
        helper = {"fn": n.fresh(["clamp", "bound", "limit_to", "squeeze"])}
        helper |= {"v": n.var("one"), "lo": n.var("low"), "hi": n.var("high")}
        low, high = n.integer(5, 30), n.integer(50, 90)
        helper_unit = make_unit(
            '''
def $fn($v, $lo, $hi):
    """Return $v limited to the range [$lo, $hi]."""
@@    return max($lo, min($v, $hi))
''',
            helper,
            decoys=["    return min($lo, max($v, $hi))", "    return max($lo, min($v, $lo))"],
            tests=[
                case(
                    f"test_{helper['fn']}_above",
                    check(f"{helper['fn']}(120, {low}, {high})", high),
                    helper["fn"],
                )
            ],
        )
        names = {"fn": fn, "xs": n.var("seq"), "x": n.var("one"), "floor": n.var("low")}
        names |= {"ceiling": n.var("high"), "clamp": helper["fn"], "noun": noun}
        shown = [low + 1, high + n.integer(1, 20), high - 1, high + n.integer(21, 40)]
        hidden = [low - n.integer(1, 5), high + 1, low]
        clip = lambda v: max(low, min(v, high))  # noqa: E731
        unit = make_unit(
            '''
def $fn($xs, $floor, $ceiling):
    """Return each $noun value of $xs limited to [$floor, $ceiling]."""
@@    return [$clamp($floor, $x, $ceiling) for $x in $xs]
''',
            names,
            decoys=[
                "    return [$clamp($x, $ceiling, $floor) for $x in $xs]",
                "    return [$clamp($ceiling, $x, $floor) for $x in $xs]",
                "    return [min($x, $ceiling) for $x in $xs]",
                "    return [$clamp($x, $floor, $ceiling - 1) for $x in $xs]",
            ],
            tests=[
                case(
                    f"test_{fn}_high",
                    check(f"{fn}({shown}, {low}, {high})", [clip(v) for v in shown]),
                    fn,
                )
            ],
            hidden=[
                case(
                    f"test_{fn}_low",
                    check(f"{fn}({hidden}, {low}, {high})", [clip(v) for v in hidden]),
                    fn,
                )
            ],
            needs=[helper["fn"]],
        )
        return Bug(
            "swapped_arguments",
            unit,
            _line("    return [$clamp($x, $floor, $ceiling) for $x in $xs]", names),
            helper_unit,
        )
    helper = {"fn": n.fresh(["span", "elapsed", "gap_between", "duration"])}
    helper |= {"start": n.var("start"), "end": n.var("end")}
    helper_unit = make_unit(
        '''
def $fn($start, $end):
    """Return the time from $start to $end (negative when $end comes first)."""
@@    return $end - $start
''',
        helper,
        decoys=["    return $start - $end", "    return abs($end - $start)"],
        tests=[
            case(
                f"test_{helper['fn']}_backwards",
                check(f"{helper['fn']}(30, 12)", -18),
                helper["fn"],
            )
        ],
    )
    names = {"fn": fn, "stops": n.var("seq"), "a": n.var("one"), "b": n.var("one")}
    names |= {"span": helper["fn"], "noun": noun}
    stops = sorted(n.integers(4, 0, 300))
    back = [n.integer(100, 200), n.integer(0, 50), n.integer(60, 90)]
    gaps = lambda xs: [y - x for x, y in zip(xs, xs[1:], strict=False)]  # noqa: E731
    unit = make_unit(
        '''
def $fn($stops):
    """Return the time between each pair of consecutive $noun stops."""
@@    return [$span($b, $a) for $a, $b in zip($stops, $stops[1:])]
''',
        names,
        decoys=[
            "    return [abs($span($b, $a)) for $a, $b in zip($stops, $stops[1:])]",
            "    return [$span($a, $a) for $a, $b in zip($stops, $stops[1:])]",
            "    return [$span($a, $b) for $a, $b in zip($stops, $stops[2:])]",
            "    return [$b + $a for $a, $b in zip($stops, $stops[1:])]",
        ],
        tests=[case(f"test_{fn}_forward", check(f"{fn}({stops})", gaps(stops)), fn)],
        hidden=[
            case(f"test_{fn}_backward", check(f"{fn}({back})", gaps(back)), fn),
            case(f"test_{fn}_single", check(f"{fn}([{stops[0]}])", []), fn),
        ],
        needs=[helper["fn"]],
    )
    return Bug(
        "swapped_arguments",
        unit,
        _line("    return [$span($a, $b) for $a, $b in zip($stops, $stops[1:])]", names),
        helper_unit,
    )


def state_leak(n: Namer) -> Bug:
    """Module-level state that leaks from one call into the next."""
    noun = n.noun()
    fn = n.function(noun)
    if n.integer(0, 1):
        names = {"fn": fn, "base": n.var("base"), "rate": n.var("rate"), "key": n.var("key")}
        names |= {"cache": n.var("cache")}
        grow = lambda b, r: round(b * (1 + r / 100), 2)  # noqa: E731
        b1, r1, r2 = n.integer(100, 500), n.integer(1, 20), n.integer(21, 40)
        b3, r3 = b1 + n.integer(1, 50), n.integer(1, 40)
        x, y, d = n.integer(600, 900), n.integer(20, 40), n.integer(5, 15)
        unit = make_unit(
            '''
def $fn($base, $rate):
    """Return $base grown by $rate percent, to 2 places (results are cached)."""
@@    $key = $base
    if $key not in _$cache:
        _$cache[$key] = round($base * (1 + $rate / 100), 2)
    return _$cache[$key]
''',
            names,
            decoys=[
                "    $key = $rate",
                "    $key = $base + $rate",
                "    $key = str($base)",
                "    $key = ($base, $base)",
            ],
            tests=[
                case(
                    f"test_{fn}_two_rates",
                    [f"{fn}({b1}, {r1})", *check(f"{fn}({b1}, {r2})", grow(b1, r2))],
                    fn,
                ),
                case(f"test_{fn}_once", check(f"{fn}({b3}, {r3})", grow(b3, r3)), fn),
            ],
            hidden=[
                case(
                    f"test_{fn}_same_sum",
                    [f"{fn}({x}, {y})", *check(f"{fn}({x + d}, {y - d})", grow(x + d, y - d))],
                    fn,
                ),
                case(
                    f"test_{fn}_same_rate",
                    [f"{fn}({x + 100}, {r3})", *check(f"{fn}({x + 200}, {r3})", grow(x + 200, r3))],
                    fn,
                ),
            ],
            preamble=["_$cache = {}"],
        )
        return _bug("state_leak", unit, "    $key = ($base, $rate)", names)
    names = {
        "fn": fn,
        "xs": n.var("seq"),
        "x": n.var("one"),
        "out": n.var("found"),
        "seen": n.var("cache"),
    }
    names |= {"noun": noun}
    a, b = n.integers(2, 1, 50)
    c, d = sorted(n.integers(2, 51, 99), reverse=True)
    e, f = n.integers(2, 100, 150)
    unit = make_unit(
        '''
def $fn($xs):
    """Return the distinct $noun values of $xs in first-seen order."""
@@    $out = _$seen
    for $x in $xs:
        if $x not in $out:
            $out.append($x)
    return $out
''',
        names,
        decoys=[
            "    $out = list($xs)",
            "    $out = sorted(set($xs))",
            "    _$seen.clear(); $out = _$seen",
        ],
        tests=[
            case(
                f"test_{fn}_second_call",
                [f"{fn}({[a, b, a]})", *check(f"{fn}({[c, d, c]})", [c, d])],
                fn,
            )
        ],
        hidden=[
            case(
                f"test_{fn}_first_result_kept",
                [f"first = {fn}({[e, f, e]})", f"{fn}({[a]})", f"assert first == {[e, f]}, first"],
                fn,
            ),
        ],
        preamble=["_$seen = []"],
    )
    return _bug("state_leak", unit, "    $out = []", names)


def wrong_operator(n: Namer) -> Bug:
    """An arithmetic operator that points the wrong way."""
    noun = n.noun()
    fn = n.function(noun)
    if n.integer(0, 1):
        names = {"fn": fn, "price": n.var("price"), "qty": n.var("qty"), "pct": n.var("rate")}
        names |= {"gross": n.var("gross"), "noun": noun}
        cost = lambda p, q, r: round(p * q - p * q * r / 100, 2)  # noqa: E731
        price, qty, pct = 10 * n.integer(1, 9), n.integer(2, 9), 10 * n.integer(1, 5)
        while price * qty == 100:
            qty += 1
        p2, q2 = n.integer(3, 50), n.integer(1, 9)
        p3, q3, r3 = n.integer(101, 999) / 100, n.integer(2, 9), n.integer(11, 19)
        while cost(p3, q3, r3) == round(cost(p3, q3, r3)):
            p3 = round(p3 + 0.01, 2)
        unit = make_unit(
            '''
def $fn($price, $qty, $pct):
    """Return the cost of $qty ${noun}s at $price each, less $pct percent, to 2 places."""
    $gross = $price * $qty
@@    return round($gross + $gross * $pct / 100, 2)
''',
            names,
            decoys=[
                "    return round($gross - $pct, 2)",
                "    return round($gross * $pct / 100, 2)",
                "    return round($gross - $gross * $pct / 10, 2)",
                "    return round($gross - $gross * $pct / 100)",
            ],
            tests=[
                case(
                    f"test_{fn}_discount",
                    check(f"{fn}({price}, {qty}, {pct})", cost(price, qty, pct)),
                    fn,
                ),
                case(f"test_{fn}_no_discount", check(f"{fn}({p2}, {q2}, 0)", cost(p2, q2, 0)), fn),
            ],
            hidden=[
                case(f"test_{fn}_cents", check(f"{fn}({p3}, {q3}, {r3})", cost(p3, q3, r3)), fn)
            ],
        )
        return _bug(
            "wrong_operator", unit, "    return round($gross - $gross * $pct / 100, 2)", names
        )
    names = {"fn": fn, "capacity": n.var("capacity"), "used": n.var("used"), "noun": noun}
    cap, used = n.integer(20, 90), n.integer(1, 15)
    full = n.integer(5, 30)
    unit = make_unit(
        '''
def $fn($capacity, $used):
    """Return how many more ${noun}s fit: $capacity minus $used, never below zero."""
@@    return max(0, $capacity + $used)
''',
        names,
        decoys=[
            "    return max(0, $used - $capacity)",
            "    return $capacity - $used",
            "    return min(0, $capacity - $used)",
            "    return max(1, $capacity - $used)",
        ],
        tests=[
            case(f"test_{fn}_room_left", check(f"{fn}({cap}, {used})", cap - used), fn),
            case(f"test_{fn}_nothing", check(f"{fn}(0, 0)", 0), fn),
        ],
        hidden=[
            case(f"test_{fn}_over", check(f"{fn}({full}, {full + n.integer(1, 9)})", 0), fn),
            case(f"test_{fn}_full", check(f"{fn}({full}, {full})", 0), fn),
        ],
    )
    return _bug("wrong_operator", unit, "    return max(0, $capacity - $used)", names)


def early_return(n: Namer) -> Bug:
    """A ``return`` indented into the loop, so only the first row counts."""
    noun = n.noun()
    names = {"fn": n.function(noun), "rows": n.var("rows"), "row": n.var("row")}
    names |= {"found": n.var("found"), "field": n.var("field"), "flag": n.var("flag")}
    fn, field, flag = names["fn"], names["field"], names["flag"]
    words = [n.word() for _ in range(8)]
    flags = [True, False, True, True, False]
    rows = [{field: w, flag: f} for w, f in zip(words, flags, strict=False)]
    kept = [r[field] for r in rows if r[flag]]
    more = [{field: w, flag: True} for w in words[5:]] + rows[:2]
    unit = make_unit(
        '''
def $fn($rows):
    """Return the "$field" of every row whose "$flag" is true, in order."""
    $found = []
    for $row in $rows:
        if $row["$flag"]:
            $found.append($row["$field"])
@@        return $found
''',
        names,
        decoys=[
            "            return $found",
            "    return $found[::-1]",
            "    return $found[1:]",
            f"    return $found[:{len(kept)}]",
        ],
        tests=[case(f"test_{fn}_several", check(f"{fn}({rows!r})", kept), fn)],
        hidden=[
            case(
                f"test_{fn}_more", check(f"{fn}({more!r})", [r[field] for r in more if r[flag]]), fn
            ),
            case(f"test_{fn}_empty", check(f"{fn}([])", []), fn),
        ],
    )
    return _bug("early_return", unit, "    return $found", names)


FAMILIES: dict[str, Callable[[Namer], Bug]] = {
    "off_by_one": off_by_one,
    "wrong_comparison": wrong_comparison,
    "missing_edge_case": missing_edge_case,
    "wrong_default": wrong_default,
    "mutable_default": mutable_default,
    "wrong_exception": wrong_exception,
    "swapped_arguments": swapped_arguments,
    "state_leak": state_leak,
    "wrong_operator": wrong_operator,
    "early_return": early_return,
}
"""Every bug family, by name."""
