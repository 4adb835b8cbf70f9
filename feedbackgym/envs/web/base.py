"""``BrowserEnv``: the Gymnasium machinery shared by every web env.

A subclass says what the browser serves (a :class:`~feedbackgym.envs.web.pages.Site`),
how an episode's instance is drawn from the seed and started in the page, what
the goal is, which subgoals it has and how success is judged from the app's own
state. This class does the rest: spaces, the action table and its parser, the
observation, the browser pages, crash handling and pickling.

Invalid targets are **no-ops flagged in** ``info["invalid_action"]`` (a reason;
empty when the action was carried out): a slot with no element, typing into
something that is not a text box, an option the select does not have, scrolling
where the page cannot scroll, going back from the first page. They cost a step
and touch no browser. An index outside the action space or text that names no
action raises :class:`~feedbackgym.errors.InvalidAction`.

Every episode that acts gets a new browser context. A reset that follows a
reset with no browser action in between restarts the task in the still
untouched page when the subclass is :attr:`~BrowserEnv.restartable` (checkers
reset many times in a row; the page is then exactly what a new context gives).

A browser failure mid-episode (a crash, a killed process, a hang) ends the
episode as truncated with ``info["infra_error"]``; the next ``reset`` relaunches
what is needed. Pickling records the episode's instance and actions; unpickling
replays them in a new page of the process's browser, so the copy continues
exactly where the original was.
"""

from __future__ import annotations

import io
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import partial
from typing import Any, SupportsFloat

import numpy as np
from gymnasium import spaces

from feedbackgym.core import Subgoal, SubgoalTracker
from feedbackgym.envs.base import OBS_MODES, SuiteEnv, text_space
from feedbackgym.envs.web import driver
from feedbackgym.envs.web.actions import ActionTable, WebAction, is_field_ref
from feedbackgym.envs.web.browser import BrowserError
from feedbackgym.envs.web.observation import (
    LAST_RESULTS,
    MAX_TEXT_LENGTH,
    encode_vector,
    normalise,
    render_text,
    vector_space,
)
from feedbackgym.envs.web.pages import VIEWPORT, EpisodePages, Site
from feedbackgym.envs.web.snapshot import PageSnapshot
from feedbackgym.errors import FeedbackGymError, requires_extra

__all__ = ["OBS_MODES", "BrowserEnv", "Judgement", "WebState"]

_DONE, _INVALID = LAST_RESULTS.index("done"), LAST_RESULTS.index("invalid")


@dataclass
class WebState:
    """What subgoal predicates and success checks read.

    Attributes:
        instance: The task instance drawn from the seed (plain JSON data).
        app: The app's own state, as the page reports it after each step.
        path: The page's path.
        step: Steps taken.
    """

    instance: dict[str, Any]
    app: Any = None
    path: str = ""
    step: int = 0


@dataclass(frozen=True)
class Judgement:
    """How the episode stands after a step.

    Attributes:
        terminated: The task is over (done or failed for good).
        reward: The step's reward.
        outcome: ``"in_progress"`` or how it ended, in a word.
        success: The task was done.
    """

    terminated: bool
    reward: float
    outcome: str
    success: bool


IN_PROGRESS = Judgement(False, 0.0, "in_progress", False)


@dataclass
class _Episode:
    state: WebState
    tracker: SubgoalTracker
    snapshot: PageSnapshot
    goal: str
    goal_fields: dict[str, str]
    goal_values: np.ndarray
    judgement: Judgement = IN_PROGRESS
    actions: list[int] = field(default_factory=list)
    last_action: str = ""
    notice: str = ""
    last_result: int = 0
    over: bool = False
    touched: bool = False


class BrowserEnv(SuiteEnv, ABC):
    """Base class of the web envs (see the module docstring for the shared behaviour).

    Args:
        site: What the browser serves.
        table: The action table.
        obs_mode: ``"vector"``, ``"text"`` or ``"both"``.
        max_steps: The step count ``time`` is normalised by.
        render_mode: ``None``, ``"ansi"`` (the text observation) or ``"rgb_array"``
            (a screenshot of the viewport, ``768 x 1024 x 3`` ``uint8``).
        driver_config: Passed to ``driver.js`` (root selector, excluded ids).
        prefetch: Prepare the next episode's page during the current one.
    """

    metadata = {
        "render_modes": ["ansi", "rgb_array"],
        "render_fps": 4,
        "browser": True,  # drives Chromium
        "slow_steps": True,  # tens of ms a step: trainers step them in worker processes
    }
    restartable = False
    """Whether starting a task again in a page no action has touched gives exactly the
    page a fresh context would: then a reset that follows a reset (no action in
    between) keeps that context, and every episode that acted still gets a new one."""

    def __init__(
        self,
        *,
        site: Site,
        table: ActionTable,
        obs_mode: str,
        max_steps: int,
        render_mode: str | None,
        driver_config: dict[str, Any] | None = None,
        prefetch: bool = True,
    ) -> None:
        self._set_common_args(obs_mode=obs_mode, max_steps=max_steps, render_mode=render_mode)
        self.prefetch = prefetch
        self._site = site
        self._table = table
        self._driver_config: dict[str, Any] = {"max": table.slots, "root": None, "exclude": []}
        self._driver_config.update(driver_config or {})
        self.action_space: spaces.Space[Any] = spaces.Discrete(table.n)
        vector = vector_space(table.slots, len(table.type_values) + len(table.select_values))
        self._set_observation_space(vector, text_space(MAX_TEXT_LENGTH))
        self._pages: EpisodePages | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._episode: _Episode | None = None

    # --- what subclasses say ---------------------------------------------------------------

    @abstractmethod
    def _draw_instance(self) -> dict[str, Any]:
        """Draws the episode's task instance from ``self.np_random`` (plain JSON data)."""

    @abstractmethod
    def _start_call(self, instance: dict[str, Any]) -> tuple[str, Any]:
        """The JS function (source) and its argument that start ``instance`` in the page."""

    @abstractmethod
    def _goal(self, instance: dict[str, Any], snapshot: PageSnapshot) -> tuple[str, dict[str, str]]:
        """The goal text and the concrete strings it asks for (vocabulary value -> string)."""

    @abstractmethod
    def _build_subgoals(self, instance: dict[str, Any], snapshot: PageSnapshot) -> list[Subgoal]:
        """The subgoal library of ``instance``, whose page starts as ``snapshot``."""

    @abstractmethod
    def _expert(self, state: WebState, snapshot: PageSnapshot, goal_fields: dict[str, str]) -> int:
        """The oracle's next action index in a running episode."""

    @abstractmethod
    def _judge(self, state: WebState) -> Judgement:
        """Judges the episode from the app's own state."""

    # --- Gymnasium API ---------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Starts a task instance drawn from the seed, in a fresh browser context."""
        super().reset(seed=seed)
        previous = self._episode
        untouched = previous is not None and not previous.touched
        self._episode = self._open_episode(self._draw_instance(), reuse=untouched)
        return self._observation(self._episode), self._info(self._episode)

    def step(self, action: int | str) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Carries out ``action``: an index, or text such as ``'type 7 "Berlin"'``."""
        episode = self._require_episode()
        index = self.parse_action(action)
        if episode.over:
            raise FeedbackGymError(
                f"the episode is over ({episode.judgement.outcome}); call reset()"
            )
        try:
            self._advance(episode, index)
        except BrowserError as error:
            episode.over = True
            episode.judgement = Judgement(False, 0.0, "infra_error", False)
            info = self._info(episode)
            info["infra_error"] = str(error)
            return self._observation(episode), 0.0, False, True, info
        judgement = episode.judgement
        return (
            self._observation(episode),
            judgement.reward,
            judgement.terminated,
            False,
            self._info(episode),
        )

    def render(self) -> str | np.ndarray | None:
        """Renders the episode's page as ``render_mode`` says.

        ``"ansi"``: the text observation. ``"rgb_array"``: a screenshot of the
        browser's viewport as it is now, an ``H x W x 3`` ``uint8`` array
        (:data:`~feedbackgym.envs.web.pages.VIEWPORT`: ``768 x 1024``); black
        when the browser has failed (the episode is then truncated with
        ``info["infra_error"]``). ``None`` before the first reset or without a
        render mode.

        Raises:
            DependencyNotInstalled: ``"rgb_array"`` without Pillow (the ``web`` extra).

        Example:
            >>> import gymnasium as gym, feedbackgym
            >>> env = gym.make("feedbackgym/WebForm-v0", render_mode="rgb_array")
            >>> _ = env.reset(seed=0)  # doctest: +SKIP
            >>> frame = env.render()  # doctest: +SKIP
            >>> frame.shape, frame.dtype  # doctest: +SKIP
            ((768, 1024, 3), dtype('uint8'))
            >>> env.close()
        """
        episode = self._episode
        if self.render_mode is None or episode is None:
            return None
        if self.render_mode == "ansi":
            return self._text(episode)
        pages = self._pages
        try:
            if pages is None or episode.judgement.outcome == "infra_error":
                raise BrowserError("no page to render")
            return _decode_png(pages.run(driver.screenshot))
        except BrowserError:
            return np.zeros((VIEWPORT["height"], VIEWPORT["width"], 3), np.uint8)

    def close(self) -> None:
        """Closes this env's browser contexts and ends its browser lease. Idempotent."""
        self._episode = None
        pages, self._pages = self._pages, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if pages is not None:
            pages.close()

    # --- feedbackgym API -------------------------------------------------------------------

    @property
    def action_meanings(self) -> tuple[str, ...]:
        """The readable meaning of every action index."""
        return self._table.meanings

    @property
    def action_table(self) -> ActionTable:
        """The action table (slots, vocabularies, decoding)."""
        return self._table

    def parse_action(self, action: int | str) -> int:
        """Turns an index or text into a valid action index (see ``## Action Space``)."""
        return self._table.parse(action, self._resolve_text)

    def expert_action(self) -> int:
        """The oracle's next action index (it reads the page's state; never shown to agents).

        It acts through the same action table as agents. Once the episode is
        over it returns 0, which an autoresetting vector env ignores.
        """
        episode = self._require_episode()
        if episode.over:
            return 0
        return self._expert(episode.state, episode.snapshot, episode.goal_fields)

    @property
    def subgoals(self) -> list[Subgoal]:
        """This episode's subgoal library, in prerequisite order."""
        return list(self._require_episode().tracker.subgoals)

    @property
    def state(self) -> WebState:
        """The episode's hidden state (for oracles, reviews and tests)."""
        return self._require_episode().state

    @property
    def snapshot(self) -> PageSnapshot:
        """The page as last observed."""
        return self._require_episode().snapshot

    @property
    def goal(self) -> str:
        """The episode's goal text."""
        return self._require_episode().goal

    @property
    def goal_fields(self) -> dict[str, str]:
        """The vocabulary values this episode's goal uses -> the strings they stand for."""
        return dict(self._require_episode().goal_fields)

    # --- episodes --------------------------------------------------------------------------

    def _open_episode(self, instance: dict[str, Any], *, reuse: bool = False) -> _Episode:
        """Starts ``instance`` in a fresh context, or in the current one if ``reuse``.

        ``reuse`` is for a page that no action has touched since its own start
        (see :attr:`restartable`).
        """
        script, arg = self._start_call(instance)
        snapshot = self._pages_or_open().start(
            partial(driver.start, script=script, arg=arg, cfg=self._driver_config),
            reuse=reuse and self.restartable,
        )
        goal, fields = self._goal(instance, snapshot)
        values = self._table.type_values + self._table.select_values
        state = WebState(instance=instance, app=snapshot.app, path=snapshot.path)
        tracker = SubgoalTracker(self._build_subgoals(instance, snapshot))
        tracker.update(state)
        return _Episode(
            state=state,
            tracker=tracker,
            snapshot=snapshot,
            goal=goal,
            goal_fields=fields,
            goal_values=np.array([v in fields for v in values] or [False], np.int8),
        )

    def _advance(self, episode: _Episode, index: int) -> None:
        action = self._table.decode(index)
        episode.actions.append(index)
        episode.state.step += 1
        episode.last_action = action.meaning
        value = action.value
        if value is not None and is_field_ref(value):
            value = episode.goal_fields.get(value)
        problem = self._problem(episode.snapshot, action, value)
        if problem:
            episode.notice = f"invalid: {problem}"
            episode.last_result = _INVALID
        else:
            episode.touched = True
            episode.snapshot = self._perform(episode.snapshot, action, value)
            episode.notice = ""
            episode.last_result = _DONE
            episode.state.app = episode.snapshot.app
            episode.state.path = episode.snapshot.path
        episode.tracker.update(episode.state)
        episode.judgement = self._judge(episode.state)
        episode.over = episode.judgement.terminated

    def _perform(
        self, snapshot: PageSnapshot, action: WebAction, value: str | None
    ) -> PageSnapshot:
        pages = self._pages
        if pages is None:
            raise BrowserError("the env has been closed")
        cfg = self._driver_config
        if action.verb == "click":
            assert action.slot is not None
            element = snapshot.elements[action.slot]
            return pages.run(partial(driver.click, x=element.x, y=element.y, cfg=cfg))
        return pages.run(partial(driver.act, action=action, value=value, cfg=cfg))

    @staticmethod
    def _problem(snapshot: PageSnapshot, action: WebAction, value: str | None) -> str:
        """Why ``action`` cannot be carried out on ``snapshot`` ("" if it can)."""
        if action.verb == "scroll":
            up = action.direction == "up"
            possible = snapshot.can_scroll_up if up else snapshot.can_scroll_down
            return "" if possible else f"the page cannot scroll {action.direction}"
        if action.verb == "back":
            return "" if snapshot.can_go_back else "there is no earlier page to go back to"
        assert action.slot is not None
        count = len(snapshot.elements)
        if action.slot >= count:
            shown = f"ids 0..{count - 1}" if count else "none"
            return f"no element {action.slot} in view ({shown})"
        element = snapshot.elements[action.slot]
        if action.verb == "click":
            return ""
        if value is None:
            return f"the goal has no {action.value}"
        if element.disabled:
            return f"element {element.id} is disabled"
        if action.verb == "type":
            return "" if element.role == "textbox" else f"element {element.id} is a {element.role}"
        if element.role != "select":
            return f"element {element.id} is a {element.role}, not a select"
        wanted = value.casefold()
        if any(option.casefold() == wanted for option in element.options):
            return ""
        return f"element {element.id} has no option {value!r}"

    def _resolve_text(self, value: str) -> str | None:
        """Maps a typed string to a goal-field vocabulary value, if it is one."""
        episode = self._episode
        if episode is None:
            return None
        wanted = normalise(value).casefold()
        for key, text in episode.goal_fields.items():
            if is_field_ref(key) and normalise(text).casefold() == wanted:
                return key
        return None

    def _pages_or_open(self) -> EpisodePages:
        if self._pages is None:
            self._pages = EpisodePages(self._site, prefetch=self.prefetch)
            self._finalizer = weakref.finalize(self, self._pages.close_nowait)
        return self._pages

    def _require_episode(self) -> _Episode:
        if self._episode is None:
            raise FeedbackGymError("no episode is running; call reset() first")
        return self._episode

    # --- observation and info --------------------------------------------------------------

    def _text(self, episode: _Episode) -> str:
        return render_text(
            episode.goal,
            episode.snapshot,
            step=episode.state.step,
            max_steps=self.max_steps,
            last_action=episode.last_action,
            notice=episode.notice,
        )

    def _observation(self, episode: _Episode) -> Any:
        if self.obs_mode == "text":
            return self._text(episode)
        obs: dict[str, Any] = encode_vector(
            episode.goal,
            tuple(episode.goal_fields.values()),
            episode.goal_values,
            episode.snapshot,
            slots=self._table.slots,
            step=episode.state.step,
            max_steps=self.max_steps,
            last_result=episode.last_result,
        )
        if self.obs_mode == "both":
            obs["text"] = self._text(episode)
        return obs

    def _info(self, episode: _Episode) -> dict[str, Any]:
        judgement = episode.judgement
        return {
            "subgoals": dict(episode.tracker.done),
            "is_success": judgement.success,
            "outcome": judgement.outcome,
            "action": episode.last_action,
            "invalid_action": episode.notice.removeprefix("invalid: "),
            "path": episode.snapshot.path,
        }

    # --- pickling --------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        episode = state.pop("_episode")
        state["_pages"] = None
        state["_finalizer"] = None
        state["_replay"] = None if episode is None else (episode.state.instance, episode.actions)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        replay = state.pop("_replay")
        self.__dict__.update(state)
        self._episode = None
        if replay is not None:
            instance, actions = replay
            episode = self._open_episode(instance)
            for index in actions:
                if episode.over:
                    break
                self._advance(episode, index)
            self._episode = episode


def _decode_png(png: bytes) -> np.ndarray:
    """The RGB pixels of a PNG, ``H x W x 3`` ``uint8``."""
    with requires_extra("web", "pillow"):
        from PIL import Image
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGB"), dtype=np.uint8)
