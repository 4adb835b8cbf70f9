"""The README's set-up commands and code blocks, and the docs' code blocks."""

import os
import re
import subprocess
import sys
from pathlib import Path

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


def test_ci_runs_the_readme_test_command_and_nothing_else():
    tests_command = _blocks("bash")[1].strip()
    ci_lines = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci_lines == [tests_command]


def test_readme_python_examples_run():
    outputs = []
    for block in _blocks("python"):
        result = subprocess.run(
            [sys.executable, "-c", block], capture_output=True, text=True, timeout=120, cwd=ROOT
        )
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout)
    assert "resolved 1.0 True" in outputs[0]
    assert "Hint: first" in outputs[1] and "try to" in outputs[1]
    trainer = outputs[2].splitlines()  # "Bring your own trainer": a phase per round
    assert len(trainer) == 12 and trainer[0].split()[2] == "guide"
    assert trainer[-1].split()[2] == "review" and " reviews  0 " not in trainer[-1]


def test_control_doc_examples_run():
    blocks = _blocks("python", (ROOT / "docs" / "control.md").read_text())
    assert len(blocks) >= 4
    for block in blocks:
        result = subprocess.run(
            [sys.executable, "-c", block],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={**os.environ, "OMP_NUM_THREADS": "1"},  # the SB3 example on a busy machine
        )
        assert result.returncode == 0, result.stderr


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
