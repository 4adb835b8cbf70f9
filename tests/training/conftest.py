"""The trainers' tests: torch on one thread; only what drives SB3 skips without it.

``sb3/`` skips as a folder; elsewhere a test parametrized with ``trainer="sb3"``
skips that case alone, so the torch and language-model trainers' tests run
without stable-baselines3.
"""

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # as fast as two threads on 2 cores, half the CPU


@pytest.fixture(autouse=True)
def _sb3_cases_need_sb3(request):
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("trainer") == "sb3":
        pytest.importorskip("stable_baselines3")
