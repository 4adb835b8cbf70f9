"""The ``feedbackgym`` console script, run as users run it."""

import json
import shutil
import subprocess
import sys

import pytest

from feedbackgym.cli import main


def _run(*args):
    exe = shutil.which("feedbackgym")
    command = [exe, *args] if exe else [sys.executable, "-m", "feedbackgym.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_envs_lists_every_id_with_a_description():
    result = _run("envs")
    assert result.returncode == 0
    lines = result.stdout.strip().splitlines()
    ids = [line.split()[0] for line in lines]
    assert "feedbackgym/OpsIncident-v0" in ids and "feedbackgym/OpsIncidentHard-v0" in ids
    assert all(len(line.split()) > 2 for line in lines)


def test_play_expert_prints_episodes_and_summary():
    result = _run(
        "play",
        "feedbackgym/OpsIncidentMedium-v0",
        "--policy",
        "expert",
        "--episodes",
        "3",
        "--seed",
        "5",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("success (resolved)") == 3
    assert "seed 7:" in result.stdout
    assert "| expert | 3" in result.stdout and "100.0%" in result.stdout


def test_play_passes_kwargs_and_shows_progress_on_long_runs():
    result = _run(
        "play",
        "feedbackgym/OpsIncident-v0",
        "--kwarg",
        "difficulty=hard",
        "--kwarg",
        "obs_mode=text",
        "--episodes",
        "25",
    )
    assert result.returncode == 0, result.stderr
    assert "25/25" in result.stderr
    assert "subgoals 0/" in result.stdout and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["play", "feedbackgym/OpsIncdent-v0"], "unknown env id"),
        (["play", "CartPole-v1", "--policy", "expert"], "no expert policy"),
        (
            ["play", "feedbackgym/OpsIncident-v0", "--kwarg", "difficulty=extreme"],
            "difficulty must be one of",
        ),
        (["play", "feedbackgym/OpsIncident-v0", "--kwarg", "colour=red"], "bad keyword argument"),
        (["play", "feedbackgym/OpsIncident-v0", "--kwarg", "novalue"], "KEY=VALUE"),
        (
            [
                "train",
                "--env",
                "feedbackgym/OpsIncidentEasy-v0",
                "--steps",
                "64",
                "--policy",
                "entity",
            ],
            "feedbackgym/OpsIncidentEasy-v0 declares none (use policy 'mlp')",
        ),
        (
            ["play", "feedbackgym/OpsIncidentEasy-v2", "--checkpoint", "no/such/best.pt"],
            "no checkpoint no/such/best.pt",
        ),
    ],
)
def test_errors_name_what_was_wrong(args, message):
    result = _run(*args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args", [["play", "x", "--episodes", "0"], ["play", "x", "--policy", "smart"], ["fly"]]
)
def test_bad_options_exit_2(args):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2


def test_demo_prints_a_table_for_every_difficulty(capsys):
    assert main(["demo", "--episodes", "5"]) == 0
    rows = [line.split("|") for line in capsys.readouterr().out.splitlines()[2:]]
    cells = {(row[1].strip(), row[2].strip()): row[4].strip() for row in rows}
    for difficulty in ("Easy", "Medium", "Hard", "Extreme"):
        assert cells[(f"feedbackgym/OpsIncident{difficulty}-v1", "expert")] == "100.0%"
        assert cells[(f"feedbackgym/OpsIncident{difficulty}-v1", "random")] == "0.0%"


def test_the_reliance_rule_flag_turns_the_rule_on_with_the_file_s_settings(tmp_path):
    import argparse

    from feedbackgym.cli._runs import add_run_arguments, feedback_overrides
    from feedbackgym.config import FeedbackConfig, merge_config
    from feedbackgym.errors import ConfigError

    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    assert "reliance" not in feedback_overrides(parser.parse_args([]))  # fixed dropout
    overrides = feedback_overrides(parser.parse_args(["--reliance-rule"]))
    assert merge_config(FeedbackConfig(), overrides).reliance.raise_above == 0.2
    from_file = FeedbackConfig.from_mapping({"reliance": {"raise_above": 0.3}})
    assert merge_config(from_file, overrides).reliance.raise_above == 0.3
    low = feedback_overrides(parser.parse_args(["--reliance-rule", "--dropout", "0.1"]))
    with pytest.raises(ConfigError, match=r"guide\.dropout 0\.1 is outside"):
        merge_config(FeedbackConfig(), low)


def test_review_credit_is_off_by_default_and_its_flag_reaches_every_run(tmp_path):
    from feedbackgym.cli import _parser
    from feedbackgym.cli.compare import _comparison_config

    base = ["compare", "--env", "feedbackgym/OpsIncidentEasy-v0", "--arms", "guide-then-review"]
    base += ["--seeds", "2", "--steps", "2048", "--out", str(tmp_path)]
    credited = _comparison_config(_parser().parse_args([*base, "--review-credit"]))
    assert [run.review_credit for run in credited.run_configs()] == [True, True]
    default = _comparison_config(_parser().parse_args(base))
    assert not any(run.review_credit for run in default.run_configs())
    train = _parser().parse_args(
        ["train", "--no-review-credit", "--env", "x", "--arm", "review", "--steps", "1"]
    )
    assert train.review_credit is False


def test_first_seed_gives_fresh_seeds_and_a_negative_one_is_refused(tmp_path):
    from feedbackgym.cli import _parser
    from feedbackgym.cli._helpers import CommandError
    from feedbackgym.cli.compare import _comparison_config

    base = ["compare", "--env", "feedbackgym/OpsIncidentEasy-v0", "--arms", "shaping"]
    base += ["--seeds", "2", "--steps", "2048", "--out", str(tmp_path)]
    fresh = _comparison_config(_parser().parse_args([*base, "--first-seed", "5"]))
    assert [(run.seed, run.out_dir[-6:]) for run in fresh.run_configs()] == [
        (5, "-seed5"),
        (6, "-seed6"),
    ]
    assert json.loads(fresh.to_json())["first_seed"] == 5
    with pytest.raises(CommandError, match="--first-seed must be >= 0"):
        _comparison_config(_parser().parse_args([*base, "--first-seed", "-1"]))


def test_validation_flags_reach_every_run_and_override_the_quick_defaults(tmp_path):
    from feedbackgym.cli import _parser
    from feedbackgym.cli.compare import _comparison_config

    base = ["compare", "--env", "feedbackgym/OpsIncidentEasy-v0", "--arms", "sparse,shaping"]
    base += ["--seeds", "1", "--steps", "8192", "--out", str(tmp_path)]
    flagged = _comparison_config(
        _parser().parse_args([*base, "--eval-every", "3", "--eval-episodes", "5"])
    )
    assert {(run.eval_every, run.eval_episodes) for run in flagged.run_configs()} == {(3, 5)}
    default = _comparison_config(_parser().parse_args(base)).run_configs()[0]
    assert (default.eval_every, default.eval_episodes) == (1, 30)  # 8 rounds < 15: every one
    quick = ["compare", "--quick", "--out", str(tmp_path), "--eval-episodes", "4"]
    quick_runs = _comparison_config(_parser().parse_args([*quick, "--eval-every", "7"]))
    assert {(run.eval_every, run.eval_episodes) for run in quick_runs.run_configs()} == {(7, 4)}
    with pytest.raises(SystemExit):
        _parser().parse_args([*base, "--eval-episodes", "0"])


@pytest.mark.parametrize(
    "command",
    [
        ["train", "--env", "feedbackgym/OpsIncidentEasy-v2", "--steps", "1"],
        ["train-llm", "--env", "feedbackgym/OpsIncidentEasy-v2", "--rounds", "1"],
        ["serve-env", "--env", "feedbackgym/OpsIncidentEasy-v2"],
        ["compare", "--env", "feedbackgym/OpsIncidentEasy-v2", "--seeds", "1", "--steps", "4096"],
    ],
)
def test_every_command_refuses_an_unknown_arm_in_one_line_that_gives_the_grammar(
    command, capsys, tmp_path
):
    flag = "--arms" if command[0] == "compare" else "--arm"
    with pytest.raises(SystemExit) as stop:
        status = main([*command, flag, "shaping+tutor", "--out", str(tmp_path)])
        raise SystemExit(status)
    assert stop.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "unknown arm 'shaping+tutor'" in error and "+reexplore" in error
    assert "sparse+reexplore" not in error  # the grammar, not every one of the arms


def test_a_served_env_refuses_the_vector_trainers_suffixes(capsys):
    with pytest.raises(SystemExit) as stop:
        main(
            ["serve-env", "--env", "feedbackgym/OpsIncidentEasy-v2", "--arm", "shaping+curriculum"]
        )
    assert stop.value.code == 2
    assert "+curriculum is train and compare's" in capsys.readouterr().err
