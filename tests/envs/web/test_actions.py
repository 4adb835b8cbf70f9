"""The action table of the web envs and its text parser (no browser needed)."""

import numpy as np
import pytest

from feedbackgym.envs.web.actions import ActionTable, WebAction, is_field_ref
from feedbackgym.errors import InvalidAction

TABLE = ActionTable(3, ("Berlin", "Paris"), ("XL",))


def test_layout_is_slot_major_with_page_actions_last():
    assert TABLE.n == 3 * 4 + 3
    assert TABLE.meanings[:4] == ("click 0", 'type 0 "Berlin"', 'type 0 "Paris"', 'select 0 "XL"')
    assert TABLE.meanings[4] == "click 1"
    assert TABLE.meanings[-3:] == ("scroll up", "scroll down", "back")
    assert TABLE.decode(TABLE.per_slot * 2 + 3) == WebAction("select", 2, "XL")


def test_every_meaning_parses_back_to_its_index():
    assert [TABLE.parse(meaning) for meaning in TABLE.meanings] == list(range(TABLE.n))


@pytest.mark.parametrize(
    "text, meaning",
    [
        ("Action: Click [2].", "click 2"),
        ("type 1 berlin", 'type 1 "Berlin"'),
        ("TYPE 1 'Paris'", 'type 1 "Paris"'),
        ('select 0 "xl"', 'select 0 "XL"'),
        ("scroll", "scroll down"),
        ("Scroll Up", "scroll up"),
        ("go back", "back"),
        ("5", 'type 1 "Berlin"'),
    ],
)
def test_text_forms(text, meaning):
    assert TABLE.meaning(TABLE.parse(text)) == meaning


def test_numpy_indices():
    assert TABLE.parse(np.int64(3)) == 3
    assert TABLE.parse(np.array(4)) == 4


@pytest.mark.parametrize(
    "action, message",
    [
        ("jump 3", "valid: 'click <id>'"),
        (99, "outside Discrete(15)"),
        (-1, "outside Discrete(15)"),
        ('type 0 "Rome"', "valid values: 'Berlin', 'Paris'"),
        ("select 0 Berlin", "valid values: 'XL'"),
        ("click 3", "out of range 0..2"),
        ('click 1 "x"', "takes no value"),
        ("type 1", "needs a value"),
        (True, "integer or text"),
        (2.5, "integer or text"),
    ],
)
def test_bad_actions_raise_naming_the_choices(action, message):
    with pytest.raises(InvalidAction, match=message.replace("(", r"\(").replace(")", r"\)")):
        TABLE.parse(action)


def test_goal_field_values():
    table = ActionTable(2, ("{target}",), (), back=False)
    assert is_field_ref("{target}") and not is_field_ref("{}")
    assert table.meanings == (
        "click 0",
        "type 0 {target}",
        "click 1",
        "type 1 {target}",
        "scroll up",
        "scroll down",
    )
    assert table.parse("type 1 {target}") == 3
    resolve = {"kLm2": "{target}"}.get
    assert table.parse('type 0 "kLm2"', resolve) == 1
    with pytest.raises(InvalidAction):
        table.parse('type 0 "other"', resolve)
    with pytest.raises(InvalidAction, match="'scroll up', 'scroll down', or"):
        table.parse("back")
