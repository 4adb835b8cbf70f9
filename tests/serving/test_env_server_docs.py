"""docs/env-server.md: its Python blocks run against real servers on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("openenv")
from tests.doc_blocks import run_python_blocks  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "env-server.md"


def test_the_env_server_page_is_in_the_site_nav():
    assert "env-server.md" in (ROOT / "mkdocs.yml").read_text()


def test_the_env_server_examples_run():
    pytest.importorskip("verifiers")
    blocks = run_python_blocks(PAGE.read_text(), timeout=600)
    plain, agent, trl, packaged_round, verifiers = blocks
    text = PAGE.read_text()
    shown = text.split("```python\n", 1)[1].split("```\n\n```\n", 1)[1].split("```", 1)[0]
    assert plain == shown  # the page shows what the plain-JSON example prints
    assert agent.count(" resolved ") == 2
    assert "is not an action" in trl and "> wait" in trl
    first, state, served = packaged_round.splitlines()
    assert first.endswith("rollouts on the model server")  # the packaged model: auto is the server
    assert '"round": 0' in state  # one GRPO round of the packaged model, served env
    # the round's rollouts and the validation after it each published a version
    assert served == "['registry.json', 'v0001', 'v0002']"
    assert verifiers.splitlines() == ["True user_closed 4 model calls, reward 0.0"] * 2
