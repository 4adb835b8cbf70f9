"""``feedbackgym doctor``, run as users run it, with real parts hidden from it."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from feedbackgym.cli.doctor import Check, _text
from feedbackgym.envs.web.executable import DEFAULT_CHROMIUM
from tests.conftest import require

SYSTEM = ("Chromium", "Docker engine", "sandbox image", "bubblewrap", "language model")
EXTRAS = (
    "web",
    "code",
    "hdf5",
    "remote",
    "baselines",
    "minari",
    "ray",
    "llm",
    "llm-train",
    "docs",
    "server",
    "test",
)


def _doctor(*args, **env):
    command = [sys.executable, "-m", "feedbackgym", "doctor", *args]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env={**os.environ, **env}
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def _checks(result):
    return {check["name"]: check for check in json.loads(result.stdout)["checks"]}


def test_the_report_covers_every_part_and_the_set_up_installs_them():
    result = _doctor("--json")
    assert result.returncode == 0, result.stdout
    report = json.loads(result.stdout)
    checks = _checks(result)
    assert report["ready"] is True
    assert list(checks) == ["core", *(f"extra {e}" for e in EXTRAS), *SYSTEM, "GPU"]
    assert [name for name, c in checks.items() if c["required"]] == [
        "core",
        "extra hdf5",
        "extra baselines",
    ]
    for check in checks.values():
        assert check["ok"] == (check["fix"] == ""), check
    for name in SYSTEM:
        require(checks[name]["ok"], f"{name} ({checks[name]['detail']})")


def test_the_text_report_gives_a_line_each_and_the_verdict():
    result = _doctor()
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("feedbackgym ") and "Python" in lines[0]
    assert any(line.split()[:2] == ["ok", "core"] for line in lines)
    assert lines[-1] == "the core (ops suite and baselines) is ready"


@pytest.fixture
def hidden(tmp_path):
    """Bubblewrap off PATH, the Docker engine behind a refusing port, Chromium moved away.

    Yields the doctor's text and JSON reports, the engine's address and the Chromium that
    Playwright's browser folder (a link to the real one) offers instead.
    """
    require(Path(DEFAULT_CHROMIUM).is_file(), "Chromium")
    chrome = tmp_path / "browsers" / "chromium-1200" / "chrome-linux" / "chrome"
    chrome.parent.mkdir(parents=True)
    chrome.symlink_to(DEFAULT_CHROMIUM)
    (tmp_path / "bin").mkdir()
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{closed.getsockname()[1]}"
        env = {
            "PATH": str(tmp_path / "bin"),
            "DOCKER_HOST": address,
            "FEEDBACKGYM_CHROMIUM": str(tmp_path / "nothing-here"),
            "PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "browsers"),
        }
        yield _doctor(**env), _doctor("--json", **env), address, chrome


def test_hidden_parts_are_named_with_their_fixes(hidden):
    text, report, address, chrome = hidden
    assert text.returncode == 0 and report.returncode == 0  # optional: the core is ready
    line = next(line for line in text.stdout.splitlines() if "bubblewrap" in line)
    assert line.split()[0] == "missing" and "bwrap is not on PATH" in line
    assert text.stdout.split(line, 1)[1].splitlines()[1].strip() == (
        "fix: sudo apt-get install bubblewrap"
    )
    checks = _checks(report)
    engine, image, chromium = checks["Docker engine"], checks["sandbox image"], checks["Chromium"]
    if "docker" in checks["extra code"]["detail"]:  # the SDK is there to ask the engine
        assert not engine["ok"] and f"no engine answers at {address}" in engine["detail"]
        assert "DOCKER_HOST" in engine["fix"]
    assert not image["ok"] and "not checked: no Docker engine" in image["detail"]
    assert image["fix"] == "sudo feedbackgym sandbox build"
    assert not chromium["ok"] and "nothing-here" in chromium["detail"]
    assert chromium["fix"] == f"export FEEDBACKGYM_CHROMIUM={chrome}"


def test_a_missing_required_part_makes_the_verdict_name_it():
    checks = [
        Check("core", True, True, "numpy 2.0"),
        Check("extra hdf5", False, True, "not importable: h5py", 'pip install "feedbackgym[hdf5]"'),
        Check("GPU", False, False, "none", "optional"),
    ]
    lines = _text(checks).splitlines()
    assert lines[2].split()[:3] == ["MISSING", "extra", "hdf5"]
    assert lines[3].strip() == 'fix: pip install "feedbackgym[hdf5]"'
    assert lines[-1] == "the core (ops suite and baselines) is not ready: extra hdf5"
