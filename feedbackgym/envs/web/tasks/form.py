"""WebForm: a four-page membership application with validation, then review and submit.

The form starts pre-filled from a stale profile (an old email, a phone number
in a national format the form rejects, a former address, a ticked newsletter
box), so the agent must check every field against the goal. The preferred
username is taken in about half of the instances: the form says so after
"Next", and the goal names the fallback. Subgoals::

    personal_details ─► address_details ─► account_details ─► plan_details ─► submit
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from feedbackgym.core import Subgoal
from feedbackgym.envs.web.snapshot import PageSnapshot
from feedbackgym.envs.web.tasks import data
from feedbackgym.envs.web.tasks.base import Intent, WebTask, fill, route_of

__all__ = ["FormTask"]

PAGES: tuple[str, ...] = ("personal", "address", "account", "plan")
"""The form's pages, in order."""

_PHONES = {
    "Germany": "+49 30 5550123",
    "France": "+33 1 5550142",
    "Austria": "+43 1 5550178",
    "Netherlands": "+31 20 5550110",
    "United Kingdom": "+44 20 5550199",
}
_EXTENSIONS = ("", "1", "2")
_YEARS = (
    "1962",
    "1968",
    "1971",
    "1975",
    "1979",
    "1983",
    "1986",
    "1990",
    "1994",
    "1998",
    "2001",
    "2004",
)
_PASSWORDS = (
    "Sunflower7",
    "Riverbank42",
    "Lighthouse9",
    "Maplewood8",
    "Quicksilver5",
    "Bluebird31",
)
_QUESTIONS = (
    "Name of your first pet",
    "City where you were born",
    "Your favourite teacher",
    "Model of your first car",
)
_ANSWERS = ("Whiskers", "Biscuit", "Lisbon", "Mr Patel", "Beetle", "Nimbus")
_PLANS = ("basic", "plus", "premium")
_BILLING = ("monthly", "yearly")


def _email(first: str, last: str) -> str:
    return f"{first}.{last}@example.org".lower()


def _usernames(first: str, last: str) -> tuple[str, str]:
    return f"{first}.{last[0]}".lower(), f"{first[0]}{last}".lower()


def _phones() -> tuple[str, ...]:
    return tuple(f"{p}{x}" for p in _PHONES.values() for x in _EXTENSIONS)


def _page_right(page: str, goal: dict[str, Any], state: Any) -> bool:
    return ((state.app or {}).get("pages") or {}).get(page) == goal["expected"][page]


def _submitted(goal: dict[str, Any], state: Any) -> bool:
    return (state.app or {}).get("submitted") == goal["expected"]


class FormTask(WebTask):
    """Fill in, correct and submit a multi-page membership application."""

    name = "form"
    app = "forms"
    success_outcome = "submitted"
    type_values = (
        *(first for first, _ in data.PEOPLE),
        *(last for _, last in data.PEOPLE),
        *(_email(first, last) for first, last in data.PEOPLE),
        *_phones(),
        *data.STREETS,
        *(city for city, _, _ in data.ADDRESSES),
        *(postcode for _, postcode, _ in data.ADDRESSES),
        *(name for first, last in data.PEOPLE for name in _usernames(first, last)),
        *_PASSWORDS,
        *_ANSWERS,
    )
    select_values = (
        *(str(day) for day in range(1, 29)),
        *data.MONTHS,
        *_YEARS,
        *data.COUNTRIES,
        *_QUESTIONS,
    )

    def generate(self, rng: np.random.Generator) -> dict[str, Any]:
        """Draws an applicant, a stale profile, taken usernames and the goal."""
        person = data.person(rng)
        first, last = person["first"], person["last"]
        preferred, fallback = _usernames(first, last)
        taken = bool(rng.random() < 0.5)
        city, postcode, country = person["city"], person["postcode"], person["country"]
        phone = _PHONES[country] + data.pick(rng, _EXTENSIONS)
        mailing = None
        if rng.random() < 0.3:
            street = data.pick(rng, [s for s in data.STREETS if s != person["street"]])
            mailing = {"street": street, "city": city, "postcode": postcode}
        password = data.pick(rng, _PASSWORDS)
        expected = {
            "personal": {
                "first": first,
                "last": last,
                "email": _email(first, last),
                "phone": phone,
                "dob": {
                    "day": str(int(rng.integers(1, 29))),
                    "month": data.pick(rng, data.MONTHS),
                    "year": data.pick(rng, _YEARS),
                },
            },
            "address": {
                "street": person["street"],
                "city": city,
                "postcode": postcode,
                "country": country,
                "mailing": mailing,
            },
            "account": {
                "username": fallback if taken else preferred,
                "password": password,
                "question": data.pick(rng, _QUESTIONS),
                "answer": data.pick(rng, _ANSWERS),
            },
            "plan": {
                "plan": data.pick(rng, _PLANS),
                "billing": data.pick(rng, _BILLING),
                "start": data.pick(rng, data.MONTHS),
                "newsletter": bool(rng.random() < 0.5),
            },
        }
        old = data.person(rng)
        prefill = {
            "first-name": first,
            "last-name": last,
            "email": f"{first[0]}{last}@oldmail.example.com".lower(),
            "phone": "0" + phone.split(" ", 1)[1],
            "street": old["street"],
            "city": old["city"],
            "postcode": old["postcode"] if rng.random() < 0.6 else "12",
            "country": old["country"],
            "plan": data.pick(rng, _PLANS),
            "newsletter": True,
        }
        if rng.random() < 0.5:
            dob = expected["personal"]["dob"]
            prefill |= {"dob-day": dob["day"], "dob-month": dob["month"], "dob-year": dob["year"]}
        app = {
            "today": "2025-06-01",
            "years": [str(y) for y in range(1940, 2011)],
            "countries": list(data.COUNTRIES),
            "questions": list(_QUESTIONS),
            "taken": [preferred] if taken else [],
            "prefill": prefill,
            "reference": f"RSC-{int(rng.integers(10000, 99999))}",
        }
        goal = {"expected": expected, "usernames": [preferred, fallback]}
        return {"app": app, "goal": goal}

    def goal_text(self, goal: dict[str, Any]) -> str:
        """The applicant's details in words."""
        e = goal["expected"]
        p, a, c, m = e["personal"], e["address"], e["account"], e["plan"]
        preferred, fallback = goal["usernames"]
        mailing = (
            f" Mail letters to {a['mailing']['street']}, {a['mailing']['postcode']} "
            f"{a['mailing']['city']}."
            if a["mailing"]
            else " Mail goes to the same address."
        )
        return (
            f"Apply for a {m['plan']} membership, billed {m['billing']}, starting in "
            f"{m['start']}, {'with' if m['newsletter'] else 'without'} the newsletter, "
            f"accepting the club rules. Applicant: {p['first']} {p['last']}, email "
            f"{p['email']}, phone {p['phone']}, born {p['dob']['day']} {p['dob']['month']} "
            f"{p['dob']['year']}; address {a['street']}, {a['postcode']} {a['city']}, "
            f"{a['country']}.{mailing} Username {preferred} (if it is taken, {fallback}), "
            f"password {c['password']}, security question '{c['question']}' with the answer "
            f"{c['answer']}. The form is pre-filled from an old profile: check every field."
        )

    def goal_values(self, goal: dict[str, Any]) -> set[str]:
        """Every string the form needs."""
        e = goal["expected"]
        p, a, c = e["personal"], e["address"], e["account"]
        values = {p["first"], p["last"], p["email"], p["phone"], *p["dob"].values()}
        values |= {a["street"], a["city"], a["postcode"], a["country"], *goal["usernames"]}
        values |= {c["password"], c["question"], c["answer"], e["plan"]["start"]}
        if a["mailing"]:
            values |= set(a["mailing"].values())
        return values

    def subgoals(self, goal: dict[str, Any]) -> list[Subgoal]:
        """One subgoal per page (its details accepted as the goal's), then submission."""
        descriptions = {
            "personal": "Get the personal details (name, email twice, phone, birth date) accepted.",
            "address": "Get the address accepted (and the mailing address, if it differs).",
            "account": "Get the account accepted: an available username, password twice, "
            "security question and answer.",
            "plan": "Choose the plan, billing, start month and newsletter; accept the rules.",
        }
        subgoals: list[Subgoal] = []
        for page in PAGES:
            requires = (f"{subgoals[-1].id}",) if subgoals else ()
            subgoals.append(
                Subgoal(
                    f"{page}_details",
                    descriptions[page],
                    partial(_page_right, page, goal),
                    requires,
                )
            )
        subgoals.append(
            Subgoal(
                "submit",
                "Review the application and submit it.",
                partial(_submitted, goal),
                ("plan_details",),
            )
        )
        return subgoals

    def judge(self, goal: dict[str, Any], app: dict[str, Any]) -> tuple[bool, str, bool]:
        """Over once submitted; a success if every detail is the goal's."""
        submitted = (app or {}).get("submitted")
        if not submitted:
            return False, "in_progress", False
        right = submitted == goal["expected"]
        return True, "submitted" if right else "wrong_details", right

    def expert(self, goal: dict[str, Any], app: dict[str, Any], snapshot: PageSnapshot) -> Intent:
        """Corrects the page in view field by field, then moves on; edits wrong pages."""
        page = route_of(snapshot.path).rsplit("/", 1)[-1]
        expected = goal["expected"]
        if page == "review":
            for name in PAGES:
                if app["pages"].get(name) != expected[name]:
                    return Intent("click", f"edit-{name}")
            return Intent("click", "submit")
        if page not in PAGES:
            return Intent("click", "next")
        return fill(snapshot, _wanted(page, goal, app)) or Intent("click", "next")


def _wanted(page: str, goal: dict[str, Any], app: dict[str, Any]) -> list[Intent]:
    """What each field of ``page`` should hold: type/select intents, or ``check`` on/off."""
    e = goal["expected"]
    if page == "personal":
        p = e["personal"]
        return [
            Intent("type", "first-name", p["first"]),
            Intent("type", "last-name", p["last"]),
            Intent("type", "email", p["email"]),
            Intent("type", "email-confirm", p["email"]),
            Intent("type", "phone", p["phone"]),
            Intent("select", "dob-day", p["dob"]["day"]),
            Intent("select", "dob-month", p["dob"]["month"]),
            Intent("select", "dob-year", p["dob"]["year"]),
        ]
    if page == "address":
        a = e["address"]
        wanted = [
            Intent("type", "street", a["street"]),
            Intent("type", "city", a["city"]),
            Intent("type", "postcode", a["postcode"]),
            Intent("select", "country", a["country"]),
            Intent("check", "mailing-differs", "on" if a["mailing"] else "off"),
        ]
        if a["mailing"]:
            wanted += [
                Intent("type", f"mailing-{key}", a["mailing"][key])
                for key in ("street", "city", "postcode")
            ]
        return wanted
    if page == "account":
        c = e["account"]
        preferred, fallback = goal["usernames"]
        username = fallback if preferred in app["rejected"] else preferred
        return [
            Intent("type", "username", username),
            Intent("type", "password", c["password"]),
            Intent("type", "password-confirm", c["password"]),
            Intent("select", "question", c["question"]),
            Intent("type", "answer", c["answer"]),
        ]
    m = e["plan"]
    return [
        Intent("check", f"plan-{m['plan']}", "on"),
        Intent("check", f"billing-{m['billing']}", "on"),
        Intent("select", "start-month", m["start"]),
        Intent("check", "newsletter", "on" if m["newsletter"] else "off"),
        Intent("check", "terms", "on"),
    ]
