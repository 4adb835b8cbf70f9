"""The feedback service in another process, its deadline and its misses."""

import logging
import socket
import subprocess
import sys
import time

import gymnasium as gym
import pytest

import feedbackgym  # noqa: F401
from feedbackgym.core import StepRecord, Subgoal
from feedbackgym.feedback import GuideRequest, ReviewRequest, SubgoalGuide, TrajectoryReviewer
from feedbackgym.wrappers import AddGuide, AddReview

pytest.importorskip("zmq")
from feedbackgym.feedback.remote import RemoteFeedbackSource  # noqa: E402

LIB = (Subgoal("a", "reach A", bool), Subgoal("b", "reach B", bool, ("a",)))


def _free_address():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def service(request):
    delay = getattr(request, "param", 0)
    address = _free_address()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "feedbackgym",
            "serve-feedback",
            "--address",
            address,
            "--delay-ms",
            str(delay),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    client = RemoteFeedbackSource(address, deadline_ms=delay + 2000)
    for _ in range(50):  # wait until it answers
        if client.hint(GuideRequest(LIB, {}, 0)) is not None:
            break
        time.sleep(0.1)
    client.close()
    yield address
    process.terminate()
    process.wait(timeout=10)


def test_service_answers_like_the_local_generators(service):
    client = RemoteFeedbackSource(service, deadline_ms=1000)
    request = GuideRequest(LIB, {"a": True, "b": False}, 3, options={"lookahead": 1})
    assert client.hint(request) == SubgoalGuide().hint(request)
    assert len(client.hint(request).subgoal_ids) == 1
    records = (StepRecord(0, 1, 0.0, ("a",)), StepRecord(1, 2, 0.0, ("a",), harmful=True))
    review_request = ReviewRequest(records, LIB, success=False)
    assert client.review(review_request) == TrajectoryReviewer().review(review_request)
    assert client.misses == 0 and client.calls == 3
    client.close()
    client.close()


def test_wrappers_use_the_service(service):
    env = AddReview(
        AddGuide(
            gym.make("feedbackgym/OpsIncidentEasy-v0"),
            source=service,
            deadline_ms=1000,
            dropout=0.0,
        ),
        source=service,
        deadline_ms=1000,
    )
    _, info = env.reset(seed=0)
    assert info["feedback"]["guide"]["subgoal_ids"][0].startswith("triage_")
    info = env.step("escalate")[-1]
    assert info["feedback"]["review"]["reexplore"][0]["reason"] == "harmful"
    env.close()


@pytest.mark.parametrize("service", [3000], indirect=True)
def test_slow_service_misses_the_deadline_and_the_step_goes_on(service):
    env = AddGuide(
        gym.make("feedbackgym/OpsIncidentEasy-v0"),
        every=1,
        source=service,
        deadline_ms=50,
        dropout=0.0,
    )
    start = time.perf_counter()
    _, info = env.reset(seed=0)
    for _ in range(3):
        info = env.step("wait")[-1]
    elapsed = time.perf_counter() - start
    assert info["feedback"]["guide"] == {}
    assert env.feedback_stats()["misses"] == 4
    assert elapsed < 2.0  # four 50 ms deadlines, not a 3 s answer
    env.close()


def test_service_down_logs_a_warning_and_counts_misses(caplog):
    env = AddGuide(
        gym.make("feedbackgym/OpsIncidentEasy-v0"),
        every=1,
        source=_free_address(),
        deadline_ms=20,
        dropout=0.0,
    )
    with caplog.at_level(logging.WARNING):
        env.reset(seed=0)
        for _ in range(5):
            obs, *_ = env.step("wait")
    assert env.feedback_stats()["misses"] == 6
    assert "did not answer" in caplog.text
    env.close()
