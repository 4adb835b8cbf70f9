import logging
import os
import time

import pytest

from feedbackgym.config import ConfigWatcher, FeedbackConfig, load_config
from feedbackgym.errors import ConfigError


def _write(path, text):
    path.write_text(text)
    stamp = time.time_ns() + 1_000_000
    os.utime(path, ns=(stamp, stamp))  # make sure the mtime moves on coarse clocks


def test_defaults_and_both_formats(tmp_path):
    assert FeedbackConfig().schedule.switch_at == 0.4 and FeedbackConfig().retention.hot_days == 7
    yaml_file = tmp_path / "c.yaml"
    _write(yaml_file, "guide: {every: 3}\nschedule: {switch_at: 0.3, fade: 4}\n")
    toml_file = tmp_path / "c.toml"
    _write(toml_file, "[guide]\nevery = 3\n[schedule]\nswitch_at = 0.3\nfade = 4\n")
    assert load_config(yaml_file) == load_config(toml_file)
    assert load_config(yaml_file).guide.every == 3
    empty = tmp_path / "empty.yaml"
    _write(empty, "")
    assert load_config(empty) == FeedbackConfig()


@pytest.mark.parametrize(
    "text, field",
    [
        ("guide: {every: 0}", "guide.every"),
        ("review: {window: -2}", "review.window"),
        ("schedule: {switch_at: 2}", "schedule.switch_at"),
        ("guide: {channels: [smell]}", "guide.channels"),
        ("retention: {hot_days: 10, cold_days: 5}", "retention"),
        ("colour: red", "colour"),
        ("schedule: {adaptive: {sooner_below: 0.2, later_above: 0.1}}", "schedule.adaptive"),
    ],
)
def test_errors_name_the_field(tmp_path, text, field):
    path = tmp_path / "bad.yaml"
    _write(path, text)
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_config(path)


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    _write(bad, "guide: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    other = tmp_path / "c.json"
    _write(other, "{}")
    with pytest.raises(ConfigError, match=r"\.yaml"):
        load_config(other)


def test_hot_reload_applies_valid_edits_and_rejects_invalid_ones(tmp_path, caplog):
    path = tmp_path / "feedback.yaml"
    _write(path, "guide: {every: 4}\n")
    watcher = ConfigWatcher(path)
    assert not watcher.poll()
    _write(path, "guide: {every: 2}\n")
    assert watcher.poll() and watcher.config.guide.every == 2 and watcher.version == 2
    with caplog.at_level(logging.WARNING):
        _write(path, "guide: {every: zero}\n")
        assert not watcher.poll()
    assert watcher.config.guide.every == 2 and watcher.version == 2
    assert "guide.every" in caplog.text
    _write(path, "guide: {every: 2, channels: [vector]}\n")
    assert (
        not watcher.poll() and "channels and readers cannot change" in watcher.changes[-1]["reason"]
    )
    assert [c["applied"] for c in watcher.changes] == [True, False, False]
    assert all(isinstance(c["time"], float) for c in watcher.changes)


@pytest.mark.parametrize(
    "text, message",
    [
        ("reliance: {step: 0}", r"reliance\.step"),
        ("reliance: {max_dropout: 1.5}", r"reliance\.max_dropout"),
        ("reliance: {raise_above: 0.1, lower_below: 0.2}", "lower_below must not exceed raise_a"),
        ("reliance: {min_dropout: 0.8, max_dropout: 0.3}", "min_dropout must not exceed max_d"),
        ("guide: {dropout: 0.1}\nreliance: {}", r"guide\.dropout 0\.1 is outside \[reliance"),
    ],
)
def test_reliance_rule_errors_name_the_field(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    _write(path, text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_the_reliance_rule_is_off_by_default():
    assert FeedbackConfig().reliance is None
    assert FeedbackConfig.from_mapping({"reliance": {}}).reliance.max_dropout == 0.9
