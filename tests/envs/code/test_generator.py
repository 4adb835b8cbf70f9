"""Generated projects: families, sizes, distinctness, and that each instance means what it says.

The semantic check runs generated (trusted) code directly in one subprocess:
on the buggy code exactly the listed visible test fails; the fix passes every
visible and hidden test; every wrong fix and decoy fails some test.
"""

import json
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from feedbackgym.envs.code import DIFFICULTIES, FAMILIES
from feedbackgym.envs.code.generator import HIDDEN_FILE, MAX_LINES, N_EDITS, generate
from feedbackgym.envs.code.names import MODULES

FILE_COUNTS = {"easy": {2}, "medium": {3, 4}, "hard": {5, 6}}

DRIVER = r"""
import importlib, json, os, sys, tempfile
jobs = json.load(sys.stdin)
scratch = tempfile.TemporaryDirectory()  # removed at exit
root = scratch.name
out = []
for k, job in enumerate(jobs):
    folder = os.path.join(root, str(k))
    os.mkdir(folder)
    for name, text in job["files"].items():
        with open(os.path.join(folder, name), "w") as handle:
            handle.write(text)
    sys.path.insert(0, folder)
    statuses = {}
    for file, name in job["tests"]:
        try:
            getattr(importlib.import_module(file[:-3]), name)()
            statuses[name] = "pass"
        except AssertionError:
            statuses[name] = "fail"
        except Exception:
            statuses[name] = "error"
    for name in job["files"]:
        sys.modules.pop(name[:-3], None)
    sys.path.remove(folder)
    out.append(statuses)
json.dump(out, sys.stdout)
"""


def _variants(project):
    files = dict(project.files) | dict(project.hidden_files)
    tests = [*project.tests, *project.hidden_tests]
    yield None, files, tests
    for edit in project.edits:
        lines = files[edit.file].split("\n")
        lines[edit.line - 1] = edit.text
        yield edit, files | {edit.file: "\n".join(lines)}, tests


def _run_all(jobs):
    done = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps([{"files": f, "tests": t} for _, f, t, _ in jobs]),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def test_at_least_eight_families():
    assert len(FAMILIES) >= 8


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_has_200_distinct_instances(family):
    seen = set()
    for seed in range(240):
        project = generate(family, "easy", np.random.default_rng(seed))
        seen.add(tuple(project.files) + tuple(project.hidden_files))
    assert len(seen) >= 200


def test_instances_mean_what_they_say():
    jobs = []
    for family in FAMILIES:
        for difficulty in DIFFICULTIES:
            for seed in range(3):
                project = generate(family, difficulty, np.random.default_rng(seed))
                jobs += [(edit, files, tests, project) for edit, files, tests in _variants(project)]
    problems = Counter()
    overfit = Counter()
    for (edit, _, _, project), statuses in zip(jobs, _run_all(jobs), strict=True):
        visible = {name for _, name in project.tests}
        failing = {name for name, status in statuses.items() if status != "pass"}
        if edit is None:
            if failing & visible != set(project.failing):
                problems[(project.family, "buggy", tuple(sorted(failing & visible)))] += 1
        elif edit.role == "fix":
            if failing:
                problems[(project.family, "fix", tuple(sorted(failing)))] += 1
        elif not failing:
            problems[(project.family, edit.role, edit.text)] += 1
        elif not failing & visible:
            overfit[project.family] += 1
    assert not problems
    assert len(overfit) >= 8  # wrong fixes that only the hidden tests catch, in most families


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_project_shape(difficulty):
    for seed in range(40):
        family = sorted(FAMILIES)[seed % len(FAMILIES)]
        project = generate(family, difficulty, np.random.default_rng(seed))
        assert len(project.files) in FILE_COUNTS[difficulty]
        assert all(text.count("\n") <= MAX_LINES for _, text in project.files)
        assert len(project.edits) == N_EDITS
        assert [e.role for e in project.edits].count("fix") == 1
        assert len(set(project.edits)) == N_EDITS
        assert project.hidden_tests and all(f == HIDDEN_FILE for f, _ in project.hidden_tests)
        assert HIDDEN_FILE not in project.file_names
        assert project.bug_file in project.file_names
        assert project.fix.file == project.bug_file and project.fix.line == project.bug_line
        assert project.function in dict(project.files)[project.bug_file]


def test_module_names_do_not_shadow_the_standard_library():
    assert not set(MODULES) & set(sys.stdlib_module_names)


def test_generation_is_a_function_of_the_seed():
    a = generate("state_leak", "hard", np.random.default_rng(5))
    b = generate("state_leak", "hard", np.random.default_rng(5))
    c = generate("state_leak", "hard", np.random.default_rng(6))
    assert a == b and a != c
