"""``CodeFixEnv``: fix a seeded bug in a small Python project, running its tests in a sandbox."""

from __future__ import annotations

from typing import Any, SupportsFloat

import numpy as np
from gymnasium import spaces

from feedbackgym.core import SubgoalTracker
from feedbackgym.envs.base import OBS_MODES, TrackedEnv, text_space, validation_seed_blocks
from feedbackgym.envs.code.actions import (
    EDIT,
    KINDS,
    N_ACTIONS,
    REVERT,
    RUN_ONE,
    VIEW,
    WINDOWS,
    FreeEdit,
    kind_of,
    meanings,
    parse_action,
    window_of,
)
from feedbackgym.envs.code.expert import expert_action
from feedbackgym.envs.code.families import FAMILIES
from feedbackgym.envs.code.generator import DIFFICULTIES, MAX_FILES, MAX_TESTS, N_EDITS, generate
from feedbackgym.envs.code.sandbox import (
    FLAGS,
    Limits,
    RunReport,
    RunRequest,
    Sandbox,
    make_sandbox,
    resolve_sandbox,
)
from feedbackgym.envs.code.state import CodeState
from feedbackgym.envs.code.subgoals import build_subgoals
from feedbackgym.envs.code.text import (
    MAX_TEXT_LENGTH,
    render_listing,
    render_report,
    render_text,
    render_window,
)
from feedbackgym.errors import FeedbackGymError, SandboxError

__all__ = ["OBS_MODES", "RESULTS", "VALIDATION_SEEDS", "CodeFixEnv"]

VALIDATION_SEEDS: dict[str, tuple[int, ...]] = validation_seed_blocks(DIFFICULTIES)
"""100 held-out seeds per difficulty."""

RESULTS: tuple[str, ...] = ("none", "info", "pass", "fail", "edited", "no_effect", "missing")
"""What an action came to, in the order of the ``last_result`` observation."""

_CELLS = MAX_FILES * WINDOWS
_FAILED = ("fail", "error")
_STATUSES = ("pass", "fail", "error", "not_run")


class CodeFixEnv(TrackedEnv[CodeState]):
    """Fix a seeded bug in a small Python project whose tests run in a sandbox.

    ## Description

    Each episode is a generated project of 2-6 files (source modules and test
    files, plus hidden tests the agent never sees) with one bug from one of ten
    families: off-by-one, wrong comparison, missing edge case, wrong default,
    mutable default argument, wrong exception, swapped arguments, state
    leaking between calls, wrong operator, early return. Names and values are
    drawn at random, so instances rarely repeat (at least 200 distinct ones
    per family). ``easy`` has one module and its tests, ``medium`` two modules,
    ``hard`` three, with helpers spread across them. Tests run for real, in a
    Docker container or a bubblewrap sandbox, under time, memory, process and
    output limits.

    ## Action Space

    ``Discrete(46)``: list files; run all tests; run test *i* (10 slots); view
    file *f* lines in windows of 12 (6 files x 4 windows); apply candidate edit
    *k* (8 per episode: the fix, three wrong fixes of the faulty line, four
    decoys elsewhere, shuffled); revert every edit; submit. ``action_meanings``
    says what each index means in this episode. :meth:`parse_action` and
    :meth:`step` also take text: a meaning, ``run test NAME``, ``view FILE
    [LINE]``, ``apply edit K``, or the free-form ``edit FILE LINE "new line"``
    (a JSON string literal) that replaces one line with any code. A bad index,
    text or edit raises :class:`~feedbackgym.errors.InvalidAction` naming the
    valid choices.

    ## Observation Space

    ``obs_mode="vector"``: a ``Dict`` that SB3's ``MultiInputPolicy`` accepts:
    ``files``, ``modified`` (MultiBinary 6), ``tests``, ``passed``, ``failed``,
    ``ever_failed`` (MultiBinary 10, per test slot, on the code as it is now
    except ``ever_failed``), ``viewed`` and ``traced`` (MultiBinary 24, windows
    viewed, and windows in the last failures' tracebacks), ``edit_windows``
    (MultiBinary 8x24, the window each candidate edits), ``applied`` and
    ``tried`` (MultiBinary 8), ``last_action`` (Discrete 9), ``last_result``
    (Discrete 7), ``flags`` (MultiBinary 6, the sandbox flags of the last run)
    and ``time`` (Box 1). ``"text"``: a ``Text`` space with an explicit
    charset: the goal, the test results on the code now, the candidate edits
    and the last action's output (file listing, numbered lines, test results
    with tracebacks). ``"both"``: the vector ``Dict`` plus a ``text`` key. No
    wall-clock values.

    ## Rewards

    Sparse: +1 when the episode is submitted with every test passing, hidden
    tests included (they catch edits that only fit the visible tests); 0
    otherwise.

    ## Feedback

    ``subgoals`` is the library ``find_failing_test`` → ``locate_fault`` →
    ``fix_failing_test`` → ``all_tests_pass`` → ``submit``; ``info["subgoals"]``
    says which are done. :meth:`expert_action` is the oracle (six steps).
    ``info["harmful"]`` marks a wrong or decoy edit and a failed submission.

    ## Episode End

    Terminated on submit (``info["outcome"]`` is ``fixed`` or
    ``tests_failing``). Truncated when the sandbox fails (``infra_error``,
    with ``info["infra_error"]``; the next reset starts a fresh sandbox) and at
    ``max_episode_steps`` (40) by the registered ``TimeLimit``. Hostile code
    never ends an episode: its run ends with flags in ``info["sandbox"]``
    (``timeout``, ``output_limit``, ``killed``, ``memory_error``,
    ``leftover_processes``, ``sandbox_lost``) and the episode goes on.

    ## Arguments

    * ``difficulty``: ``"easy"``, ``"medium"`` or ``"hard"``.
    * ``obs_mode``: ``"vector"``, ``"text"`` or ``"both"``.
    * ``sandbox``: ``"docker"``, ``"local"`` (bubblewrap) or ``"auto"``
      (``FEEDBACKGYM_SANDBOX`` if set, else Docker when an engine answers and
      the image is built, else local).
    * ``family``: restrict episodes to one bug family (default: all).
    * ``max_steps``: the step count that ``time`` is normalised by.
    * ``run_timeout``: wall-clock seconds allowed for one test run.

    ## Version History

    * v0: Initial version.

    Example:
        >>> import gymnasium as gym, feedbackgym
        >>> env = gym.make("feedbackgym/CodeFix-v0", difficulty="easy", sandbox="local")
        >>> obs, info = env.reset(seed=0)
        >>> env.unwrapped.action_meanings[0], sorted(info["subgoals"])[0]
        ('list files', 'all_tests_pass')
        >>> env.close()

    Change logs:
     * v0.1.0 - Initially added
    """

    metadata = {**TrackedEnv.metadata, "slow_steps": True}  # tests run in a sandbox

    def __init__(
        self,
        difficulty: str = "medium",
        obs_mode: str = "vector",
        *,
        sandbox: str = "auto",
        family: str | None = None,
        max_steps: int = 40,
        run_timeout: float = 10.0,
        render_mode: str | None = None,
    ) -> None:
        if difficulty not in DIFFICULTIES:
            raise ValueError(f"difficulty must be one of {DIFFICULTIES}, got {difficulty!r}")
        if family is not None and family not in FAMILIES:
            raise ValueError(f"family must be None or one of {tuple(FAMILIES)}, got {family!r}")
        if run_timeout <= 0:
            raise ValueError(f"run_timeout must be positive, got {run_timeout}")
        self._set_common_args(obs_mode=obs_mode, max_steps=max_steps, render_mode=render_mode)
        self.difficulty = difficulty
        self.family = family
        self.run_timeout = float(run_timeout)
        self.sandbox_kind = resolve_sandbox(sandbox)
        self._sandbox: Sandbox | None = make_sandbox(self.sandbox_kind)
        self.action_space: spaces.Space[Any] = spaces.Discrete(N_ACTIONS)
        vector = spaces.Dict(
            {
                "files": spaces.MultiBinary(MAX_FILES),
                "modified": spaces.MultiBinary(MAX_FILES),
                "tests": spaces.MultiBinary(MAX_TESTS),
                "passed": spaces.MultiBinary(MAX_TESTS),
                "failed": spaces.MultiBinary(MAX_TESTS),
                "ever_failed": spaces.MultiBinary(MAX_TESTS),
                "viewed": spaces.MultiBinary(_CELLS),
                "traced": spaces.MultiBinary(_CELLS),
                "edit_windows": spaces.MultiBinary(N_EDITS * _CELLS),
                "applied": spaces.MultiBinary(N_EDITS),
                "tried": spaces.MultiBinary(N_EDITS),
                "last_action": spaces.Discrete(len(KINDS)),
                "last_result": spaces.Discrete(len(RESULTS)),
                "flags": spaces.MultiBinary(len(FLAGS)),
                "time": spaces.Box(0.0, 1.0, (1,), np.float32),
            }
        )
        self._set_observation_space(vector, text_space(MAX_TEXT_LENGTH))

    # --- Gymnasium API ---------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Generates a new project (seeded by ``seed``) and readies the sandbox."""
        super().reset(seed=seed)
        family = self.family or list(FAMILIES)[int(self.np_random.integers(len(FAMILIES)))]
        self._state = CodeState(generate(family, self.difficulty, self.np_random))
        self._tracker = SubgoalTracker(build_subgoals(self._state))
        self._box().reset()
        return self._observation(), self._info(self._tracker.update(self._state))

    def step(
        self, action: int | str | FreeEdit
    ) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Carries out ``action`` (an index, text such as ``"run all tests"``, or a FreeEdit)."""
        state, tracker = self._require_episode()
        if state.outcome != "in_progress":
            raise FeedbackGymError(f"the episode is over ({state.outcome}); call reset()")
        parsed = self.parse_action(action)
        state.step += 1
        state.last_report = None
        try:
            harmful = self._apply(state, parsed)
        except SandboxError as error:
            state.outcome, state.last_result = "infra_error", "fail"
            state.last_output = f"The sandbox failed ({error}); the episode is cut short."
            harmful = False
        progress = tracker.update(state)
        reward = 1.0 if state.outcome == "fixed" else 0.0
        terminated = state.outcome in ("fixed", "tests_failing")
        truncated = state.outcome == "infra_error"
        return self._observation(), reward, terminated, truncated, self._info(progress, harmful)

    def render(self) -> str | None:
        """Returns the console text when ``render_mode="ansi"``."""
        if self.render_mode != "ansi" or self._state is None:
            return None
        return render_text(self._state, self.max_steps)

    def close(self) -> None:
        """Releases the sandbox (a Docker container goes back to the warm pool). Idempotent."""
        if self._sandbox is not None:
            self._sandbox.close()
        self._sandbox = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_sandbox"] = None  # a copy starts its own sandbox when it first needs one
        return state

    # --- feedbackgym API -------------------------------------------------------------------

    @property
    def action_meanings(self) -> tuple[str, ...]:
        """The readable meaning of every action index in this episode."""
        return meanings(self._state.project if self._state else None)

    def parse_action(self, action: int | str | FreeEdit) -> int | FreeEdit:
        """Turns an index or text into an action index, or a :class:`FreeEdit` (see above)."""
        state = self._state
        lines = {name: len(code) for name, code in state.code.items()} if state else {}
        return parse_action(action, state.project if state else None, lines)

    @property
    def validation_seeds(self) -> tuple[int, ...]:
        """This difficulty's held-out seeds (:data:`feedbackgym.envs.code.VALIDATION_SEEDS`)."""
        return VALIDATION_SEEDS[self.difficulty]

    @property
    def sandbox_name(self) -> str:
        """The Docker container in use, else the backend's name (``""`` once closed)."""
        box = self._sandbox
        if box is None:
            return ""
        return str(getattr(box, "container_name", None) or box.kind)

    def expert_action(self) -> int:
        """The oracle's next action: it knows the bug and the fix."""
        return expert_action(self._require_episode()[0])

    # --- actions ---------------------------------------------------------------------------

    def _apply(self, state: CodeState, action: int | FreeEdit) -> bool:
        """Carries out one action; returns whether it was harmful."""
        if isinstance(action, FreeEdit):
            state.last_kind, state.last_action = "free_edit", action.command
            self._write(state, action.file, action.line, action.text)
            return False
        kind = kind_of(action)
        state.last_kind, state.last_action = kind, self.action_meanings[action]
        project = state.project
        if kind == "list":
            state.last_result, state.last_output = "info", render_listing(state)
        elif kind == "run_all":
            self._run(state, list(project.tests))
        elif kind == "run_test":
            slot = action - RUN_ONE
            if slot < len(project.tests):
                self._run(state, [project.tests[slot]])
            else:
                self._missing(state, f"there is no test #{slot}")
        elif kind == "view":
            self._view(state, *divmod(action - VIEW, WINDOWS))
        elif kind == "edit":
            return self._edit(state, action - EDIT)
        elif action == REVERT:
            changed = state.files() != dict(project.files)
            state.revert()
            state.last_result = "edited" if changed else "no_effect"
            state.last_output = "Reverted every edit." if changed else "Nothing to revert."
        else:
            report = self._run(state, [*project.tests, *project.hidden_tests], hidden=True)
            state.outcome = "fixed" if _all_pass(report) else "tests_failing"
            return state.outcome != "fixed"
        return False

    def _missing(self, state: CodeState, what: str) -> None:
        state.last_result, state.last_output = "missing", f"Nothing there: {what}."

    def _view(self, state: CodeState, file_slot: int, window: int) -> None:
        names = state.project.file_names
        if file_slot >= len(names):
            self._missing(state, f"there is no file #{file_slot}")
        elif window > window_of(max(1, len(state.code[names[file_slot]]))):
            self._missing(
                state, f"{names[file_slot]} has only {len(state.code[names[file_slot]])} lines"
            )
        else:
            state.viewed.add((names[file_slot], window))
            state.last_result = "info"
            state.last_output = render_window(state.code[names[file_slot]], window)

    def _edit(self, state: CodeState, k: int) -> bool:
        edits = state.project.edits
        if k >= len(edits):
            self._missing(state, f"there is no candidate edit #{k}")
            return False
        edit = edits[k]
        state.tried.add(k)
        return self._write(state, edit.file, edit.line, edit.text) and edit.role != "fix"

    def _write(self, state: CodeState, file: str, line: int, text: str) -> bool:
        """Replaces a line; returns whether the code changed."""
        lines = state.code[file]
        if lines[line - 1] == text:
            state.last_result = "no_effect"
            state.last_output = f"{file} line {line} already reads that."
            return False
        lines[line - 1] = text
        state.last_result = "edited"
        state.last_output = f"{file} line {line} now reads:\n{line:3d} | {text}"
        return True

    def _run(
        self, state: CodeState, tests: list[tuple[str, str]], *, hidden: bool = False
    ) -> RunReport:
        files = state.files()
        if hidden:
            files |= dict(state.project.hidden_files)
        grouped: dict[str, list[str]] = {}
        for file, name in tests:
            grouped.setdefault(file, []).append(name)
        request = RunRequest(files, list(grouped.items()), Limits(timeout=self.run_timeout))
        report = self._box().run(request)
        state.record(report)
        state.last_result = "pass" if _all_pass(report) else "fail"
        note = ["Submitted; the hidden tests ran too."] if hidden else []
        state.last_output = render_report(report, note)
        return report

    # --- helpers ---------------------------------------------------------------------------

    def _box(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = make_sandbox(self.sandbox_kind)
        return self._sandbox

    def _observation(self) -> Any:
        state = self._state
        assert state is not None
        if self.obs_mode == "text":
            return render_text(state, self.max_steps)
        obs = _vector(state, self.max_steps)
        if self.obs_mode == "both":
            obs["text"] = render_text(state, self.max_steps)
        return obs

    def _info(self, progress: dict[str, bool], harmful: bool = False) -> dict[str, Any]:
        state = self._state
        assert state is not None
        report = state.last_report
        return {
            "subgoals": progress,
            "outcome": state.outcome,
            "is_success": state.outcome == "fixed",
            "action": state.last_action,
            "harmful": harmful,
            "infra_error": state.outcome == "infra_error",
            "sandbox": report.flag_dict() if report else dict.fromkeys(FLAGS, False),
            "tests": {
                status: sum(r.status == status for r in report.results) if report else 0
                for status in _STATUSES
            },
        }


def _all_pass(report: RunReport) -> bool:
    return all(result.status == "pass" for result in report.results)


def _bits(size: int, on: Any) -> np.ndarray:
    bits = np.zeros(size, np.int8)
    for index in on:
        bits[index] = 1
    return bits


def _vector(state: CodeState, max_steps: int) -> dict[str, Any]:
    project = state.project
    files = project.file_names
    tests = [name for _, name in project.tests]
    now = state.status_now()
    original = dict(project.files)
    ever = {name for known in state.results.values() for name, s in known.items() if s in _FAILED}

    def cell(file: str, window: int) -> int:
        return files.index(file) * WINDOWS + window

    report = state.last_report
    return {
        "files": _bits(MAX_FILES, range(len(files))),
        "modified": _bits(
            MAX_FILES,
            (i for i, f in enumerate(files) if "\n".join(state.code[f]) + "\n" != original[f]),
        ),
        "tests": _bits(MAX_TESTS, range(len(tests))),
        "passed": _bits(MAX_TESTS, (i for i, t in enumerate(tests) if now.get(t) == "pass")),
        "failed": _bits(MAX_TESTS, (i for i, t in enumerate(tests) if now.get(t) in _FAILED)),
        "ever_failed": _bits(MAX_TESTS, (i for i, t in enumerate(tests) if t in ever)),
        "viewed": _bits(_CELLS, (cell(f, w) for f, w in state.viewed)),
        "traced": _bits(_CELLS, (cell(f, w) for f, w in state.traced)),
        "edit_windows": _bits(
            N_EDITS * _CELLS,
            (k * _CELLS + cell(e.file, window_of(e.line)) for k, e in enumerate(project.edits)),
        ),
        "applied": _bits(
            N_EDITS,
            (k for k, e in enumerate(project.edits) if state.code[e.file][e.line - 1] == e.text),
        ),
        "tried": _bits(N_EDITS, state.tried),
        "last_action": KINDS.index(state.last_kind),
        "last_result": RESULTS.index(state.last_result),
        "flags": _bits(len(FLAGS), (FLAGS.index(f) for f in report.flags) if report else ()),
        "time": np.array([min(1.0, state.step / max_steps)], np.float32),
    }
