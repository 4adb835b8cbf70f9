"""Browser lifecycle: one Chromium per process, contexts per episode, crashes, no leaks."""

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import feedbackgym  # noqa: F401  (registers the ids)
from feedbackgym.envs.web.browser import sweep_browser_dirs
from feedbackgym.errors import FeedbackGymError
from tests.envs.web.processes import browser_main, browser_processes

pytestmark = [pytest.mark.web, pytest.mark.usefixtures("browser")]

ROOT = Path(__file__).resolve().parents[3]


def _wait_until(condition, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_close_is_idempotent_and_ends_the_episode():
    env = gym.make("feedbackgym/WebForm-v0")
    env.close()  # never reset: nothing was opened
    env.reset(seed=0)
    env.close()
    env.close()
    with pytest.raises(FeedbackGymError):
        env.unwrapped.step(0)


LEAK_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import gymnasium as gym
    import feedbackgym
    from tests.envs.web.processes import browser_processes

    env = gym.make("feedbackgym/WebForm-v0")
    counts = []
    for episode in range(60):
        env.reset(seed=episode)
        env.step(env.unwrapped.expert_action())  # acts, so the next episode needs a new context
        if episode in (0, 59):
            time.sleep(1.0)  # let closing contexts' renderers exit
            counts.append(len(browser_processes()))
    env.close()
    print(*counts)
    """
)


@pytest.mark.timeout(1200)  # a hang guard: browser episodes take seconds on a loaded machine
def test_no_process_leaks_over_60_episodes():
    child = subprocess.Popen(
        [sys.executable, "-c", LEAK_SCRIPT],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = child.communicate(timeout=600)
    assert child.returncode == 0, err
    first, last = map(int, out.split())
    assert first > 0 and last <= first + 2  # a spare page may be half made or half closed
    # The child has exited: nothing it launched is left.
    assert _wait_until(lambda: not browser_processes(child.pid))


def test_browser_crash_truncates_and_next_reset_recovers():
    env = gym.make("feedbackgym/WebForm-v0")
    env.reset(seed=0)
    env.step(env.unwrapped.expert_action())
    main = browser_main()
    browser_tmp = Path(_environ(main)["TMPDIR"])
    assert browser_tmp.is_dir()
    (browser_tmp / "left").touch()  # as the full browser's singleton socket: left at a kill
    os.kill(main, signal.SIGKILL)
    _, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
    assert truncated and not terminated and reward == 0.0
    assert info["outcome"] == "infra_error" and info["infra_error"]
    with pytest.raises(FeedbackGymError, match="episode is over"):
        env.step(0)
    _, info = env.reset(seed=1)
    while not info["subgoals"]["personal_details"]:
        _, _, _, truncated, info = env.step(env.unwrapped.expert_action())
        assert not truncated and "infra_error" not in info
    assert not browser_tmp.exists()  # the relaunch removed what the killed browser left
    env.close()


def _environ(pid):
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(e.decode().split("=", 1) for e in entries if b"=" in e)


def test_renderer_crash_truncates_and_next_reset_recovers():
    env = gym.make("feedbackgym/WebCheckout-v0")
    env.reset(seed=0)
    for pid in _renderers():  # this page's, and the spare pages'
        with contextlib.suppress(ProcessLookupError):  # gone with an earlier one
            os.kill(pid, signal.SIGKILL)
    _, _, terminated, truncated, info = env.step(env.unwrapped.expert_action())
    assert truncated and not terminated and "infra_error" in info
    env.reset(seed=0)
    _, _, _, truncated, info = env.step(env.unwrapped.expert_action())
    assert not truncated and info["invalid_action"] == ""
    env.close()


def _renderers():
    return [
        pid
        for pid in browser_processes()
        if b"--type=renderer" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]


def test_async_vector_env_with_4_workers_each_with_its_own_chromium():
    envs = gym.make_vec("feedbackgym/WebForm-v0", num_envs=4, vectorization_mode="async")
    obs, info = envs.reset(seed=0)
    for _ in range(12):  # through the first page of the form, in every worker
        obs, _, _, truncated, info = envs.step(np.array(envs.call("expert_action")))
        assert obs["elements"].shape[0] == 4 and not truncated.any()
    assert info["subgoals"]["personal_details"].all()
    workers = [process.pid for process in envs.processes]
    assert all(browser_processes(worker) for worker in workers)
    envs.close()
    assert _wait_until(lambda: not any(browser_processes(worker) for worker in workers))
    # The workers ended with os._exit, before their browsers' temp dirs could go: swept.
    temp = Path(tempfile.gettempdir())
    sweep_browser_dirs()
    assert not [p for worker in workers for p in temp.glob(f"feedbackgym-chromium-{worker}-*")]


def test_nothing_leaves_the_machine():
    env = gym.make("feedbackgym/WebCheckout-v0")
    env.reset(seed=0)

    async def fetch(page, url):
        return await page.evaluate(
            "url => fetch(url).then(r => r.status, e => 'blocked: ' + e.message)", url
        )

    assert env.unwrapped._pages.run(lambda page: fetch(page, "/_kit/kit.css")) == 200
    for url in ("http://example.com/", "https://127.0.0.1:9/", "http://10.0.0.1/x"):
        assert str(env.unwrapped._pages.run(lambda page, u=url: fetch(page, u))).startswith(
            "blocked"
        )
    env.close()


LINGER_SCRIPT = textwrap.dedent(
    """
    import time
    import gymnasium as gym
    import feedbackgym
    from feedbackgym.envs.web.browser import close_browser
    from tests.envs.web.processes import browser_processes

    def gone(timeout):
        deadline = time.monotonic() + timeout
        while browser_processes():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    env = gym.make("feedbackgym/WebForm-v0")
    env.reset(seed=0)
    env.close()
    print("lingers" if not gone(2.0) else "gone", end=" ")
    close_browser()
    print("gone" if gone(10.0) else "lingers")
    """
)


def test_the_browser_lingers_as_configured_and_closes_on_request():
    def run(linger):
        child = subprocess.run(
            [sys.executable, "-c", LINGER_SCRIPT],
            cwd=ROOT,
            env={**os.environ, "FEEDBACKGYM_BROWSER_LINGER_S": linger},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert child.returncode == 0 or linger == "soon", child.stderr
        return child

    assert run("3600").stdout.split() == ["lingers", "gone"]  # close_browser ends it now
    assert run("0").stdout.split() == ["gone", "gone"]  # no linger: gone with the last env
    refused = run("soon")
    assert refused.returncode != 0 and "FEEDBACKGYM_BROWSER_LINGER_S" in refused.stderr
