"""``MiniWoBEnv``: MiniWoB++ task pages from the PyPI ``miniwob`` package, on our driver.

The pages (HTML/JS) are served from the installed ``miniwob`` package through
the same routing, page driver, observations and actions as the feedbackgym
apps; only the task's own page code decides the reward. MiniWoB++'s own
Selenium environment is not used.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

from feedbackgym.core import Subgoal
from feedbackgym.envs.web.actions import ActionTable
from feedbackgym.envs.web.base import IN_PROGRESS, BrowserEnv, Judgement, WebState
from feedbackgym.envs.web.miniwob_tasks import MINIWOB_TASKS, succeeded
from feedbackgym.envs.web.pages import DRIVER_JS, Site
from feedbackgym.envs.web.snapshot import PageSnapshot
from feedbackgym.errors import DependencyNotInstalled

__all__ = ["MINIWOB_TASKS", "MiniWoBEnv"]

SLOTS = 32
"""Element slots of a MiniWoB++ observation."""

_HOOKS_JS = Path(__file__).with_name("miniwob_hooks.js")
_START = """seed => {
  Math.seedrandom(seed);
  core.EPISODE_MAX_TIME = 2147483647;
  if (window.jQuery) window.jQuery.fx.off = true;
  core.startEpisodeReal();
}"""
_DRIVER_CONFIG = {
    # The whole body: jQuery UI appends dialogs outside the task's #wrap.
    "exclude": ["query", "reward-display", "sync-task-cover", "click-canvas"],
}


def miniwob_html() -> Path:
    """The ``html`` directory of the installed ``miniwob`` package.

    Raises:
        DependencyNotInstalled: ``miniwob`` is not installed.
    """
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise DependencyNotInstalled.for_extra("miniwob", "web")
    return Path(next(iter(spec.submodule_search_locations))) / "html"


def _images(html: Path, task: str) -> tuple[str, ...]:
    """URL paths of the images a task's page refers to (its episodes create them)."""
    source = (html / "miniwob" / f"{task}.html").read_text(encoding="utf-8")
    found = sorted(set(re.findall(r"\.\./([\w./-]+\.(?:png|gif|jpe?g|svg))", source)))
    return tuple(f"/{path}" for path in found)


def _extract_fields(task: str, utterance: str) -> dict[str, str]:
    """The goal fields of an instruction, by MiniWoB++'s own extractor for ``task``."""
    from miniwob.fields import get_field_extractor

    try:
        return dict(get_field_extractor(task)(utterance))
    except (KeyError, ValueError):
        return {}


def _plain(goal_fields: dict[str, str]) -> dict[str, str]:
    """Goal fields by name: ``{"{target}": "x"}`` -> ``{"target": "x"}``."""
    return {key[1:-1]: value for key, value in goal_fields.items()}


class MiniWoBEnv(BrowserEnv):
    """A MiniWoB++ task page, driven by feedbackgym's Playwright driver.

    ## Description

    One of the MiniWoB++ pages shipped by the PyPI ``miniwob`` package (see
    :data:`MINIWOB_TASKS`): click a button, tick checkboxes, fill in a login
    form, find an email and reply. The instruction is the task's own; a new
    instance is generated from a seed drawn from the env's generator. The page
    runs in headless Chromium, in a fresh browser context per episode, served
    by Playwright routing (nothing leaves the machine).

    ## Action Space

    ``Discrete(32 * per_slot + 2)``: for each of 32 element slots ``click <id>``,
    then ``type <id> {field}`` for each goal field the task types and
    ``select <id> {field}`` for each it selects (``{target}``, ``{username}``,
    ...: the value comes from this episode's instruction); then ``scroll up``
    and ``scroll down``. Text actions may also give the value itself:
    ``type 3 "kLm2"``. Invalid targets are no-ops flagged in
    ``info["invalid_action"]``; an index out of range or unparsable text raises
    :class:`~feedbackgym.errors.InvalidAction`.

    ## Observation Space

    As for :class:`~feedbackgym.envs.web.env.WebEnv`: ``"vector"`` (element table,
    goal, page, fields used by the goal, more above/below, last result, time),
    ``"text"`` (the instruction and the elements in view), or ``"both"``.

    ## Rewards

    The task's own raw reward when it ends (``-1`` to ``1``; partial credit on
    some tasks), read from the page; ``0`` before.

    ## Feedback

    ``subgoals`` is the episode's library, built from the task's own page state
    as the episode starts (see :mod:`~feedbackgym.envs.web.miniwob_tasks`): only
    what is left to do, prerequisites first, e.g. ``type_username`` and
    ``type_password`` -> ``log_in``, or ``open_email`` -> ``start_reply`` ->
    ``write_reply`` -> ``send``; the last subgoal is the task's own success.
    ``info["subgoals"]`` says which are done. :meth:`expert_action` is an
    oracle over the page state that acts through the same actions as agents
    (1-5 steps). ``info["reason"]`` carries the task's reward reason.

    ## Episode End

    Terminated when the task says it is done. Truncated at
    ``max_episode_steps`` (20), or with ``info["infra_error"]`` if the browser fails.

    ## Arguments

    * ``task``: a key of :data:`MINIWOB_TASKS`, e.g. ``"click-button"``.
    * ``obs_mode``: ``"vector"``, ``"text"`` or ``"both"``.
    * ``max_steps``: the step count ``time`` is normalised by.
    * ``prefetch``: prepare the next episode's page during this one.

    ## Version History

    * v0: Initial version (``miniwob`` 1.1 pages); subgoals and an expert added later
      (same dynamics, rewards and spaces).
    """

    restartable = True  # MiniWoB++ pages are built to start episode after episode

    def __init__(
        self,
        task: str = "click-button",
        obs_mode: str = "vector",
        *,
        max_steps: int = 20,
        render_mode: str | None = None,
        prefetch: bool = True,
    ) -> None:
        if task not in MINIWOB_TASKS:
            raise ValueError(f"task must be one of {sorted(MINIWOB_TASKS)}, got {task!r}")
        self.task = task
        self._task = MINIWOB_TASKS[task]
        html = miniwob_html()
        site = Site(
            origin="http://miniwob.feedbackgym.test",
            mounts=(("/", html),),
            start_path=f"/miniwob/{task}.html",
            init_scripts=(DRIVER_JS, _HOOKS_JS),
            preload=_images(html, task),
        )
        table = ActionTable(
            SLOTS,
            [f"{{{f}}}" for f in self._task.type_fields],
            [f"{{{f}}}" for f in self._task.select_fields],
            back=False,
        )
        super().__init__(
            site=site,
            table=table,
            obs_mode=obs_mode,
            max_steps=max_steps,
            render_mode=render_mode,
            driver_config=_DRIVER_CONFIG,
            prefetch=prefetch,
        )

    def _draw_instance(self) -> dict[str, Any]:
        return {"task": self.task, "seed": int(self.np_random.integers(2**31 - 1))}

    def _start_call(self, instance: dict[str, Any]) -> tuple[str, Any]:
        return _START, instance["seed"]

    def _goal(self, instance: dict[str, Any], snapshot: PageSnapshot) -> tuple[str, dict[str, str]]:
        utterance = str(snapshot.app["utterance"])
        fields = _extract_fields(self.task, utterance)
        return utterance, {f"{{{key}}}": value for key, value in fields.items()}

    def _build_subgoals(self, instance: dict[str, Any], snapshot: PageSnapshot) -> list[Subgoal]:
        app = snapshot.app or {}
        fields = _extract_fields(self.task, str(app.get("utterance", "")))
        return self._task.subgoals(fields, app.get("page") or {})

    def _expert(self, state: WebState, snapshot: PageSnapshot, goal_fields: dict[str, str]) -> int:
        page = (state.app or {}).get("page") or {}
        return self._table.index(self._task.expert(_plain(goal_fields), page, snapshot))

    def _judge(self, state: WebState) -> Judgement:
        app = state.app or {}
        if not app.get("done"):
            return IN_PROGRESS
        success = succeeded(state)
        return Judgement(
            True, float(app.get("reward", 0.0)), "success" if success else "failure", success
        )

    def _info(self, episode: Any) -> dict[str, Any]:
        info = super()._info(episode)
        info["reason"] = str((episode.state.app or {}).get("reason", ""))
        return info
