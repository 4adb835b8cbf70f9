"""A file the store cannot read costs its own episodes only, is reported, and is left in place.

The damage is real files: a sealed segment truncated to half its bytes, a
text file named like a segment, a text file named like a log, an HDF5 file
that is not a feedbackgym one.
"""

import dataclasses
import os
import warnings

import gymnasium as gym
import h5py
import numpy as np
import pytest

from feedbackgym.cli import main
from feedbackgym.datasets import DamagedFile, DamagedFileWarning, Episode, TrajectoryStore
from feedbackgym.datasets._storage.codec import encode_episode, record_body
from feedbackgym.datasets._storage.segment import write_segment
from feedbackgym.datasets._storage.wal import LogFile, frame
from feedbackgym.wrappers import RecordTrajectories

from .utils import play


def _record(path, round, seeds):
    env = RecordTrajectories(gym.make("feedbackgym/OpsIncidentEasy-v0"), path, round=round)
    play(env, seeds)
    env.close()


def _assert_identical(read, written):
    assert read.meta == written.meta
    assert read.columns.keys() == written.columns.keys()
    for name, column in written.columns.items():
        other = read.columns[name]
        assert (other.dtype, other.shape) == (column.dtype, column.shape), name
        if column.dtype == object:  # text
            assert list(other) == list(column), name
        else:
            assert other.tobytes() == column.tobytes(), name


def _truncate_to_half(path):
    size = path.stat().st_size
    os.truncate(path, size // 2)
    return size


def _files(path):
    return {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}


@pytest.fixture
def damaged(store_path):
    """Three rounds in three segments; then round 1's is cut in half and a stray file added.

    Returns:
        The episodes of the intact segments by key, the truncated segment, its
        full size, and the stray file.
    """
    for round in range(3):
        _record(store_path, round, [10 * round, 10 * round + 1])
    episodes = {e.meta.key: e for e in TrajectoryStore(store_path).iter_episodes()}
    assert len(episodes) == 6
    (truncated,) = [
        p for p in store_path.glob("*.h5") if TrajectoryStore(p).episodes()[0].round == "1"
    ]
    for episode in TrajectoryStore(truncated).iter_episodes():
        del episodes[episode.meta.key]
    size = _truncate_to_half(truncated)
    stray = store_path / "stray-000000.h5"
    stray.write_text("notes, not HDF5\n")
    return episodes, truncated, size, stray


def test_the_intact_segments_read_back_identical(damaged, store_path):
    intact, truncated, size, stray = damaged
    files = _files(store_path)
    with pytest.warns(DamagedFileWarning) as caught:
        store = TrajectoryStore(store_path)
        episodes = list(store.iter_episodes())
    assert sorted(str(w.message).split(":")[0] for w in caught) == sorted(
        f"cannot read {p}" for p in (truncated, stray)
    )
    assert len(episodes) == len(intact) == 4
    for episode in episodes:
        _assert_identical(episode, intact[episode.meta.key])
    assert {d.path: d.reason for d in store.damaged()} == {
        truncated: f"truncated ({size // 2} of {size} bytes)",
        stray: "not an HDF5 file",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error", DamagedFileWarning)  # each file is reported once
        assert len(store) == 4 and len(store.episodes(round=[0, 2])) == 4
        assert not store.episodes(round=1)
        assert store.sample(8, seed=0)["actions"].shape == (8,)
        assert len(store.damaged()) == 2
    assert _files(store_path) == files  # nothing deleted, moved or rewritten


def test_writing_goes_on_beside_damaged_files(damaged, store_path, caplog):
    _, truncated, _, stray = damaged
    stray_log = store_path / "stray-000000.log"
    stray_log.write_text("not a log either\n")
    damaged_files = {p: p.read_bytes() for p in (truncated, stray, stray_log)}
    _record(store_path, 3, [30])  # its writer's recovery keeps the stray log
    assert "not recovering" in caplog.text and stray_log.exists()
    with pytest.warns(DamagedFileWarning):
        store = TrajectoryStore(store_path)
        rounds = [m.round for m in store.episodes()]
    assert sorted(rounds) == ["0", "0", "2", "2", "3"]
    assert {d.path: d.reason for d in store.damaged()}[stray_log] == (
        "not a feedbackgym trajectory log"
    )
    assert {p: p.read_bytes() for p in damaged_files} == damaged_files


def test_a_damaged_segment_leaves_its_log_in_place(store_path, caplog):
    """A writer that died between sealing and deleting its log, whose segment is later damaged."""
    _record(store_path, 0, [0])
    (episode,) = TrajectoryStore(store_path).iter_episodes()
    dead = Episode(dataclasses.replace(episode.meta, shard="dead", episode=0), episode.columns)
    log = LogFile(store_path / "dead-000000.log", {"shard": "dead"})
    log.append(frame(record_body(encode_episode(dead))))
    os.close(log._fd)  # the writer died: its lock is gone
    segment = store_path / "dead-000000.h5"
    write_segment(segment, [dead])
    _truncate_to_half(segment)
    segment_bytes = segment.read_bytes()
    store = TrajectoryStore(store_path)
    with pytest.warns(DamagedFileWarning, match="dead-000000.h5: truncated"):
        assert {m.shard for m in store.episodes()} == {episode.meta.shard, "dead"}  # from the log
    assert store.recover() == 0
    assert "not recovering" in caplog.text and "dead-000000.h5: truncated" in caplog.text
    assert (store_path / "dead-000000.log").exists() and segment.read_bytes() == segment_bytes
    from_log = next(e for e in store.iter_episodes() if e.meta.shard == "dead")
    _assert_identical(from_log, dead)


def test_a_single_damaged_file(tmp_path):
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as file:
        file["x"] = np.arange(3)
    store = TrajectoryStore(other)
    with pytest.warns(DamagedFileWarning, match="not a feedbackgym trajectory file"):
        assert len(store) == 0
    assert store.damaged() == [DamagedFile(other, "not a feedbackgym trajectory file")]


def test_inspect_lists_damaged_files(damaged, store_path, capsys):
    _, truncated, size, stray = damaged
    with warnings.catch_warnings():
        warnings.simplefilter("error", DamagedFileWarning)  # listed, not warned about
        assert main(["datasets", "inspect", str(store_path)]) == 0
    out = capsys.readouterr().out
    assert "4 segment(s), 0 cold, 0 log(s), 2 damaged" in out.splitlines()[0]
    assert f"damaged, its episodes left out: {truncated}: truncated ({size // 2} of {size}" in out
    assert f"damaged, its episodes left out: {stray}: not an HDF5 file" in out
    rows = [line for line in out.splitlines() if "| feedbackgym/OpsIncidentEasy-v0" in line]
    assert len(rows) == 2 and all("| 2        |" in row for row in rows)  # two rounds intact


def test_inspect_fails_when_nothing_can_be_read(damaged, capsys):
    _, truncated, _, stray = damaged
    assert main(["datasets", "inspect", str(truncated)]) == 2
    captured = capsys.readouterr()
    assert f"damaged, its episodes left out: {truncated}: truncated" in captured.out
    assert f"no episode in {truncated} can be read (1 damaged file(s), listed above)" in (
        captured.err
    )
    assert main(["datasets", "inspect", str(stray.parent / "nothing")]) == 2


def _flip_a_byte_of(segment, dataset):
    """Flips one byte inside the first chunk of ``dataset`` (a numeric column) in place."""
    with h5py.File(segment, "r") as file:
        names = []
        file.visit(names.append)
        info = file[next(n for n in names if n.endswith(f"/{dataset}"))].id.get_chunk_info(0)
    data = bytearray(segment.read_bytes())
    data[info.byte_offset + info.size // 2] ^= 0x10
    segment.write_bytes(bytes(data))


def _log(store_path, name, episodes):
    log = LogFile(store_path / f"{name}-000000.log", {"shard": name})
    for episode in episodes:
        log.append(frame(record_body(encode_episode(episode))))
    os.close(log._fd)  # the writer died: its lock is gone
    return store_path / f"{name}-000000.log"


def test_verify_finds_every_corruption_and_quarantine_moves_only_those(store_path, capsys):
    for round in range(6):
        _record(store_path, round, [10 * round])
    segments = sorted(store_path.glob("*.h5"), key=lambda p: TrajectoryStore(p).episodes()[0].round)
    assert main(["datasets", "verify", str(store_path)]) == 0
    assert "all read" in capsys.readouterr().out
    (episode,) = TrajectoryStore(segments[0]).iter_episodes()

    def copy(shard):
        return Episode(dataclasses.replace(episode.meta, shard=shard, episode=0), episode.columns)

    flipped_log = _log(store_path, "flipped", [copy("flipped"), copy("flipped")])
    data = bytearray(flipped_log.read_bytes())
    data[len(data) // 3] ^= 0x01  # inside the first record: its CRC no longer matches
    flipped_log.write_bytes(bytes(data))
    torn_log = _log(store_path, "torn", [copy("torn")])
    os.truncate(torn_log, torn_log.stat().st_size - 7)
    empty_log = store_path / "empty-000000.log"
    empty_log.write_bytes(b"")
    _truncate_to_half(segments[1])
    segments[2].write_bytes(b"")
    _flip_a_byte_of(segments[3], "env_rewards")
    damaged = {segments[1], segments[2], segments[3], flipped_log, torn_log, empty_log}

    assert main(["datasets", "verify", str(store_path)]) == 1
    out = capsys.readouterr().out
    reported = {line.split(": ")[1] for line in out.splitlines() if line.startswith("damaged: ")}
    assert reported == {str(p) for p in damaged}
    assert f"{segments[2]}: empty (0 bytes)" in out and "env_rewards cannot be read" in out
    assert "past its last complete record" in out and "6 damaged file(s)" in out

    assert main(["datasets", "verify", str(store_path), "--quarantine"]) == 1
    assert not any(p.exists() for p in damaged)
    assert all((store_path / "quarantine" / p.name).exists() for p in damaged)
    assert main(["datasets", "verify", str(store_path)]) == 0  # what is left reads in full
    with warnings.catch_warnings():
        warnings.simplefilter("error", DamagedFileWarning)
        assert {m.round for m in TrajectoryStore(store_path).episodes()} == {"0", "4", "5"}
    assert main(["datasets", "verify", str(store_path / "nowhere")]) == 2
