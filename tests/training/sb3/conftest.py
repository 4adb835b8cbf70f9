"""SB3's trainer, callbacks and controller runs: they need stable-baselines3."""

import pytest

pytest.importorskip("stable_baselines3")
