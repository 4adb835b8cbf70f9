"""The tutorials' code runs, and prints what the pages say it prints.

Each page's ``python`` blocks run in order, each in a fresh interpreter (as a reader
pasting them would run them), from the repository root. Where a page shows the output
of a block (the ```` ``` ```` block after "It prints"), the output must match it.
"""

import re
from pathlib import Path

import pytest

from tests.doc_blocks import run_python_blocks

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"


def _run(page, tmp_path):
    """Runs the page's python blocks in order (their temporary files in ``tmp_path``)."""
    text = (TUTORIALS / page).read_text()
    env = {"OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    return text, run_python_blocks(text, timeout=240, env=env)


def _shown(text):
    """The outputs a page shows after "It prints"."""
    return re.findall(r"It prints[^\n]*:\n\n```\n(.*?)```", text, flags=re.S)


def test_wrap_your_own_env(tmp_path):
    text, outputs = _run("wrap-your-env.md", tmp_path)
    assert outputs[0] == _shown(text)[0]
    assert "hint_next" in outputs[1] and "observation" in outputs[1]


def test_bring_your_own_trainer(tmp_path):
    text, (output,) = _run("own-trainer.md", tmp_path)
    shown = _shown(text)[0]
    phases = [line.split()[:3] for line in output.splitlines()]
    assert phases == [line.split()[:3] for line in shown.splitlines()]  # rounds and phases
    assert phases[0][2] == "guide" and output.splitlines()[-1].startswith("resumed in")


def test_read_the_store_with_plain_h5py(tmp_path):
    text, (recorded, read) = _run("read-with-h5py.md", tmp_path)
    assert recorded == "2 segments\n"
    assert read == _shown(text)[0]
    reader = re.findall(r"```python\n(.*?)```", text, flags=re.S)[1]
    assert not re.search(r"^\s*(import|from) feedbackgym", reader, flags=re.M)  # h5py only


@pytest.mark.timeout(300)
def test_run_a_comparison(tmp_path):
    text, (ran, tables) = _run("comparison.md", tmp_path)
    assert "results.csv" in ran and "improvement.csv" in ran and "curves.png" in ran
    assert "guide-then-review+shaping-seed0" in ran and "sparse-seed0" in ran
    assert tables.count("IQM success") == 2 and tables.count("P(") == 2


def test_the_tutorials_are_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:\n")[1]
    for page in sorted(TUTORIALS.glob("*.md")):
        assert f"tutorials/{page.name}" in nav, page.name
