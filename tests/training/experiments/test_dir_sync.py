"""Mirroring a run directory: growth shipped as tails, rewrites whole, deletions, restores."""

import os

import pytest

from feedbackgym.training.experiments.dir_sync import DirChanges, apply_changes, restore, snapshot


def test_a_mirror_follows_appends_rewrites_and_deletions(tmp_path):
    run, mirror = tmp_path / "run", tmp_path / "mirror"
    (run / "checkpoints").mkdir(parents=True)
    (run / "curve.csv").write_text("step\n")
    (run / "checkpoints" / "round_0000.pt").write_bytes(b"\0" * 10_000)
    (run / "state.json.tmp").write_text("{}")  # never shipped
    (run / ".hidden.log.new").write_text("x")
    watch = DirChanges(run)
    first = watch.changes()
    assert sorted(first["written"]) == ["checkpoints/round_0000.pt", "curve.csv"]
    apply_changes(mirror, first)
    with (run / "curve.csv").open("a") as file:
        file.write("128\n")
    (run / "state.json").write_text('{"round": 0}')
    (run / "checkpoints" / "round_0000.pt").unlink()
    changes = watch.changes()
    assert changes["appended"] == {"curve.csv": (5, b"128\n")}
    assert list(changes["written"]) == ["state.json"]
    assert changes["deleted"] == ["checkpoints/round_0000.pt"]
    apply_changes(mirror, changes)
    assert snapshot(mirror) == snapshot(run)
    assert watch.changes() == {"written": {}, "appended": {}, "deleted": []}


def test_a_file_rewritten_in_place_and_longer_is_shipped_whole(tmp_path):
    (tmp_path / "config.json").write_text('{"a": 1}')
    watch = DirChanges(tmp_path)
    watch.changes()
    (tmp_path / "config.json").write_text('{"b": 22222}')  # same inode, longer, not an append
    changes = watch.changes()
    assert changes["written"] == {"config.json": b'{"b": 22222}'} and not changes["appended"]


def test_an_append_needs_the_mirror_at_its_offset(tmp_path):
    (tmp_path / "log").write_text("ab")
    with pytest.raises(ValueError, match="the change starts at 5"):
        apply_changes(tmp_path, {"written": {}, "appended": {"log": (5, b"c")}, "deleted": []})


def test_paths_outside_the_directory_are_refused(tmp_path):
    with pytest.raises(ValueError, match="outside"):
        restore(tmp_path / "run", {"../escape": b"x"})
    with pytest.raises(ValueError, match="outside"):
        apply_changes(tmp_path, {"written": {"/etc/x": b""}, "appended": {}, "deleted": []})


def test_a_snapshot_restores_elsewhere(tmp_path):
    (tmp_path / "run" / "tb" / "arm_1").mkdir(parents=True)
    (tmp_path / "run" / "tb" / "arm_1" / "events").write_bytes(os.urandom(100))
    (tmp_path / "run" / "state.json").write_text("{}")
    restore(tmp_path / "copy", snapshot(tmp_path / "run"))
    assert snapshot(tmp_path / "copy") == snapshot(tmp_path / "run")
    assert snapshot(tmp_path / "missing") == {}
