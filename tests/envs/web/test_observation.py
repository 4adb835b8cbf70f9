"""Text and vector observations of a page (no browser needed)."""

import numpy as np

from feedbackgym.envs.base import text_space
from feedbackgym.envs.web.observation import (
    CHARSET,
    MAX_TEXT_LENGTH,
    encode_vector,
    normalise,
    render_text,
    vector_space,
)
from feedbackgym.envs.web.snapshot import Element, PageSnapshot

ELEMENTS = (
    Element(0, "link", "Caf\u00e9 \u2013 Men\u00fc", x=40, y=20, width=80, height=20),
    Element(1, "textbox", "City", value="M\u00fcnchen \u2603", required=True),
    Element(2, "select", "Size", value="M", options=tuple(str(i) for i in range(40))),
    Element(
        3, "checkbox", "Terms", checked=True, invalid=True, error="Accept \u201cthe rules\u201d"
    ),
)
SNAPSHOT = PageSnapshot(
    title="Shop \u00d7 Caf\u00e9",
    path="/cart",
    heading="Your cart",
    messages=("Coupon \u20ac5 applied",),
    elements=ELEMENTS,
    more_below=True,
)


def test_normalise_maps_into_the_charset():
    text = normalise("\u201cZ\u00fcrich\u201d \u2014 5 \u00d7 \u20ac3\u2026 \u65e5\n")
    assert text == '"Zurich" - 5 x EUR3... ? '
    assert set(text) <= set(CHARSET)


def test_text_lists_elements_with_states_in_the_space():
    text = render_text(
        "Buy a caf\u00e9",
        SNAPSHOT,
        step=3,
        max_steps=60,
        last_action="click 9",
        notice="invalid: no element 9 in view (ids 0..3)",
    )
    assert text in text_space(MAX_TEXT_LENGTH)
    assert '[1] textbox "City" value="Munchen ?" required' in text
    assert '[3] checkbox "Terms" checked invalid "Accept \'the rules\'"' in text
    assert "options=0|1|2|" in text and "|... (+24)" in text
    assert "(more below: scroll down)" in text
    assert "Last action: click 9 (invalid: no element 9 in view (ids 0..3))" in text
    assert text.endswith("Step 3 of 60")


def test_text_is_cut_to_the_space():
    many = tuple(Element(i, "button", "x" * 80) for i in range(200))
    snapshot = PageSnapshot(title="t", path="/", elements=many)
    text = render_text("g", snapshot, step=0, max_steps=1)
    assert len(text) == MAX_TEXT_LENGTH and text in text_space(MAX_TEXT_LENGTH)


def test_vector_rows_and_goal_in_the_space():
    space = vector_space(slots=4, n_values=3)
    obs = encode_vector(
        "Ship to Kobenhavn, size M",
        ["M"],
        np.array([1, 0, 1], np.int8),
        SNAPSHOT,
        slots=4,
        step=30,
        max_steps=60,
        last_result=2,
    )
    assert obs in space
    rows = obs["elements"].reshape(4, -1)
    assert rows[:, 0].tolist() == [1, 1, 1, 1]
    assert rows[2, 18] == 1.0  # value "M" is a goal string
    assert obs["more"].tolist() == [0, 1] and obs["time"][0] == 0.5
    again = encode_vector(
        "Ship to Kobenhavn, size M",
        ["M"],
        np.array([1, 0, 1], np.int8),
        SNAPSHOT,
        slots=4,
        step=30,
        max_steps=60,
        last_result=2,
    )
    assert all(np.array_equal(obs[k], again[k]) for k in obs)


def test_snapshot_from_driver_json():
    data = {
        "title": "T",
        "path": "/x",
        "heading": "",
        "messages": ["m"],
        "more_above": False,
        "more_below": True,
        "scroll": {"up": False, "down": True},
        "can_go_back": True,
        "hidden": {"b": "below", "a": "above"},
        "app": {"k": 1},
        "elements": [
            {
                "id": 0,
                "role": "select",
                "label": "L",
                "value": "v",
                "key": "k",
                "x": 1,
                "y": 2,
                "width": 3,
                "height": 4,
                "checked": False,
                "disabled": False,
                "focused": False,
                "invalid": False,
                "required": False,
                "selected": False,
                "expanded": False,
                "error": "",
                "options": ["v", "w"],
            }
        ],
    }
    snapshot = PageSnapshot.from_json(data)
    assert snapshot.elements[0].options == ("v", "w")
    assert snapshot.by_key("k").id == 0 and snapshot.where("a") == "above"
    assert snapshot.can_scroll_down and snapshot.can_go_back and snapshot.app == {"k": 1}
