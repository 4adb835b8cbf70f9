"""The version registry: numbered adapters, promotion gated on validation, a canary, rollbacks."""

import json

import pytest

from feedbackgym.cli import main
from feedbackgym.language.versions import (
    Serving,
    VersionRegistry,
    VersionRejected,
    route,
)


def _adapter(name):
    def save(folder):
        (folder / "adapter_config.json").write_text(json.dumps({"name": name}))

    return save


@pytest.fixture
def registry(tmp_path):
    registry = VersionRegistry(tmp_path / "versions")
    registry.add(_adapter("one"), round=3, validation={"success_unguided": 0.2})
    registry.add(_adapter("two"), round=7, validation={"success_unguided": 0.5})
    return registry


def test_two_versions_a_canary_share_and_a_rollback(registry):
    assert [v.number for v in registry.versions()] == [1, 2]
    assert registry.serving() == Serving(None, None)  # nothing promoted: the base model serves
    registry.promote(1)
    registry.start_canary(2, share=0.25)
    serving = registry.serving()
    assert (serving.current, serving.canary, serving.share) == (1, 2, 0.25)
    assert json.loads((registry.path(2) / "adapter_config.json").read_text())["name"] == "two"
    answers = [route(serving, f"request {n}") for n in range(2000)]
    assert 0.2 < answers.count(2) / len(answers) < 0.3 and set(answers) == {1, 2}
    assert route(serving, "request 7") == route(serving, "request 7")  # a conversation stays put
    registry.promote(2)
    assert registry.serving() == Serving(2, str(registry.path(2)))  # promoted: the canary ends
    registry.rollback()
    assert registry.state.current == 1
    with pytest.raises(VersionRejected, match="no earlier promoted version"):
        registry.rollback()  # 1 was the first: rolling back again has nowhere to go
    registry.rollback(2)  # any earlier version named, forward too
    assert registry.state.current == 2
    assert [e["event"] for e in registry.state.history] == [
        "add",
        "add",
        "promote",
        "canary",
        "promote",
        "rollback",
        "rollback",
    ]


def test_a_version_that_failed_validation_is_never_promoted(registry):
    failed = registry.add(
        _adapter("bad"), round=9, validation={"success_unguided": 0.0}, passed=False
    )
    registry.promote(2)
    for attempt in (
        lambda: registry.promote(failed.number),
        lambda: registry.start_canary(failed.number, 0.5),
        lambda: registry.rollback(failed.number),
    ):
        with pytest.raises(VersionRejected, match="failed its validation"):
            attempt()
    assert registry.state.current == 2 and registry.state.canary is None
    with pytest.raises(VersionRejected, match="no version 12"):
        registry.promote(12)
    with pytest.raises(ValueError, match="share"):
        registry.start_canary(1, 1.5)


def test_the_registry_file_is_plain_json_a_server_reads_alone(registry):
    registry.promote(1)
    registry.start_canary(2, 0.1)
    data = json.loads(registry.file.read_text())
    assert data["current"] == 1 and data["canary"] == {"version": 2, "share": 0.1}
    paths = {v["number"]: registry.root / v["path"] for v in data["versions"]}
    assert all((path / "adapter_config.json").exists() for path in paths.values())
    assert not list(registry.root.glob("*.tmp"))  # written by an atomic rename


def test_the_versions_command_lists_promotes_canaries_and_rolls_back(registry, capsys):
    run = registry.root.parent
    assert main(["versions", str(run), "--promote", "1"]) == 0
    assert main(["versions", str(run), "--canary", "2", "--share", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "| 1       | 3     | yes    | 0%      | 20%            | current    |" in out
    assert "canary 20%" in out
    assert main(["versions", str(run), "--rollback"]) == 2  # nothing promoted before 1
    assert "no earlier promoted version" in capsys.readouterr().err
    assert main(["versions", str(run / "nowhere")]) == 2
    assert "no version registry" in capsys.readouterr().err
