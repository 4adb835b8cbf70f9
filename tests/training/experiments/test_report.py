import csv
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from feedbackgym.cli import main
from feedbackgym.training.common.run_files import CURVE_FIELDS, append_curve
from feedbackgym.training.experiments.compare import ComparisonConfig
from feedbackgym.training.experiments.report import (
    _phase_bounds,
    find_runs,
    plot_curves,
    write_tables,
)
from feedbackgym.training.experiments.stats import (
    IMPROVEMENT_FIELDS,
    improvement_rows,
    summarize_arm,
)

PHASES = {"g": "guide", "f": "fade", "r": "review", "n": "none"}


def _run(source, arm, seed, successes, *, phases=None, rounds=None, config=True, bc=0, **extra):
    """A run directory as a comparison leaves it: ``curve.csv`` (one validation a round)."""
    run = source / "runs" / f"{arm}-seed{seed}"
    run.mkdir(parents=True)
    phases = phases or "n" * len(successes)
    for i, (success, phase) in enumerate(zip(successes, phases, strict=True)):
        row = dict.fromkeys(CURVE_FIELDS, success) | {"step": 100 * (i + 1), "round": i + 1}
        append_curve(run / "curve.csv", row | {"phase": PHASES[phase], "mean_length": 9})
    if config:
        budget = 100 * (rounds or len(successes))
        settings = {"arm": arm, "seed": seed, "env_id": "feedbackgym/ToyCorridor-v0"}
        settings |= {"total_steps": budget, "n_envs": 1, "n_steps": 100, "bc_episodes": bc}
        settings |= extra
        (run / "config.json").write_text(json.dumps(settings))
    return SimpleNamespace(arm=arm, out_dir=str(run))


def _read(path):
    with path.open() as file:
        return list(csv.DictReader(file))


def test_report_builds_one_report_from_several_comparisons(tmp_path, capsys):
    first, second, out = tmp_path / "first", tmp_path / "second", tmp_path / "report"
    for seed, finals in enumerate([[0.2, 0.6, 0.9], [0.1, 0.5, 0.8], [0.0, 0.3]]):
        _run(first, "guide-then-review", seed, finals, phases="gfr"[: len(finals)], rounds=3)
    _run(second, "shaping", 0, [0.0, 0.1, 0.2], config=False)  # arm and seed from the name
    _run(second, "shaping", 1, [0.0, 0.0, 0.1])
    (second / "runs" / "shaping-seed2").mkdir()  # started, not validated yet

    assert main(["report", "--out", str(out), str(first), str(second)]) == 0
    printed = capsys.readouterr()
    assert "| guide-then-review | 3 | 300 (1 short) |" in printed.out
    assert "shaping-seed2: no validation after a round yet" in printed.err
    assert "guide-then-review-seed2: not finished, validated to 200 steps" in printed.err
    results = {row["arm"]: row for row in _read(out / "results.csv")}
    assert list(results) == ["guide-then-review", "shaping"]
    assert results["shaping"]["seeds"] == "2"
    assert {"iqm", "iqm_low", "iqm_high", "mean_low", "mean_high"} <= set(results["shaping"])
    assert results["guide-then-review"]["steps_to_80_censored"] == "True"
    with (out / "improvement.csv").open() as file:
        assert next(csv.reader(file)) == list(IMPROVEMENT_FIELDS)
    improvement = _read(out / "improvement.csv")
    assert [(r["arm"], r["baseline"]) for r in improvement] == [
        ("guide-then-review", "shaping"),
        ("shaping", "guide-then-review"),
    ]
    assert float(improvement[0]["probability"]) == 1.0
    sooner = _read(out / "sooner.csv")  # 80% at 300, 300 and never; never by either shaping run
    assert (sooner[0]["arm"], float(sooner[0]["probability"])) == ("guide-then-review", 5 / 6)
    markdown = (out / "results.md").read_text()
    # steps to 80%: IQM [bootstrap CI], a lower bound as one run never got there
    assert re.search(r"\| ≥ [\d,]+ \[[\d,]+, [\d,]+\] \(2/3\) \|", markdown)
    assert "| guide-then-review | shaping | 0.83 [" in markdown  # reaches 80% sooner
    assert "| guide-then-review | shaping | 1.00 [1.00, 1.00] |" in markdown
    assert (
        "- " + str(second / "runs" / "shaping-seed2") + ": no validation after a round yet"
        in markdown
    )
    assert (out / "curves.png").stat().st_size > 0


def test_report_refuses_a_source_without_runs_and_a_run_twice(tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    _run(first, "sparse", 0, [0.0, 0.1])
    _run(second, "sparse", 0, [0.0, 0.2])
    (tmp_path / "empty").mkdir()
    out = ["--out", str(tmp_path / "report")]
    assert main(["report", *out, str(first), str(tmp_path / "empty")]) == 2
    assert "holds no runs" in capsys.readouterr().err
    assert main(["report", *out, str(first), str(second)]) == 2
    assert "sparse seed 0 is in both" in capsys.readouterr().err
    (tmp_path / "odd" / "runs" / "mine").mkdir(parents=True)
    with pytest.raises(ValueError, match="not ARM-seedS"):
        find_runs([tmp_path / "odd"])


def test_report_renames_one_source_s_arm(tmp_path, capsys):
    old, new = tmp_path / "old", tmp_path / "new"
    _run(old, "guide-then-review", 0, [0.0, 0.9])  # made when the name had shaping on
    _run(new, "guide-then-review", 0, [0.0, 0.1])
    out = ["--out", str(tmp_path / "report")]
    rename = ["--rename", f"{old}:guide-then-review=guide-then-review+shaping"]
    assert main(["report", *out, *rename, str(old), str(new)]) == 0
    rows = _read(tmp_path / "report" / "results.csv")
    assert [r["arm"] for r in rows] == ["guide-then-review+shaping", "guide-then-review"]
    capsys.readouterr()
    assert main(["report", *out, "--rename", "nowhere:a=b", str(old)]) == 2
    assert "not one of the sources" in capsys.readouterr().err
    assert main(["report", *out, "--rename", f"{old}:a", str(old)]) == 2
    assert "expected SRC:ARM=LABEL" in capsys.readouterr().err


def test_tables_mark_censored_steps_and_leave_out_improvement_for_one_arm(tmp_path):
    curves = [
        {
            "step": np.array([100.0, 200.0]),
            "phase": np.array(["none"] * 2),
            "success": np.array([0.2, s]),
            "success_unguided": np.array([0.2, s]),
            "mean_return": np.array([0.0, s]),
        }
        for s in (0.6, 0.9, 0.4)
    ]
    rows = [summarize_arm("sparse", curves)]
    write_tables(tmp_path, rows, improvement_rows({"sparse": [0.6, 0.9, 0.4]}))
    markdown = (tmp_path / "results.md").read_text()
    assert "| 63% [40%, 90%] |" in markdown and "| ≥ 200 [200, 200] (1/3) |" in markdown
    assert "P(arm > baseline)" not in markdown
    assert (tmp_path / "improvement.csv").read_text().strip() == ",".join(IMPROVEMENT_FIELDS)


def test_the_plot_shades_the_median_switch_of_the_runs(tmp_path):
    config = ComparisonConfig(
        env_id="feedbackgym/OpsIncidentEasy-v0",
        arms=["guide-then-review"],
        seeds=3,
        steps=4096,
        out=str(tmp_path),
    )
    runs = [
        _run(tmp_path, "guide-then-review", seed, [0.5] * 5, phases=phases)
        for seed, phases in enumerate(["ggfrr", "gggfr", "gfrrr"])
    ]
    planned = config.planned_switch()
    assert _phase_bounds(runs, planned) == [(300.0, 400.0), (400.0, 500.0), (200.0, 300.0)]
    assert plot_curves(tmp_path, runs, title="t", planned_switch=planned).stat().st_size > 0
    unswitched = [_run(tmp_path, "guide-then-review", 9, [0.5] * 3, phases="ggg")]
    assert _phase_bounds(unswitched, planned) == [planned]  # none switched yet: the plan
    assert _phase_bounds(runs[:0], None) == []


def test_a_plot_without_a_two_phase_arm_shades_no_phase(tmp_path):
    shaping = [_run(tmp_path, "shaping", seed, [0.1, 0.4, 0.6]) for seed in range(2)]
    assert _phase_bounds(shaping, None) == []
    assert _phase_bounds(shaping, (200.0, 300.0)) == []  # even with a planned switch


def test_report_of_a_demonstrations_study_gives_success_against_n(tmp_path, capsys):
    sources = {}
    for n, shaping, guided in [(0, 0.1, 0.4), (30, 0.5, 0.8), (300, 0.8, 0.9)]:
        for arm, final in (("shaping", shaping), ("guide-then-review+shaping", guided)):
            source = sources.setdefault((n, arm), tmp_path / f"bc{n}-{arm}")
            for seed in range(3):
                _run(source, arm, seed, [0.0, final + 0.05 * seed], bc=n, phases="gr")
    out = tmp_path / "report"
    assert main(["report", "--out", str(out), *map(str, sources.values())]) == 0
    printed = capsys.readouterr().out
    arms = [row["arm"] for row in _read(out / "results.csv")]
    assert arms == [
        "shaping",
        "guide-then-review+shaping",
        "bc30+shaping",
        "bc30+guide-then-review+shaping",
        "bc300+shaping",
        "bc300+guide-then-review+shaping",
    ]
    rows = _read(out / "demonstrations.csv")
    assert [(r["arm"], r["demonstrations"], r["runs"]) for r in rows] == [
        ("shaping", "0", "3"),
        ("shaping", "30", "3"),
        ("shaping", "300", "3"),
        ("guide-then-review+shaping", "0", "3"),
        ("guide-then-review+shaping", "30", "3"),
        ("guide-then-review+shaping", "300", "3"),
    ]
    assert float(rows[1]["iqm"]) == pytest.approx(0.55)
    # guided with 30 demonstrations against shaping with 30 and with its most (300)
    assert "| guide-then-review+shaping | 30 | shaping | 30 | 1.00 [1.00, 1.00] |" in printed
    assert "| guide-then-review+shaping | 30 | shaping | 300 | 0.50 [" in printed
    assert (out / "demonstrations.png").stat().st_size > 0
    assert len(_phase_bounds(find_runs([sources[30, "guide-then-review+shaping"]])[0], None)) == 3


def test_a_report_of_one_n_writes_no_demonstrations_table(tmp_path, capsys):
    _run(tmp_path / "a", "shaping", 0, [0.0, 0.5], bc=30)
    assert main(["report", "--out", str(tmp_path / "report"), str(tmp_path / "a")]) == 0
    assert "bc30+shaping" in capsys.readouterr().out
    assert not (tmp_path / "report" / "demonstrations.csv").exists()


def test_runs_with_review_credit_are_reported_apart(tmp_path, capsys):
    arm = "guide-then-review+shaping"
    _run(tmp_path / "plain", arm, 0, [0.0, 0.9], phases="gr", review_credit=False)
    _run(tmp_path / "credited", arm, 0, [0.0, 0.5], phases="gr", review_credit=True)
    _run(tmp_path / "credited", arm, 1, [0.0, 0.4], phases="gr", review_credit=True, bc=30)
    _run(tmp_path / "credited", "shaping", 0, [0.0, 0.4], review_credit=True)  # no review
    out = tmp_path / "report"
    sources = [str(tmp_path / "plain"), str(tmp_path / "credited")]
    assert main(["report", "--out", str(out), *sources]) == 0
    assert [row["arm"] for row in _read(out / "results.csv")] == [
        arm,
        f"{arm} (review credit)",
        f"bc30+{arm} (review credit)",
        "shaping",
    ]
    printed = capsys.readouterr().out  # two Ns: the study's table, one run a group (no CI)
    assert f"| {arm} (review credit) | 30 | {arm} | 0 | 0.00 |" in printed
    assert "nan" not in (out / "demonstrations.md").read_text()
    assert len(_phase_bounds(find_runs([tmp_path / "credited"])[0], None)) == 2


def test_a_run_validated_only_as_a_clone_is_left_out_and_curves_meet_by_step(tmp_path):
    from feedbackgym.training.common.run_files import read_curve
    from feedbackgym.training.experiments.report import success_by_step

    cloned = _run(tmp_path, "shaping", 0, [], bc=10)
    stopped = _run(tmp_path, "shaping", 1, [], bc=10)  # stopped after its clone's validation
    for run, rows in ((cloned, [0.4, 0.5, 0.6]), (stopped, [0.3])):
        for i, success in enumerate(rows):  # the clone at step 0, then a validation a round
            row = dict.fromkeys(CURVE_FIELDS, success) | {"step": 100 * i, "round": i}
            append_curve(Path(run.out_dir) / "curve.csv", row | {"phase": "none"})
    older = _run(tmp_path, "guide", 0, [0.1, 0.2])  # from before clones were validated
    runs, notes = find_runs([tmp_path])
    assert [run.seed for run in runs if run.arm == "bc10+shaping"] == [0]
    assert any("shaping-seed1: no validation after a round yet" in note for note in notes)
    steps, success = success_by_step([read_curve(cloned.out_dir), read_curve(older.out_dir)])
    assert steps.tolist() == [0, 100, 200] and success == [[0.4], [0.5, 0.1], [0.6, 0.2]]


def test_the_phases_are_grey_and_every_arm_has_its_own_colour(tmp_path, monkeypatch):
    from matplotlib.colors import to_rgb

    from feedbackgym.training.experiments import report

    drawn = {}
    save = report.save_plot

    def keep(figure, axis, path, **kwargs):
        drawn["patches"] = [p.get_facecolor() for p in axis.patches if p.get_label() != ""]
        drawn["hatched"] = [to_rgb(p.get_edgecolor()) for p in axis.patches if p.get_hatch()]
        drawn["lines"] = {line.get_label(): to_rgb(line.get_color()) for line in axis.lines}
        return save(figure, axis, path, **kwargs)

    monkeypatch.setattr(report, "save_plot", keep)
    runs = [
        _run(tmp_path, "guide-then-review+shaping", 0, [0.1, 0.2, 0.3, 0.4], phases="ggfr"),
        _run(tmp_path, "shaping", 0, [0.1, 0.2, 0.3, 0.4]),
        _run(tmp_path, "sparse", 0, [0.0] * 4),
    ]
    plot_curves(tmp_path, runs, title="t", planned_switch=(200.0, 300.0))
    shades = [tuple(face[:3]) for face in drawn["patches"]] + drawn["hatched"]
    assert shades and all(r == g == b for r, g, b in shades)  # grey
    arms = [drawn["lines"][arm] for arm in ("guide-then-review+shaping", "shaping", "sparse")]
    assert len(set(arms)) == 3 and not any(r == g == b for r, g, b in arms)
