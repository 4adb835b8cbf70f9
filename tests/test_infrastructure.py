"""The real parts the suites run on: Chromium through Playwright, a Docker engine, bubblewrap.

``bash scripts/setup.sh`` installs and starts them. In CI a missing one fails.
"""

import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[1]

CHROMIUM = os.environ.get("FEEDBACKGYM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class _Page(BaseHTTPRequestHandler):
    def do_GET(self):
        body = (
            b"<title>probe</title><button id=b onclick=\"this.textContent='clicked'\">go</button>"
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.web
def test_chromium_drives_a_loopback_page():
    require(os.path.exists(CHROMIUM), f"Chromium at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{server.server_port}/")
            page.click("#b")
            assert page.text_content("#b") == "clicked"
            browser.close()
    finally:
        server.shutdown()


def _docker_client():
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env()
        client.ping()
        return client
    except docker.errors.DockerException:
        return None


@pytest.mark.docker
def test_docker_engine_answers_without_a_default_bridge():
    client = _docker_client()
    require(client is not None, "a Docker engine")
    names = {n.name for n in client.networks.list()}
    assert "bridge" not in names, "dockerd must run with --bridge=none"
    assert "none" in names


def test_bubblewrap_sandbox_has_no_network():
    bwrap = shutil.which("bwrap")
    require(bwrap is not None, "bubblewrap")
    result = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--unshare-net", "--dev", "/dev", "cat", "/proc/net/dev"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    interfaces = [line.split(":")[0].strip() for line in result.stdout.splitlines()[2:]]
    assert interfaces == ["lo"]


def test_the_language_model_trainers_tests_do_not_need_stable_baselines3():
    blocked = (
        "import sys; sys.modules['stable_baselines3'] = None; import pytest; "
        "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', "
        "'tests/training/llm', 'tests/training/torch_ppo/test_ppo.py']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "skipped" not in result.stdout and " tests collected" in result.stdout
