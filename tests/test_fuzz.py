"""Fuzzing the parsers agents and users feed, and the soak benchmark: nothing breaks, nothing leaks.

Hypothesis draws text (LLM-style replies included), integers, floats, bytes, None,
arrays and nested values; every parser must return a valid action (or config)
or raise its own error type (``InvalidAction``, ``ConfigError``), never anything
else (a ``TypeError``, an ``IndexError``, a ``re`` error ...).
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedbackgym.config import ConfigError, FeedbackConfig
from feedbackgym.envs.code.actions import N_ACTIONS as CODE_ACTIONS
from feedbackgym.envs.code.actions import FreeEdit
from feedbackgym.envs.code.actions import parse_action as parse_code
from feedbackgym.envs.code.generator import generate
from feedbackgym.envs.incident import IncidentEnv
from feedbackgym.envs.ops.actions import ACTION_MEANINGS, N_ACTIONS
from feedbackgym.envs.ops.actions import parse_action as parse_ops
from feedbackgym.envs.web.actions import ActionTable
from feedbackgym.errors import InvalidAction

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WORDS = st.sampled_from(
    [
        "inspect",
        "logs",
        "metrics",
        "restart",
        "app",
        "db_replica",
        "click",
        "type",
        "select",
        "scroll",
        "down",
        "back",
        "edit",
        "run",
        "tests",
        "Action:",
        "next action:",
        '"x"',
        "`",
        "0",
        "7",
        "-1",
        "99999999999999999999",
        "\n",
        "é",
        "\x00",
        "{",
        "}",
        "*",
        "(",
        "[",
    ]
)
TEXT = st.one_of(
    st.text(max_size=60),
    st.lists(WORDS, max_size=8).map(" ".join),  # near-miss action texts
)
ANY = st.one_of(
    TEXT,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
    st.binary(max_size=20),
    st.integers(-5, 500).map(np.int64),
    st.integers(-5, 500).map(np.array),  # 0-d arrays, as a vector env hands them out
    st.lists(st.integers(), max_size=3),
)


@FUZZ
@given(ANY)
def test_the_ops_parser_returns_an_action_or_says_why_not(action):
    try:
        index = parse_ops(action)
    except InvalidAction as error:
        assert str(error)
    else:
        assert 0 <= index < N_ACTIONS and isinstance(index, int)


def test_the_ops_parser_reads_every_meaning_back():
    assert [parse_ops(meaning) for meaning in ACTION_MEANINGS] == list(range(N_ACTIONS))


INCIDENT = IncidentEnv("hard")
INCIDENT.reset(seed=0)


@FUZZ
@given(ANY)
def test_the_v1_parser_returns_an_action_or_says_why_not(action):
    try:
        index = INCIDENT.parse_action(action)
    except InvalidAction as error:
        assert str(error)
    else:
        assert 0 <= index < INCIDENT.action_space.n and isinstance(index, int)


def test_the_v1_parser_reads_every_live_meaning_back():
    live = np.flatnonzero(INCIDENT.action_masks())
    assert [INCIDENT.parse_action(INCIDENT.action_meanings[i]) for i in live] == list(live)


PROJECT = generate("off_by_one", "medium", np.random.default_rng(0))
LINES = {name: len(code.splitlines()) for name, code in PROJECT.files}


@FUZZ
@given(ANY | st.builds(FreeEdit, st.text(max_size=12), st.integers(-3, 400), st.text(max_size=30)))
def test_the_code_parser_returns_an_action_or_says_why_not(action):
    for project, lines in ((None, {}), (PROJECT, LINES)):
        try:
            parsed = parse_code(action, project, lines)
        except InvalidAction as error:
            assert str(error)
        else:
            assert isinstance(parsed, FreeEdit) or 0 <= parsed < CODE_ACTIONS


TABLE = ActionTable(8, ("Berlin", "Paris"), ("XL", "M"), back=True)


@FUZZ
@given(ANY)
def test_the_web_parser_returns_an_action_or_says_why_not(action):
    try:
        index = TABLE.parse(action, lambda text: None)
    except InvalidAction as error:
        assert str(error)
    else:
        assert 0 <= index < TABLE.n
        assert TABLE.parse(TABLE.meaning(index)) == index  # its meaning reads back


JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=12,
)
SECTIONS = st.sampled_from(
    ["guide", "review", "shaping", "schedule", "alert", "reliance", "explore", "nothing"]
)


@FUZZ
@given(st.dictionaries(SECTIONS, JSON | st.dictionaries(st.text(max_size=14), JSON), max_size=4))
def test_a_config_is_read_or_refused_by_name(mapping):
    try:
        config = FeedbackConfig.from_mapping(mapping, source="fuzz")
    except ConfigError as error:
        assert "fuzz" in str(error)
    else:
        assert FeedbackConfig.from_mapping(config.model_dump(mode="json")) == config


@pytest.mark.parametrize("text", ["", " ", "Action:", "click", 'type 1 "', "edit a.py 1"])
def test_near_misses_name_the_valid_choices(text):
    for parse in (parse_ops, TABLE.parse, lambda t: parse_code(t, PROJECT, LINES)):
        with pytest.raises(InvalidAction, match="valid|choose|one of|expected"):
            parse(text)


def test_the_soak_benchmark_runs_and_leaves_nothing_behind():
    import subprocess
    import sys
    from pathlib import Path

    result = subprocess.run(
        [sys.executable, "benchmarks/soak.py", "--seconds", "2"]
        + ["--ids", "feedbackgym/OpsIncidentEasy-v0", "feedbackgym/WebForm-v0"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert result.returncode == 0, result.stderr
    rows = [line.split("|") for line in result.stdout.splitlines() if line.startswith("| Ops")]
    rows += [line.split("|") for line in result.stdout.splitlines() if line.startswith("| Web")]
    assert len(rows) == 2
    for row in rows:
        assert int(row[2].replace(",", "")) > 0  # steps
        assert row[5].strip() == "0" and row[8].strip() == "0" and row[9].strip() == "0"


def test_the_episode_soak_reports_leaks_memory_and_rates():
    import json
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from tests.conftest import require

    require(shutil.which("bwrap") is not None, "bubblewrap")
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "benchmarks/soak.py", "--episodes", "4", "--targets", "CodeFix-local"]
        + ["--policies", "expert", "random", "--json", "/dev/stdout"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [(r["target"], r["policy"], r["episodes"]) for r in rows] == [
        ("CodeFix-local", "expert", 4),
        ("CodeFix-local", "random", 4),
    ]
    assert rows[0]["success"] == 1.0  # the expert fixes every bug
    for row in rows:
        assert (row["processes"], row["browsers"], row["containers"]) == (0, 0, 0)
        assert row["rss_mb"][0] > 0 and row["rate_first_quarter"] > 0
    table = [line for line in result.stdout.splitlines() if line.startswith("| CodeFix-local")]
    assert len(table) == 2 and all("| 0 / 0 / 0 |" in line for line in table)
