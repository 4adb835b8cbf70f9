"""``WebEnv``: long-horizon tasks on the web apps shipped with feedbackgym."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from feedbackgym.core import Subgoal
from feedbackgym.envs.web.actions import ActionTable
from feedbackgym.envs.web.base import BrowserEnv, Judgement, WebState
from feedbackgym.envs.web.pages import Site
from feedbackgym.envs.web.snapshot import PageSnapshot
from feedbackgym.envs.web.tasks import TASKS
from feedbackgym.envs.web.tasks.base import resolve

__all__ = ["APPS", "SLOTS", "WebEnv"]

APPS = Path(__file__).with_name("apps")
"""The packaged apps: ``_kit`` (shared), ``shop``, ``forms``, ``admin``."""
SLOTS = 32
"""Element slots of an observation."""
_START = "instance => window.__fgStart(JSON.parse(instance))"


class WebEnv(BrowserEnv):
    """A long-horizon task on a web app shipped with feedbackgym, in real Chromium.

    ## Description

    Three task families, each on its own app (HTML/JS/CSS shipped as package
    data, served to the browser by Playwright routing under a fake
    ``*.feedbackgym.test`` origin: no socket, no traffic off the machine):

    * ``checkout`` (Nordshop): search and filter a catalogue, open the right
      product (by brand, or the cheapest of its name), choose colour, size and
      quantity, add it to the cart, apply a coupon (some have expired: "try X,
      else Y"), give the shipping address, choose a delivery option, pay by
      card, review and place the order.
    * ``form`` (Riverside Sports Club): a four-page membership application,
      pre-filled from a stale profile, with validation on every page (email
      and phone formats, postcodes per country, age, password rules, a
      username that may be taken: the form says so and the goal names a
      fallback), a review page and submission.
    * ``order_admin`` (Backoffice): sign in, find the customer's order (by
      number, or by customer and product), refund some of its lines with a
      reason (confirmed in a dialog), restock or not, add an internal note, set
      the order's status and notify the customer with a template and a note.

    Every reset draws a new instance (catalogue, people, orders, goal) from the
    env's generator and opens a fresh browser context. Success is judged from
    the app's own state (the order placed, the application submitted, the
    refunds, status and notifications recorded), never from the page's text.

    ## Action Space

    ``Discrete(32 * (1 + T + S) + 3)`` over element slot x verb: for each of the
    32 slots ``click <id>``, then ``type <id> "<value>"`` for each of the task's
    ``T`` typing values and ``select <id> "<value>"`` for each of its ``S``
    option values; then ``scroll up``, ``scroll down`` and ``back`` (browser
    history). ``action_meanings`` lists them; :meth:`parse_action` (and
    :meth:`step`) take the text, e.g. ``'type 7 "Berlin"'``. Typing replaces the
    box's text.

    **Invalid targets are no-ops flagged in** ``info["invalid_action"]`` (the
    reason; empty otherwise) and in ``last_result``: an empty slot, typing into
    a non-text element, an option the select lacks, scrolling where the page
    cannot, going back from the first page. An index outside the space, text
    that names no action or a value outside the vocabulary raises
    :class:`~feedbackgym.errors.InvalidAction` naming the valid choices.

    ## Observation Space

    ``obs_mode="vector"``: a ``Dict`` that SB3's ``MultiInputPolicy`` accepts:
    ``elements`` (Box 32 x 55 flattened, one row per slot: present, role
    one-hot (8), states (7), has a value, label shares a word with the goal,
    value is a goal string, position and size (4), hashed label words (16),
    hashed value words (16)), ``goal`` (Box 64, hashed goal words),
    ``goal_values`` (MultiBinary T + S, the vocabulary values the goal uses),
    ``page`` (Box 32, hashed title/path and message words), ``more``
    (MultiBinary 2, elements above/below the view), ``last_result``
    (Discrete 3: none, done, invalid) and ``time`` (Box 1, steps / max_steps).
    ``obs_mode="text"``: a ``Text`` space with an explicit charset: the goal,
    the page's title and path, its messages and the elements in view
    (``[id] role "label" value="..." state``). ``"both"``: the vector ``Dict``
    plus a ``text`` key. No wall-clock values.

    ## Rewards

    Sparse: ``1`` when the task is done, ``0`` otherwise.

    ## Feedback

    ``subgoals`` is the episode's library (a chain, e.g. ``find_product`` ->
    ``add_to_cart`` -> ``apply_coupon`` -> ``shipping_details`` ->
    ``choose_delivery`` -> ``payment_details`` -> ``place_order``), each with a
    description naming the instance's values; ``info["subgoals"]`` says which
    are done. :meth:`expert_action` is an oracle over the app's state that acts
    through the same actions (it scrolls, reacts to validation errors and
    repairs wrong states) and succeeds in every episode; it takes 15-40 steps.

    ## Episode End

    Terminated when the order is placed (``order_placed`` / ``wrong_order``),
    the application submitted (``submitted`` / ``wrong_details``), or the
    customer notified or an irreversible mistake made (``resolved``,
    ``wrong_refund``, ``wrong_order``, ``incomplete``); ``info["outcome"]``
    says which. Truncated at ``max_episode_steps``, or with
    ``info["infra_error"]`` if the browser crashes (the next reset recovers).

    ## Arguments

    * ``task``: ``"checkout"``, ``"form"`` or ``"order_admin"``.
    * ``obs_mode``: ``"vector"``, ``"text"`` or ``"both"``.
    * ``max_steps``: the step count ``time`` is normalised by.
    * ``prefetch``: prepare the next episode's page during this one.

    ## Version History

    * v0: Initial version.
    """

    restartable = True  # __fgStart rebuilds the app's state, history entry and page

    def __init__(
        self,
        task: str = "checkout",
        obs_mode: str = "vector",
        *,
        max_steps: int = 60,
        render_mode: str | None = None,
        prefetch: bool = True,
    ) -> None:
        if task not in TASKS:
            raise ValueError(f"task must be one of {sorted(TASKS)}, got {task!r}")
        self.task = task
        self._task = TASKS[task]()
        app = APPS / self._task.app
        site = Site(
            origin=f"http://{self._task.app}.feedbackgym.test",
            mounts=(("/_kit/", APPS / "_kit"), ("/", app)),
            start_path="/",
            fallback=APPS / "_kit" / "index.html",  # every app's page shell
        )
        table = ActionTable(SLOTS, self._task.type_values, self._task.select_values)
        super().__init__(
            site=site,
            table=table,
            obs_mode=obs_mode,
            max_steps=max_steps,
            render_mode=render_mode,
            prefetch=prefetch,
        )

    def _draw_instance(self) -> dict[str, Any]:
        return self._task.generate(self.np_random)

    def _start_call(self, instance: dict[str, Any]) -> tuple[str, Any]:
        return _START, json.dumps(instance["app"])

    def _goal(self, instance: dict[str, Any], snapshot: PageSnapshot) -> tuple[str, dict[str, str]]:
        goal = instance["goal"]
        return self._task.goal_text(goal), {v: v for v in sorted(self._task.goal_values(goal))}

    def _build_subgoals(self, instance: dict[str, Any], snapshot: PageSnapshot) -> list[Subgoal]:
        return self._task.subgoals(instance["goal"])

    def _expert(self, state: WebState, snapshot: PageSnapshot, goal_fields: dict[str, str]) -> int:
        intent = self._task.expert(state.instance["goal"], state.app, snapshot)
        return resolve(intent, snapshot, self._table)

    def _judge(self, state: WebState) -> Judgement:
        terminated, outcome, success = self._task.judge(state.instance["goal"], state.app)
        return Judgement(terminated, 1.0 if success else 0.0, outcome, success)
