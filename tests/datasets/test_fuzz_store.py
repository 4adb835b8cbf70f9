"""Fuzzing the store reader: damaged bytes, torn files and stray names never break a read.

Hypothesis damages copies of a small real store (two sealed segments and the log
of a writer that died before sealing it): bits flipped, byte ranges overwritten,
files cut short or replaced, and stray entries added under random names (random
bytes, foreign HDF5, logs of garbage records, directories, dangling links). Then
opening the store, listing and reading its episodes, sampling,
``datasets inspect`` and ``datasets verify`` must work or raise the project's
own errors; a file that cannot be read is skipped with a ``DamagedFileWarning``
naming it; every intact file's episodes still read; and ``verify`` reports at
least every file the store skipped. pytest-timeout turns a hang into a failure.
"""

import contextlib
import dataclasses
import io
import os
import shutil
import string
import tempfile
import warnings
from pathlib import Path

import gymnasium as gym
import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedbackgym.cli import main
from feedbackgym.datasets import DamagedFileWarning, Episode, TrajectoryStore
from feedbackgym.datasets._storage.codec import decode_episode, encode_episode, record_body
from feedbackgym.datasets._storage.wal import FILE_MAGIC, LogFile, frame
from feedbackgym.datasets.summary import summarize
from feedbackgym.datasets.verify import verify_store
from feedbackgym.errors import FeedbackGymError
from feedbackgym.wrappers import RecordTrajectories

from .utils import play

SCALE = float(os.environ.get("FEEDBACKGYM_FUZZ_SCALE", "1"))
"""Multiplies every test's example count (``FEEDBACKGYM_FUZZ_SCALE=10`` for a deeper run)."""


def fuzz(examples: int):
    """Hypothesis settings for ``examples`` examples (scaled), and a timeout for a hang."""
    examples = max(1, int(examples * SCALE))

    def decorate(test):
        test = settings(
            max_examples=examples,
            deadline=None,
            derandomize=True,  # the same examples every run: CI stays reproducible, its time flat
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        )(test)
        return pytest.mark.timeout(30 + 5 * examples)(test)  # an example takes ~0.2 s of CPU

    return decorate


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A store: two segments (round 0, round 1) and a dead writer's unsealed log.

    Returns:
        The store directory and, per file name, the keys of the episodes it holds.
    """
    root = tmp_path_factory.mktemp("pristine") / "store"
    for round in (0, 1):
        env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), root, round=round)
        play(env, [round])
        env.close()
    (episode,) = TrajectoryStore(root).iter_episodes(round=0)
    dead = Episode(dataclasses.replace(episode.meta, shard="dead", episode=0), episode.columns)
    log = LogFile(root / "dead-000000.log", {"shard": "dead"})
    log.append(frame(record_body(encode_episode(dead))))
    os.close(log._fd)  # the writer died: its lock is gone, its log stays for readers
    keys = {p.name: {m.key for m in TrajectoryStore(p).episodes()} for p in root.glob("*.h5")}
    keys[log.path.name] = {dead.meta.key}
    assert sorted(p.suffix for p in root.iterdir()) == [".h5", ".h5", ".log"]
    return root, keys


@contextlib.contextmanager
def _copy(root):
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(shutil.copytree(root, Path(tmp) / "store", symlinks=True))


def _read_everything(root, intact_keys, *, summary=True):
    """Reads the store every way a user can; checks the rules; returns what ``verify`` reports."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = TrajectoryStore(root)
        metas = store.episodes()
        assert len(store) == len(metas)
        episodes = list(store.iter_episodes())
        assert {e.meta.key for e in episodes} >= intact_keys  # the rest reads
        for episode in episodes:
            assert episode.column("actions").shape == (episode.meta.length,)
        if len(store):
            try:
                store.sample(4, seed=0)
            except FeedbackGymError:
                pass  # a segment found damaged by this draw (a DamagedFileError)
        skipped = {d.path for d in store.damaged()}
        if summary:  # what ``datasets inspect`` prints
            try:
                rounds, _ = summarize(root)
            except FeedbackGymError:
                rounds = []
            assert sum(r.episodes for r in rounds) >= len(intact_keys)
    for warning in caught:
        assert warning.category is DamagedFileWarning, warning
        assert str(root) in str(warning.message)  # it names the file
    damaged = {d.path for d in verify_store(root)}
    assert skipped <= damaged  # verify finds at least what the reader skipped
    if not damaged:  # every file reads in full: nothing is left out
        assert not caught and len(metas) == len({e.meta.key for e in episodes})
    return damaged


def _damage(data, op):
    kind, where, payload = op
    at = int(where * len(data))
    if kind == "flip":
        if data:
            data[min(at, len(data) - 1)] ^= 1 << (payload % 8)
    elif kind == "truncate":
        del data[at:]
    elif kind == "overwrite":
        data[at : at + len(payload)] = payload
    elif kind == "zeros":
        data[at : at + payload] = bytes(min(payload, len(data) - at))
    else:  # "replace"
        data[:] = payload
    return data


WHERE = st.floats(0, 1, exclude_max=True)
DAMAGE = st.one_of(
    st.tuples(st.just("flip"), WHERE, st.integers(0, 7)),
    st.tuples(st.just("truncate"), WHERE, st.none()),
    st.tuples(st.just("overwrite"), WHERE, st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("zeros"), WHERE, st.integers(1, 4096)),
    st.tuples(st.just("replace"), WHERE, st.binary(max_size=256)),
)


@fuzz(30)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.lists(DAMAGE, min_size=1, max_size=4)),
        min_size=1,
        max_size=2,
    )
)
def test_damaged_segments_and_logs_are_skipped_by_name(pristine, damages):
    base, keys = pristine
    names = sorted(keys)
    with _copy(base) as root:
        touched = set()
        for index, ops in damages:
            path = root / names[index]
            data = bytearray(path.read_bytes())
            for op in ops:
                data = _damage(data, op)
            path.write_bytes(bytes(data))
            touched.add(names[index])
        intact = set().union(*(keys[n] for n in names if n not in touched))
        _read_everything(root, intact)


NAME = st.text(string.ascii_letters + string.digits + "-_. é", min_size=1, max_size=12)
SUFFIX = st.sampled_from([".h5", ".log", ".h5.tmp", ".log.new", "", ".hdf5"])
KIND = st.sampled_from(["bytes", "foreign-hdf5", "garbage-log", "copy", "directory", "dangling"])


def _add(root, place, name, kind, payload):
    """Adds one stray entry; returns its path if the store should find it damaged."""
    path = root / place / name
    if path.exists() or path.is_symlink() or not path.parent.is_dir() or name in (".", ".."):
        return None
    if kind == "bytes":
        path.write_bytes(payload)
    elif kind == "foreign-hdf5":
        with h5py.File(path, "w") as file:
            file["x"] = np.frombuffer(payload or b"\0", np.uint8)
    elif kind == "garbage-log":
        body = [payload or b"\0"]
        path.write_bytes(b"".join([FILE_MAGIC, *frame([b"{}"]), *frame(body)]))
    elif kind == "copy":
        shutil.copyfile(next(root.glob("*-000000.h5")), path)
        if name.endswith(".h5"):
            return None  # a second copy of a segment: its episodes read once
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to(root / "nowhere")
    named = name.endswith(".h5") or (name.endswith(".log") and place == "")
    return path if named else None  # a name the store reads: it must find the file damaged


@fuzz(20)
@given(
    st.lists(
        st.tuples(st.sampled_from(["", "cold"]), NAME, SUFFIX, KIND, st.binary(max_size=300)),
        min_size=1,
        max_size=4,
    )
)
def test_stray_files_under_random_names_are_skipped_by_name(pristine, strays):
    base, keys = pristine
    with _copy(base) as root:
        (root / "cold").mkdir()
        expected = set()
        for place, name, suffix, kind, payload in strays:
            found = _add(root, place, name + suffix, kind, payload)
            if found is not None:
                expected.add(found)
        damaged = _read_everything(root, set().union(*keys.values()), summary=False)
        assert expected <= damaged  # verify finds every stray file named like a store file
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert main(["datasets", "inspect", str(root)]) == 0  # the real episodes are there
            assert main(["datasets", "verify", str(root)]) == (1 if damaged else 0)


@pytest.fixture(scope="module")
def record(pristine):
    base, _ = pristine
    (episode,) = TrajectoryStore(base).iter_episodes(round=1)
    return b"".join(record_body(encode_episode(episode)))


@fuzz(200)
@given(st.lists(DAMAGE, min_size=1, max_size=4))
def test_a_damaged_record_that_passes_its_crc_decodes_or_says_why_not(record, damages):
    """A log record changed under a matching CRC (a writer's bug, not a disk's)."""
    data = bytearray(record)
    for op in damages:
        data = _damage(data, op)
    try:
        episode = decode_episode(bytes(data))
    except ValueError as error:
        assert str(error)
    else:
        assert episode.column("actions").shape == (episode.meta.length,)
