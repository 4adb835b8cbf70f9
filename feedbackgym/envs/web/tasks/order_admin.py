"""WebOrderAdmin: handle a customer complaint in the Backoffice app.

Sign in, find the order (by number, or by customer and product among the
customer's orders), refund some of its lines with a reason (confirmed in a
dialog), restock or not, add an internal note, set the status and notify the
customer. A refund or status change on another order, or a wrong refund, is
irreversible and ends the episode; so does notifying the customer, which
succeeds only when everything else is already right. Subgoals::

    sign_in ─► open_order ─► refund ─► internal_note ─► update_status ─► notify
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from feedbackgym.core import Subgoal
from feedbackgym.envs.web.snapshot import PageSnapshot
from feedbackgym.envs.web.tasks import data
from feedbackgym.envs.web.tasks.base import Intent, WebTask, fill, route_of

__all__ = ["OrderAdminTask"]

_STAFF = (("jsmith", "Ledger2025"), ("mgarcia", "Counter88"), ("tnguyen", "Parcel77"))
_ORDER_IDS = tuple(str(10401 + i) for i in range(40))
_ITEMS = (
    ("Blue mug", 1200),
    ("Teapot", 3400),
    ("Tea towel", 800),
    ("Espresso cups", 2200),
    ("Cake stand", 4500),
    ("Butter dish", 1900),
    ("Salad bowl", 2800),
    ("Milk jug", 1500),
)
_STATUSES = ("processing", "shipped", "delivered", "partially refunded", "refunded", "cancelled")
_REASONS = ("Damaged in transit", "Wrong item sent", "Arrived late", "Changed mind")
_TEMPLATES = ("Refund issued", "Order shipped", "Apology", "Delay notice")
_NOTES = (
    "Refund approved by phone",
    "Customer sent photos",
    "Courier claim opened",
    "Second complaint this year",
    "Replacement declined",
    "Goodwill refund",
)
_MESSAGES = (
    "Sorry for the trouble",
    "We have refunded you",
    "Thank you for your patience",
    "Apologies for the mix-up",
    "Your refund is on its way",
    "We hope to see you again",
)


def _order(
    rng: np.random.Generator, order_id: str, customer: tuple[str, str], month: int
) -> dict[str, Any]:
    first, last = customer
    items = data.sample(rng, _ITEMS, int(rng.integers(1, 5)))
    return {
        "id": order_id,
        "customer": f"{first} {last}",
        "email": f"{first}.{last}@example.org".lower(),
        "date": f"2025-{month:02d}-{int(rng.integers(1, 29)):02d}",
        "status": data.pick(rng, ("shipped", "delivered", "delivered")),
        "lines": [{"name": n, "price": p, "qty": int(rng.integers(1, 5))} for n, p in items],
    }


def _app(state: Any) -> dict[str, Any]:
    return state.app or {}


def _record(goal: dict[str, Any], state: Any) -> dict[str, Any]:
    return _app(state).get("orders", {}).get(goal["order"], {})


def _signed_in(state: Any) -> bool:
    return bool(_app(state).get("signedIn"))


def _opened(goal: dict[str, Any], state: Any) -> bool:
    return goal["order"] in _app(state).get("viewed", ())


def _refunded(goal: dict[str, Any], state: Any) -> bool:
    return _record(goal, state).get("refunds") == [_expected_refund(goal)]


def _noted(goal: dict[str, Any], state: Any) -> bool:
    return _record(goal, state).get("notes") == [goal["note"]]


def _status_set(goal: dict[str, Any], state: Any) -> bool:
    return _record(goal, state).get("status") == goal["status"]


def _notified(goal: dict[str, Any], state: Any) -> bool:
    return _record(goal, state).get("notifications") == [_expected_notification(goal)]


def _expected_refund(goal: dict[str, Any]) -> dict[str, Any]:
    return {
        "lines": goal["refund"],
        "reason": goal["reason"],
        "restock": goal["restock"],
        "amount": goal["amount"],
    }


def _expected_notification(goal: dict[str, Any]) -> dict[str, str]:
    return {"template": goal["template"], "note": goal["message"]}


class OrderAdminTask(WebTask):
    """Refund part of an order, note it, set its status and notify the customer."""

    name = "order_admin"
    app = "admin"
    success_outcome = "resolved"
    type_values = (
        *(user for user, _ in _STAFF),
        *(password for _, password in _STAFF),
        *_ORDER_IDS,
        *(f"{first} {last}" for first, last in data.PEOPLE),
        *_NOTES,
        *_MESSAGES,
    )
    select_values = ("0", "1", "2", "3", "4", *_REASONS, *_STATUSES, *_TEMPLATES)

    def generate(self, rng: np.random.Generator) -> dict[str, Any]:
        """Draws 24 orders from 10 customers and a complaint about one of them."""
        ids = sorted(data.sample(rng, _ORDER_IDS, 24), reverse=True)
        orders = [
            _order(rng, order_id, data.pick(rng, data.PEOPLE), 6 - i * 5 // 24)
            for i, order_id in enumerate(ids)
        ]
        target = data.pick(rng, orders)
        target["status"] = "delivered"
        others = [o for o in orders if o["customer"] == target["customer"] and o is not target]
        elsewhere = {line["name"] for o in others for line in o["lines"]}
        unique = [line["name"] for line in target["lines"] if line["name"] not in elsewhere]
        by_customer = bool(others) and bool(unique) and bool(rng.random() < 0.5)
        chosen = sorted(
            int(i)
            for i in rng.choice(
                len(target["lines"]), size=min(2, len(target["lines"])), replace=False
            )
        )[: int(rng.integers(1, 3))]
        refund = {str(i): int(rng.integers(1, target["lines"][i]["qty"] + 1)) for i in chosen}
        everything = len(refund) == len(target["lines"]) and all(
            refund[str(i)] == line["qty"] for i, line in enumerate(target["lines"])
        )
        user, password = data.pick(rng, _STAFF)
        goal = {
            "user": user,
            "password": password,
            "order": target["id"],
            "customer": target["customer"],
            "by_customer": by_customer,
            "product": data.pick(rng, unique) if by_customer else "",
            "lines": len(target["lines"]),
            "refund": refund,
            "refund_names": {i: target["lines"][int(i)]["name"] for i in refund},
            "amount": sum(target["lines"][int(i)]["price"] * n for i, n in refund.items()),
            "reason": data.pick(rng, _REASONS),
            "restock": bool(rng.random() < 0.5),
            "note": data.pick(rng, _NOTES),
            "status": "refunded" if everything else "partially refunded",
            "template": data.pick(rng, ("Refund issued", "Apology")),
            "message": data.pick(rng, _MESSAGES),
        }
        app = {
            "staff": {"username": user, "password": password},
            "orders": orders,
            "statuses": list(_STATUSES),
            "reasons": list(_REASONS),
            "templates": list(_TEMPLATES),
            "pageSize": 6,
        }
        return {"app": app, "goal": goal}

    def goal_text(self, goal: dict[str, Any]) -> str:
        """The complaint and what to do about it, in words."""
        which = (
            f"{goal['customer']}'s order that contains a {goal['product']}"
            if goal["by_customer"]
            else f"order #{goal['order']} ({goal['customer']})"
        )
        items = " and ".join(f"{n} x {goal['refund_names'][i]}" for i, n in goal["refund"].items())
        restock = "put them back in stock" if goal["restock"] else "do not restock them"
        return (
            f"Sign in as {goal['user']} with the password {goal['password']}. In {which}, "
            f"refund {items} with the reason '{goal['reason']}' and {restock}. Add the internal "
            f"note '{goal['note']}', set the order status to '{goal['status']}', then notify "
            f"the customer with the '{goal['template']}' template and the note "
            f"'{goal['message']}'."
        )

    def goal_values(self, goal: dict[str, Any]) -> set[str]:
        """Credentials, the search text, quantities, reason, note, status, template, message."""
        search = goal["customer"] if goal["by_customer"] else goal["order"]
        return {
            goal["user"],
            goal["password"],
            search,
            *(str(n) for n in goal["refund"].values()),
            goal["reason"],
            goal["note"],
            goal["status"],
            goal["template"],
            goal["message"],
        }

    def subgoals(self, goal: dict[str, Any]) -> list[Subgoal]:
        """sign_in -> open_order -> refund -> internal_note -> update_status -> notify."""
        items = ", ".join(f"{n} x {goal['refund_names'][i]}" for i, n in goal["refund"].items())
        steps: list[tuple[str, str, Callable[[Any], bool]]] = [
            ("sign_in", f"Sign in as {goal['user']}.", _signed_in),
            ("open_order", f"Open order #{goal['order']}.", partial(_opened, goal)),
            ("refund", f"Refund {items} ({goal['reason']}), confirmed.", partial(_refunded, goal)),
            ("internal_note", f"Save the internal note '{goal['note']}'.", partial(_noted, goal)),
            ("update_status", f"Set the status to '{goal['status']}'.", partial(_status_set, goal)),
            ("notify", f"Send the '{goal['template']}' notification.", partial(_notified, goal)),
        ]
        subgoals: list[Subgoal] = []
        for sid, description, predicate in steps:
            requires = (subgoals[-1].id,) if subgoals else ()
            subgoals.append(Subgoal(sid, description, predicate, requires))
        return subgoals

    def judge(self, goal: dict[str, Any], app: dict[str, Any]) -> tuple[bool, str, bool]:
        """Over on a notification or an irreversible mistake; a success if all is right."""
        changed = (app or {}).get("orders", {})
        if any(order_id != goal["order"] for order_id in changed):
            return True, "wrong_order", False
        record = changed.get(goal["order"])
        if record is None:
            return False, "in_progress", False
        if record["refunds"] and record["refunds"] != [_expected_refund(goal)]:
            return True, "wrong_refund", False
        if not record["notifications"]:
            return False, "in_progress", False
        right = (
            record["refunds"] == [_expected_refund(goal)]
            and record["notes"] == [goal["note"]]
            and record["status"] == goal["status"]
            and record["notifications"] == [_expected_notification(goal)]
        )
        return True, "resolved" if right else "incomplete", right

    def expert(self, goal: dict[str, Any], app: dict[str, Any], snapshot: PageSnapshot) -> Intent:
        """Signs in, opens the order, then refunds, notes, sets the status and notifies."""
        route = route_of(snapshot.path)
        if not app["signedIn"]:
            credentials = [
                Intent("type", "username", goal["user"]),
                Intent("type", "password", goal["password"]),
            ]
            return fill(snapshot, credentials) or Intent("click", "sign-in")
        if route != f"/orders/{goal['order']}":
            return _find_order(goal, route, snapshot)
        record = app["orders"].get(goal["order"], {})
        if not record.get("refunds"):
            if app["dialog"]:
                return Intent("click", "confirm-refund")
            refund = [
                Intent("select", f"refund-qty-{i}", str(goal["refund"].get(str(i), 0)))
                for i in range(goal["lines"])
            ]
            refund.append(Intent("select", "refund-reason", goal["reason"]))
            refund.append(Intent("check", "restock", "on" if goal["restock"] else "off"))
            return fill(snapshot, refund) or Intent("click", "issue-refund")
        if goal["note"] not in record.get("notes", ()):
            note = Intent("type", "internal-note", goal["note"])
            return fill(snapshot, [note]) or Intent("click", "save-note")
        if record.get("status") != goal["status"]:
            status = Intent("select", "status", goal["status"])
            return fill(snapshot, [status]) or Intent("click", "update-status")
        notification = [
            Intent("select", "template", goal["template"]),
            Intent("type", "customer-note", goal["message"]),
        ]
        return fill(snapshot, notification) or Intent("click", "send-notification")


def _find_order(goal: dict[str, Any], route: str, snapshot: PageSnapshot) -> Intent:
    if route != "/orders":
        return Intent("click", "orders-link")
    link = f"order-{goal['order']}"
    if snapshot.by_key(link) or snapshot.where(link):
        return Intent("click", link)
    search = goal["customer"] if goal["by_customer"] else goal["order"]
    box = snapshot.by_key("order-search")
    if box is not None and box.value != search:
        return Intent("type", "order-search", search)
    if snapshot.by_key("next-page"):
        return Intent("click", "next-page")
    return Intent("click", "order-search-go")
