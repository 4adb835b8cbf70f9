"""A writer process (``writer="process"``): one per directory, its errors raised late.

The crash guarantees (``kill -9`` of the recording process, of the writer) are
checked in ``test_crash.py``.
"""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from feedbackgym.datasets import EpisodeRecorder, TrajectoryStore


def _record(recorder, obs, seed):
    recorder.start(obs, {}, seed=seed)
    recorder.episode.add(1, obs, 1.0, True, False, {})
    recorder.finish()


def test_stores_of_one_directory_share_one_writer(store_path):
    first = TrajectoryStore(store_path, writer="process")
    second = TrajectoryStore(store_path, writer="process")
    _record(EpisodeRecorder(first, "t"), 0, seed=1)
    _record(EpisodeRecorder(second, "t"), 0, seed=2)
    assert first._process is second._process
    first.close()  # flushes; the writer stays for the second store
    _record(EpisodeRecorder(second, "t"), 0, seed=3)
    second.close()
    metas = TrajectoryStore(store_path).episodes()
    assert sorted(m.seed for m in metas) == [1, 2, 3] and len({m.shard for m in metas}) == 1
    assert not list(store_path.glob("*.log"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_IDLE is Linux's")
def test_the_writer_runs_only_on_cpu_time_nothing_else_wants(store_path):
    store = TrajectoryStore(store_path, writer="process")
    _record(EpisodeRecorder(store, "t"), 0, seed=1)
    store.flush()  # the writer has opened the store: it set its policy first
    assert os.sched_getscheduler(store._process.pid) == os.SCHED_IDLE
    store.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_IDLE is Linux's")
def test_the_writer_sets_every_thread_idle_and_back_to_normal_when_it_may():
    script = """
import os, threading
from feedbackgym.datasets._storage.writer_main import set_idle
ready, stop = threading.Event(), threading.Event()
thread = threading.Thread(target=lambda: (ready.set(), stop.wait()))
thread.start(); ready.wait()
set_idle(True)
print([os.sched_getscheduler(0), os.sched_getscheduler(thread.native_id)])
set_idle(False)
print([os.sched_getscheduler(0), os.sched_getscheduler(thread.native_id)])
stop.set(); thread.join()
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == str([os.SCHED_IDLE] * 2)  # the seal thread too
    # Back to normal needs the privilege to raise one's priority; without it the writer stays idle.
    assert out[1] in (str([os.SCHED_OTHER] * 2), str([os.SCHED_IDLE] * 2))
    if os.geteuid() == 0:
        assert out[1] == str([os.SCHED_OTHER] * 2)


def test_an_episode_the_writer_refuses_is_raised_by_a_later_call(store_path):
    store = TrajectoryStore(store_path, writer="process")
    recorder = EpisodeRecorder(store, "t")
    _record(recorder, 0, seed=1)
    _record(recorder, np.zeros(3, np.float32), seed=2)  # other columns than episode 1's
    with pytest.raises(ValueError, match="other columns than earlier ones"):
        store.flush()
    _record(recorder, 0, seed=3)
    store.close()
    assert [m.seed for m in TrajectoryStore(store_path).episodes()] == [1, 3]


def test_the_writer_choice_is_checked_and_pickled(store_path):
    with pytest.raises(ValueError, match="writer must be one of"):
        TrajectoryStore(store_path, writer="threads")
    assert pickle.loads(pickle.dumps(TrajectoryStore(store_path, writer="process"))).writer == (
        "process"
    )


def test_an_episode_that_cannot_be_pickled_is_refused_at_once(store_path):
    store = TrajectoryStore(store_path, writer="process")
    recorder = EpisodeRecorder(store, "t")
    recorder.start(0, {}, seed=1)
    recorder.episode.add(1, 0, 1.0, True, False, {"feedback": {"guide": {"f": lambda: 0}}})
    with pytest.raises(ValueError, match="cannot be sent to the writer process"):
        recorder.finish()
    _record(recorder, 0, seed=2)
    store.close()
    assert [m.seed for m in TrajectoryStore(store_path).episodes()] == [2]


def test_the_writer_reads_requests_in_batches_pausing_only_when_the_pipe_is_dry(monkeypatch):
    import os
    import threading

    from feedbackgym.datasets._storage import channel
    from feedbackgym.datasets._storage.channel import RequestReader, request, write_all

    pauses = []
    monkeypatch.setattr(channel.time, "sleep", pauses.append)
    big = request("episode", 1, np.arange(300_000))  # over one read (1 MiB): split across reads
    small = [request("episode", seq) for seq in (2, 3)]
    torn = request("close", 4)[:-3]
    read_fd, write_fd = os.pipe()
    writer = threading.Thread(target=write_all, args=(write_fd, big + b"".join(small)))
    writer.start()
    reader = RequestReader(read_fd, pause_s=0.02)
    first = reader.next()
    assert first[:2] == ("episode", 1) and (first[2] == np.arange(300_000)).all()
    writer.join()
    assert [reader.next()[1] for _ in small] == [2, 3]
    assert pauses == []  # the pipe never ran dry while there were requests to serve

    def end_torn():
        write_all(write_fd, torn)
        os.close(write_fd)

    ender = threading.Timer(0.2, end_torn)  # the pipe is empty until then
    ender.start()
    assert reader.next() is None  # a torn frame at the end is the end
    ender.join()
    assert pauses == [0.02]  # one pause: after serving, with the pipe empty
    os.close(read_fd)


def test_a_flush_with_nothing_new_sent_costs_no_round_trip(store_path, monkeypatch):
    from feedbackgym.datasets._storage import writer_process

    with TrajectoryStore(store_path, writer="process") as store:
        recorder = EpisodeRecorder(store, "task")
        _record(recorder, np.zeros(2, np.float32), seed=1)
        writer = store._get_process()
        sent = []
        send = writer._send
        monkeypatch.setattr(writer, "_send", lambda frame: sent.append(frame) or send(frame))
        store.flush()
        store.flush()  # nothing new: answered here
        assert len(sent) == 1
        _record(recorder, np.zeros(2, np.float32), seed=2)
        store.flush()
        assert len(sent) == 3  # the episode and its flush
        assert isinstance(writer, writer_process.WriterProcess)
    with TrajectoryStore(store_path) as store:
        assert sorted(e.meta.seed for e in store.iter_episodes()) == [1, 2]


def test_the_writer_reads_at_once_after_answering_a_request_its_sender_waits_on(monkeypatch):
    import os
    import threading

    from feedbackgym.datasets._storage import channel
    from feedbackgym.datasets._storage.channel import RequestReader, request, write_all

    pauses = []
    monkeypatch.setattr(channel.time, "sleep", pauses.append)
    read_fd, write_fd = os.pipe()
    write_all(write_fd, request("flush", 1))
    reader = RequestReader(read_fd, pause_s=0.02)
    assert reader.next() == ("flush", 1)
    reader.answered()
    later = threading.Timer(
        0.1, lambda: (write_all(write_fd, request("flush", 2)), os.close(write_fd))
    )
    later.start()
    assert reader.next() == ("flush", 2)  # read as soon as it came: no pause
    later.join()
    assert reader.next() is None and pauses == []
    os.close(read_fd)
