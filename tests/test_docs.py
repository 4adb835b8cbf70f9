"""The README's set-up commands and code blocks, the docs' code blocks, links and site."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_blocks import run_python_blocks

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(language, text=README):
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def test_readme_opens_with_exactly_two_setup_commands():
    head = README.split("\n## ")[0]
    commands = [block.strip() for block in re.findall(r"```bash\n(.*?)```", head, flags=re.S)]
    assert len(commands) == 2
    main_job, tests = commands
    assert main_job.startswith("bash scripts/setup.sh && ")
    assert tests.startswith("bash scripts/setup.sh && ")
    for script in re.findall(r"scripts/\S+\.sh", main_job + tests):
        assert (ROOT / script).exists(), script


def test_readme_stays_short_enough_to_read_at_once():
    assert len(README.splitlines()) <= 200  # the rest belongs in docs/


def test_ci_runs_the_readme_test_command_and_nothing_else():
    tests_command = _blocks("bash")[1].strip()
    ci_lines = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci_lines == [tests_command]


def test_readme_python_examples_run():
    outputs = run_python_blocks(README)
    assert "resolved 1.0 True" in outputs[0]
    assert "Hint: first" in outputs[1] and "try to" in outputs[1]


def test_feedback_and_training_doc_examples_run():
    feedback = run_python_blocks((ROOT / "docs" / "feedback.md").read_text())
    assert "Hint: first" in feedback[0] and "try to" in feedback[0]
    outputs = run_python_blocks((ROOT / "docs" / "training.md").read_text())
    trainer = outputs[0].splitlines()
    assert len(trainer) == 12 and trainer[0].split()[2] == "guide"  # "Bring your own trainer"
    assert trainer[-1].split()[2] == "review" and " reviews  0 " not in trainer[-1]
    page = (ROOT / "docs" / "training.md").read_text()
    assert f"```\n{outputs[1]}```" in page  # "Declaring a view": its output, as the page shows it


def test_control_doc_examples_run():
    text = (ROOT / "docs" / "control.md").read_text()
    assert len(_blocks("python", text)) >= 4
    # one thread: the SB3 example on a busy machine
    run_python_blocks(text, env={"OMP_NUM_THREADS": "1"})


def test_generator_and_agent_doc_examples_run():
    outputs = []
    for doc in ("generators.md", "agent.md"):
        for block in _blocks("python", (ROOT / "docs" / doc).read_text()):
            result = subprocess.run(
                [sys.executable, "-c", block], capture_output=True, text=True, timeout=120, cwd=ROOT
            )
            assert result.returncode == 0, result.stderr
            outputs.append(result.stdout)
    assert "5 of 5 subgoals reached (resolved)" in outputs[0]  # a reviewer of your own
    assert outputs[-1].count(" success ") == 2  # the agent against the stand-in server
    assert "Reviews of your earlier attempts" in outputs[-1]


def test_llm_training_doc_example_runs_and_prints_what_the_page_says():
    text = (ROOT / "docs" / "llm-training.md").read_text()
    (output,) = run_python_blocks(text)
    assert output == _blocks("text", text)[0]  # the "prints" block under the example


def test_benchmark_script_runs():
    result = subprocess.run(
        [sys.executable, "benchmarks/ops_step.py", "--steps", "300", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert "CartPole-v1" in result.stdout and "OpsIncident-v0 (hard)" in result.stdout


def _markdown_files():
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _local_links(text):
    """Targets of the Markdown links and images in ``text`` that name a local file."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold no links
    text = re.sub(r"`[^`\n]*`", "", re.sub(r"\[`([^`\]]*)`\]", r"[\1]", text))
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        path = target.split("#")[0]
        if path and not re.match(r"[a-z][a-z0-9+.-]*:", path):
            yield path


@pytest.mark.parametrize("doc", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_local_link_resolves(doc):
    missing = [t for t in _local_links(doc.read_text()) if not (doc.parent / t).exists()]
    assert not missing, f"{doc.relative_to(ROOT)} links to missing files: {missing}"


def test_local_link_finder_sees_links_and_skips_code():
    text = "[a](x.md#s) ![b](img/p.png) [`c`](d/) [w](https://e.org/f.md) `[g](h.md)`\n"
    assert list(_local_links(text + "```\n[i](j.md)\n```\n")) == ["x.md", "img/p.png", "d/"]


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="the docs extra")
def test_docs_site_builds_strict(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    results = (tmp_path / "results" / "index.html").read_text()  # the README's Results section
    readme_results = README.split("\n## Results\n")[1].split("\n## ")[0]
    assert "readme:" not in results
    own = (ROOT / "docs" / "results" / "index.md").read_text().count("![")
    assert results.count("<img ") == readme_results.count("![") + own > 0
    assert (tmp_path / "api" / "wrappers" / "index.html").exists()
