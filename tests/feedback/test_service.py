"""``feedbackgym serve-feedback`` as its own process: user generators, bad clients, many clients."""

import json
import signal
import socket
import subprocess
import sys
import threading
import time

import gymnasium as gym
import numpy as np
import pytest

import feedbackgym  # noqa: F401
from feedbackgym.config import DEFAULT_DEADLINE_MS
from feedbackgym.core import StepRecord, Subgoal
from feedbackgym.feedback import GuideRequest, ReviewRequest
from feedbackgym.wrappers import AddGuide, AddReview

zmq = pytest.importorskip("zmq")
from feedbackgym.feedback.remote import RemoteFeedbackSource, create_curve_keys  # noqa: E402

LIB = (Subgoal("a", "reach A", bool), Subgoal("b", "reach B", bool, ("a",)))
MAX_BYTES = 4096
GENERATORS = "tests.feedback.user_generators"


def _free_address():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def _start(*flags, keys=None):
    address = _free_address()
    process = subprocess.Popen(
        [sys.executable, "-m", "feedbackgym", "serve-feedback", "--address", address, *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    client = RemoteFeedbackSource(address, deadline_ms=200, curve_keys=keys)
    for _ in range(100):  # wait until it answers
        if client.stats() is not None or process.poll() is not None:
            break
    client.close()
    return address, process


def _stop(process):
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0  # a clean stop, no thread left running
    return process.stderr.read()


@pytest.fixture
def service():
    address, process = _start("--workers", "4", "--max-bytes", str(MAX_BYTES))
    yield address
    _stop(process)


def test_user_generators_through_the_service():
    address, process = _start(
        "--generator", f"{GENERATORS}:ChecklistGuide", "--generator", f"{GENERATORS}:RubricReviewer"
    )
    env = AddReview(
        AddGuide(
            gym.make("feedbackgym/OpsIncidentEasy-v0"), source=address, deadline_ms=2000, dropout=0
        ),
        source=address,
        deadline_ms=2000,
    )
    _, info = env.reset(seed=0)
    assert info["feedback"]["guide"]["texts"][0].endswith("(no text)")  # the user's guide
    info = env.step("escalate")[-1]
    summary = info["feedback"]["review"]["summary"]
    assert summary.startswith("rubric: 0/5") and "task feedbackgym/OpsIncidentEasy" in summary
    assert env.feedback_stats()["misses"] == 0
    env.close()
    _stop(process)


def test_a_generator_that_does_not_load_stops_the_command_with_its_name():
    result = subprocess.run(
        [sys.executable, "-m", "feedbackgym", "serve-feedback", "--generator", "nope:Guide"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "cannot import 'nope'" in result.stderr


def _malformed(i, request):
    """The i-th bad message, as the frames a DEALER sends."""
    kind = i % 8
    if kind == 0:
        return [b"\xff\xfe not json"]
    if kind == 1:
        return [b"{", b"two frames"]
    if kind == 2:
        return [b'{"id": 1, "batch": []}' + b" " * MAX_BYTES]  # oversized
    if kind == 3:
        return [json.dumps({"id": i, "batch": [{"kind": "poem"}]}).encode()]
    if kind == 4:
        return [b"[" * 3000]  # nested deeper than the parser goes
    if kind == 5:
        return [json.dumps({"id": i, "batch": [{"kind": "hint", "library": 3}]}).encode()]
    if kind == 6:
        return [b"", b"", b""]
    return [json.dumps([request]).encode()]


def test_ten_thousand_bad_messages_among_valid_requests(service):
    bad = zmq.Context.instance().socket(zmq.DEALER)
    bad.setsockopt(zmq.LINGER, 0)
    bad.connect(service)
    client = RemoteFeedbackSource(service, deadline_ms=5000)
    request = GuideRequest(LIB, {"a": False}, 0, task="t")
    answered, sent, replies = 0, 0, 0
    before = client.stats()
    for i in range(10_000):
        bad.send_multipart(_malformed(i, request.to_dict()))
        sent += 1
        if i % 100 == 0:  # a valid request every 100 bad ones, all answered
            answered += client.hint(request) is not None
            while bad.poll(0):
                replies += json.loads(bad.recv_multipart()[-1]).get("error") is not None
    deadline = time.monotonic() + 30
    while replies < sent and time.monotonic() < deadline:
        if bad.poll(1000):
            replies += json.loads(bad.recv_multipart()[-1]).get("error") is not None
    stats = client.stats()
    assert answered == 100 and client.misses == 0
    assert replies == sent  # every bad message got an error reply
    assert stats["received"] - before["received"] == 10_000 + 100 + 1
    codes = ("json", "framing", "oversized", "kind", "schema")
    by_code = {code: stats.get(code, 0) - before.get(code, 0) for code in codes}
    assert by_code == {
        "json": 2500,
        "framing": 2500,
        "oversized": 1250,
        "kind": 1250,
        "schema": 2500,
    }
    bad.close()
    client.close()


def test_a_req_socket_is_answered_and_a_huge_frame_only_drops_its_sender(service):
    req = zmq.Context.instance().socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.connect(service)
    request = {
        "id": 1,
        "task": "t",
        "batch": [{"kind": "hint", **GuideRequest(LIB, {}, 0).to_dict()}],
    }
    req.send(json.dumps(request).encode())
    assert req.poll(5000) and json.loads(req.recv())["results"][0]["subgoal_ids"] == ["a", "b"]
    req.close()
    huge = zmq.Context.instance().socket(zmq.DEALER)
    huge.setsockopt(zmq.LINGER, 0)
    huge.connect(service)
    huge.send(b"x" * (MAX_BYTES * 8))  # past the hard limit: ZeroMQ drops it unread
    huge.close()
    client = RemoteFeedbackSource(service, deadline_ms=5000)
    assert client.hint(GuideRequest(LIB, {}, 0)) is not None  # still serving
    client.close()


def test_sixteen_clients_with_four_workers_within_the_deadline(service):
    latencies = [[] for _ in range(16)]
    records = tuple(StepRecord(t, 0, 0.0, ("a",) if t > 3 else ()) for t in range(20))

    def play(index):
        client = RemoteFeedbackSource(service, deadline_ms=DEFAULT_DEADLINE_MS)
        family = f"family-{index % 6}"
        for step in range(30):
            start = time.perf_counter()
            if step % 10 == 9:
                result = client.review(ReviewRequest(records, LIB, False, task=family))
            else:
                result = client.hint(GuideRequest(LIB, {"a": step > 4}, step, task=family))
            latencies[index].append((time.perf_counter() - start) * 1000)
            assert result is not None
        client.close()

    threads = [threading.Thread(target=play, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    times = np.concatenate(latencies)
    assert len(times) == 16 * 30
    assert np.percentile(times, 99) < DEFAULT_DEADLINE_MS


def test_an_async_generator_has_many_requests_in_flight():
    address, process = _start("--generator", f"{GENERATORS}:SlowAsyncGuide")
    results = []

    def ask(index):
        client = RemoteFeedbackSource(address, deadline_ms=2000)
        results.append(client.hint(GuideRequest(LIB, {}, index, task="one family")))
        client.close()

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(16)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # One instance, one worker: 16 answers of 0.3 s each within 2 s, not 4.8 s in a row.
    assert len(results) == 16 and all(r is not None for r in results)
    assert time.perf_counter() - start < 16 * 0.3
    _stop(process)


@pytest.mark.skipif(not zmq.has("curve"), reason="libzmq without CURVE")
def test_curve_accepts_known_clients_only(tmp_path):
    keys = create_curve_keys(tmp_path / "keys")
    address, process = _start("--curve-keys", str(keys), keys=keys)
    known = RemoteFeedbackSource(address, deadline_ms=2000, curve_keys=keys)
    assert known.hint(GuideRequest(LIB, {}, 0)) is not None
    stranger_keys = create_curve_keys(tmp_path / "stranger")  # a pair the service never saw
    (stranger_keys / "server.key").write_bytes((keys / "server.key").read_bytes())
    stranger = RemoteFeedbackSource(address, deadline_ms=300, curve_keys=stranger_keys)
    plain = RemoteFeedbackSource(address, deadline_ms=300)
    assert stranger.hint(GuideRequest(LIB, {}, 0)) is None
    assert plain.hint(GuideRequest(LIB, {}, 0)) is None
    known.close(), stranger.close(), plain.close()
    _stop(process)
