"""The sandbox backends, for real: results, limits, isolation, wiping between runs, the image."""

import shutil
import subprocess
import sys

import pytest

from feedbackgym.envs.code.sandbox import Limits, RunRequest, make_sandbox, resolve_sandbox
from feedbackgym.envs.code.sandbox.image import image_tag, parse_apt_sources
from feedbackgym.envs.code.sandbox.protocol import FLAGS, parse_report
from feedbackgym.errors import SandboxError

CHECKS = """
import os, socket

def test_passes():
    assert 1 + 1 == 2

def test_fails():
    got = 1 + 1
    assert got == 3, got

def test_errors():
    raise KeyError("missing")

def test_not_root():
    assert os.getuid() != 0 and os.geteuid() != 0, os.getuid()

def test_only_loopback():
    names = [name for _, name in socket.if_nameindex()]
    assert names == ["lo"], names

def test_root_is_read_only():
    for path in ("/usr/evil", "/evil"):
        try:
            open(path, "w")
        except OSError:
            continue
        raise AssertionError(path + " is writable")

def test_workdir_and_tmp_are_writable():
    open("/work/scratch", "w").write("x")
    open("/tmp/scratch", "w").write("x")

def test_starts_clean():
    left = sorted(set(os.listdir("/work")) - {"test_checks.py", "__pycache__"})
    assert left == [] and not os.path.exists("/tmp/leak"), (left, os.listdir("/tmp"))

def test_leaves_a_mess():
    open("/work/leak", "w").write("x")
    open("/tmp/leak", "w").write("x")
    os.makedirs("/work/locked/inner")
    os.chmod("/work/locked", 0)
"""
NAMES = [line[4:-3] for line in CHECKS.splitlines() if line.startswith("def ")]


def _request(names, limits=None):
    return RunRequest({"test_checks.py": CHECKS}, [("test_checks.py", names)], limits or Limits())


@pytest.fixture
def box(backend):
    sandbox = make_sandbox(backend)
    yield sandbox
    sandbox.close()


def test_reports_each_test(box):
    report = box.run(_request(NAMES[:3] + ["test_absent"]))
    statuses = [(r.name, r.status) for r in report.results]
    assert statuses == [
        ("test_passes", "pass"),
        ("test_fails", "fail"),
        ("test_errors", "error"),
        ("test_absent", "error"),
    ]
    failed = report.results[1]
    assert failed.message == "AssertionError: 2"
    assert failed.frames == (("test_checks.py", 9, "test_fails"),)
    assert report.results[2].message == "KeyError: 'missing'"
    assert report.flags == frozenset()


def test_isolation(box):
    names = ["test_not_root", "test_only_loopback", "test_root_is_read_only"]
    report = box.run(_request(names + ["test_workdir_and_tmp_are_writable"]))
    assert [r.status for r in report.results] == ["pass"] * 4, report


def test_nothing_carries_over_between_runs(box):
    box.run(_request(["test_leaves_a_mess"]))
    box.reset()
    report = box.run(_request(["test_starts_clean"]))
    assert report.results[0].status == "pass", report.results[0].message


def test_output_is_captured_and_capped(box):
    files = {"test_p.py": "def test_p():\n    print('hello')\n    print('x' * 5000)\n"}
    report = box.run(RunRequest(files, [("test_p.py", ["test_p"])], Limits(max_output=1000)))
    assert report.output.startswith("hello\n") and len(report.output) <= 1000
    assert report.flags == {"output_limit"}


def test_timeout_ends_the_run(box):
    files = {"test_s.py": "import time\n\ndef test_s():\n    time.sleep(60)\n"}
    report = box.run(RunRequest(files, [("test_s.py", ["test_s"])], Limits(timeout=1)))
    assert report.flags == {"timeout"} and report.results[0].status == "not_run"


def test_run_after_close_and_reset_still_works(box):
    box.close()
    box.reset()
    assert box.run(_request(["test_passes"])).results[0].status == "pass"


def test_parse_report_reads_literals_only():
    request = _request(["test_passes", "test_fails"])
    lines = "\n".join(
        [
            "('test_checks.py', 'test_passes', 'pass', '', [])",
            "__import__('os').system('echo pwned')",
            "('test_checks.py', 'test_fails', 'fail', 'AssertionError: 2', [('x.py', 3, 'f')])",
            "('test_checks.py', 'test_passes', 'fail', 'a forged second line', [])",
        ]
    )
    report = parse_report(
        "noise\n" + repr({"results": lines, "output": "o", "flags": ["timeout", "bogus"]}), request
    )
    assert [r.status for r in report.results] == ["pass", "fail"]
    assert report.results[1].frames == (("x.py", 3, "f"),)
    assert report.flags == {"timeout"} and report.output == "o"
    lost = parse_report("Traceback ...", request)
    assert lost.flags == {"sandbox_lost"} and {r.status for r in lost.results} == {"not_run"}
    assert set(report.flag_dict()) == set(FLAGS)


def test_resolve_sandbox(monkeypatch):
    monkeypatch.setenv("FEEDBACKGYM_SANDBOX", "local")
    assert resolve_sandbox("auto") == "local" and resolve_sandbox("docker") == "docker"
    monkeypatch.setenv("FEEDBACKGYM_SANDBOX", "podman")
    with pytest.raises(ValueError, match="FEEDBACKGYM_SANDBOX"):
        resolve_sandbox("auto")
    with pytest.raises(ValueError, match="sandbox must be one of"):
        resolve_sandbox("chroot")


def test_local_sandbox_without_bubblewrap_names_the_package(monkeypatch):
    from feedbackgym.envs.code.sandbox.local import LocalSandbox

    monkeypatch.setattr(shutil, "which", lambda name, path=None: None)
    with pytest.raises(SandboxError, match="apt-get install bubblewrap"):
        LocalSandbox()


def test_apt_sources_are_parsed():
    one_line = "# comment\ndeb [arch=amd64] http://mirror.example/debian/ trixie main\n"
    deb822 = (
        "Types: deb\nURIs: http://deb.example/debian-security\nSuites: trixie-security\n\n"
        "Types: deb-src deb\nURIs: http://deb.example/debian\nSuites: trixie-updates trixie\n"
    )
    assert parse_apt_sources([("a.list", one_line)]).uri == "http://mirror.example/debian"
    source = parse_apt_sources([("x.sources", deb822)])
    assert (source.uri, source.suite) == ("http://deb.example/debian", "trixie")
    assert parse_apt_sources([("b.list", "deb-src http://x/ y main\n")]) is None
    assert image_tag("trixie") == image_tag("trixie") != image_tag("bookworm")


@pytest.mark.docker
def test_sandbox_build_is_cached_by_tag():
    require_docker = pytest.importorskip("tests.envs.code.conftest").require_backend
    require_docker("docker")
    exe = shutil.which("feedbackgym")
    command = [exe] if exe else [sys.executable, "-m", "feedbackgym"]
    done = subprocess.run(
        [*command, "sandbox", "build"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == image_tag() and "already built" in done.stderr


def test_environment_is_fixed(box):
    files = {"test_e.py": "import os\n\ndef test_e():\n    print(sorted(os.environ.items()))\n"}
    report = box.run(RunRequest(files, [("test_e.py", ["test_e"])]))
    assert "PYTHONHASHSEED', '0'" in report.output and "/root" not in report.output
