"""The observation rows: one buffer per dtype, fresh observations, views that survive a pickle."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from gymnasium import spaces

from feedbackgym.envs.incident.rows import ObservationRows

SPACE = spaces.Dict(
    {
        "flags": spaces.MultiBinary(6),
        "level": spaces.Box(0.0, 1.0, (2,), np.float32),
        "kind": spaces.Discrete(3),
    }
)


def test_an_observation_is_a_fresh_copy_of_every_field_in_the_spaces_order():
    rows = ObservationRows(SPACE)
    rows.field("flags").reshape(2, 3)[1, 0] = 1
    rows.field("level")[:] = 0.5
    first = rows.observation()
    rows.field("flags")[0] = 1
    first["level"][0] = 0.9  # a caller writing into its observation changes nothing else
    second = rows.observation()
    assert list(first) == ["flags", "level"]  # the Discrete field is the env's own
    assert first["flags"].tolist() == [0, 0, 0, 1, 0, 0]
    assert second["flags"].tolist() == [1, 0, 0, 1, 0, 0] and second["level"].tolist() == [0.5] * 2
    assert first["flags"].dtype == np.int8 and first["level"].dtype == np.float32
    assert SPACE["flags"].contains(second["flags"]) and SPACE["level"].contains(second["level"])
    rows.clear()
    assert not rows.observation()["flags"].any()


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda r: pickle.loads(pickle.dumps(r))])
def test_a_copy_writes_through_its_own_fields(clone):
    rows = ObservationRows(SPACE)
    rows.field("flags")[2] = 1
    twin = clone(rows)
    twin.field("flags")[3] = 1
    assert twin.observation()["flags"].tolist() == [0, 0, 1, 1, 0, 0]
    assert rows.observation()["flags"].tolist() == [0, 0, 1, 0, 0, 0]


def test_a_field_of_another_dtype_is_refused_by_name():
    with pytest.raises(TypeError, match="'wide'"):
        ObservationRows(spaces.Dict({"wide": spaces.Box(0, 1, (2,), np.float64)}))
