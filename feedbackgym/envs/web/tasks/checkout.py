"""WebCheckout: buy one product variant in the Nordshop app, from search to order.

The instance is a catalogue of 18 products (the target's name sold by two or
three brands), coupons (some expired), and a goal: product (by brand, or the
cheapest of its name), colour, size, quantity, coupon (sometimes "try X, else
Y"), shipping address, delivery option and card. Subgoals::

    find_product ─► add_to_cart ─► apply_coupon ─► shipping_details
        ─► choose_delivery ─► payment_details ─► place_order
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from feedbackgym.core import Subgoal
from feedbackgym.envs.web.snapshot import PageSnapshot
from feedbackgym.envs.web.tasks import data
from feedbackgym.envs.web.tasks.base import Intent, WebTask, fill, route_of

__all__ = ["CheckoutTask"]

_DELIVERIES = (
    {"id": "standard", "label": "Standard, 3-5 days", "price": 495},
    {"id": "express", "label": "Express, next day", "price": 995},
    {"id": "pickup", "label": "Pick up in store", "price": 0},
)
_SORTS = ("Relevance", "Price: low to high", "Price: high to low")
_CHECKOUT = (
    "/cart",
    "/checkout/shipping",
    "/checkout/delivery",
    "/checkout/payment",
    "/checkout/review",
)
_NEXT = {
    "/cart": "checkout",
    "/checkout/shipping": "to-delivery",
    "/checkout/delivery": "to-payment",
    "/checkout/payment": "to-review",
}
_SHIPPING_FIELDS = (
    ("ship-name", "name"),
    ("ship-street", "street"),
    ("ship-city", "city"),
    ("ship-postcode", "postcode"),
)
_ALL_NAMES = tuple(n for names in data.PRODUCTS.values() for n in names)
_ALL_SIZES = tuple(dict.fromkeys(s for sizes in data.SIZES.values() for s in sizes))


def _product(rng: np.random.Generator, pid: str, name: str, brand: str) -> dict[str, Any]:
    category = next(c for c, names in data.PRODUCTS.items() if name in names)
    sizes = data.SIZES[category]
    if len(sizes) > 1:
        start = int(rng.integers(0, len(sizes) - 2))
        sizes = sizes[start : start + int(rng.integers(3, len(sizes) - start + 1))]
    return {
        "id": pid,
        "name": name,
        "brand": brand,
        "category": category,
        "price": int(rng.integers(20, 180)) * 100 - 1,
        "colours": sorted(data.sample(rng, data.COLOURS, int(rng.integers(2, 5)))),
        "sizes": list(sizes),
    }


def _catalogue(rng: np.random.Generator, name: str, variants: int) -> list[dict[str, Any]]:
    pairs = {(name, b) for b in data.sample(rng, data.BRANDS, variants)}
    while len(pairs) < 18:
        other = data.pick(rng, _ALL_NAMES)
        if other != name:
            pairs.add((other, data.pick(rng, data.BRANDS)))
    ordered = sorted(pairs)
    rng.shuffle(ordered)
    return [_product(rng, f"p{i + 1:02d}", n, b) for i, (n, b) in enumerate(ordered)]


def _target_line(goal: dict[str, Any]) -> dict[str, Any]:
    return {
        "product": goal["product"],
        "colour": goal["colour"],
        "size": goal["size"],
        "qty": goal["qty"],
    }


def _viewed(goal: dict[str, Any], state: Any) -> bool:
    return goal["product"] in (state.app or {}).get("viewed", ())


def _cart_right(goal: dict[str, Any], state: Any) -> bool:
    app = state.app or {}
    lines = [_target_line(goal)]
    return app.get("cart") == lines or (app.get("order") or {}).get("lines") == lines


def _coupon_right(goal: dict[str, Any], state: Any) -> bool:
    return (state.app or {}).get("coupon") == goal["coupons"][-1]


def _committed(key: str, goal: dict[str, Any], state: Any) -> bool:
    return (state.app or {}).get(key) == goal[key]


def _ordered(goal: dict[str, Any], state: Any) -> bool:
    return bool((state.app or {}).get("order"))


class CheckoutTask(WebTask):
    """Buy one product variant with a coupon, an address, a delivery option and a card."""

    name = "checkout"
    app = "shop"
    success_outcome = "order_placed"
    type_values = (
        *(f"{first} {last}" for first, last in data.PEOPLE),
        *data.STREETS,
        *(city for city, _, _ in data.ADDRESSES),
        *(postcode for _, postcode, _ in data.ADDRESSES),
        *_ALL_NAMES,
        *data.COUPONS,
        *data.CARDS,
    )
    select_values = (
        *data.COLOURS,
        *_ALL_SIZES,
        "1",
        "2",
        "3",
        "4",
        "5",
        *data.COUNTRIES,
        *data.EXPIRIES,
        *data.BRANDS,
        *_SORTS,
    )

    def generate(self, rng: np.random.Generator) -> dict[str, Any]:
        """Draws a catalogue, coupons and a goal."""
        name = data.pick(rng, _ALL_NAMES)
        catalogue = _catalogue(rng, name, int(rng.integers(2, 4)))
        same_name = [p for p in catalogue if p["name"] == name]
        by_cheapest = bool(rng.random() < 0.4)
        if by_cheapest:
            target = min(same_name, key=lambda p: p["price"])
            for other in same_name:
                if other is not target and other["price"] <= target["price"]:
                    other["price"] = target["price"] + 500
        else:
            target = data.pick(rng, same_name)
        codes = data.sample(rng, list(data.COUPONS), 2)
        expired_first = bool(rng.random() < 0.5)
        coupons = {
            code: {"percent": percent, "expired": bool(rng.random() < 0.3)}
            for code, percent in data.COUPONS.items()
        }
        coupons[codes[0]]["expired"] = expired_first
        coupons[codes[1]]["expired"] = False
        person = data.person(rng)
        goal = {
            "product": target["id"],
            "name": name,
            "brand": target["brand"],
            "by_cheapest": by_cheapest,
            "colour": data.pick(rng, target["colours"]),
            "size": data.pick(rng, target["sizes"]),
            "qty": int(rng.integers(1, 4)),
            "coupons": codes if expired_first else codes[:1],
            "shipping": {k: person[k] for k in ("name", "street", "city", "postcode", "country")},
            "delivery": data.pick(rng, [d["id"] for d in _DELIVERIES]),
            "payment": {
                "card": data.pick(rng, data.CARDS).replace(" ", ""),
                "expiry": data.pick(rng, data.EXPIRIES),
                "name": person["name"],
            },
        }
        app = {
            "store": "Nordshop",
            "products": catalogue,
            "coupons": coupons,
            "deliveries": list(_DELIVERIES),
            "countries": list(data.COUNTRIES),
            "expiries": list(data.EXPIRIES),
            "pageSize": 4,
            "orderNumber": f"NS-{int(rng.integers(10000, 99999))}",
        }
        return {"app": app, "goal": goal}

    def goal_text(self, goal: dict[str, Any]) -> str:
        """The shopping list in words."""
        what = (
            f"the cheapest {goal['name']}"
            if goal["by_cheapest"]
            else f"the {goal['name']} by {goal['brand']}"
        )
        codes = goal["coupons"]
        coupon = (
            f"Apply the coupon {codes[0]}; if it has expired, use {codes[1]} instead."
            if len(codes) == 2
            else f"Apply the coupon {codes[0]}."
        )
        ship = goal["shipping"]
        delivery = next(d["label"] for d in _DELIVERIES if d["id"] == goal["delivery"])
        card = goal["payment"]
        return (
            f"Buy {goal['qty']} x {what} in {goal['colour']}, size {goal['size']}. {coupon} "
            f"Ship to {ship['name']}, {ship['street']}, {ship['postcode']} {ship['city']}, "
            f"{ship['country']}, with delivery '{delivery}'. Pay with card "
            f"{_spaced(card['card'])}, expiry {card['expiry']}, name on card {card['name']}."
        )

    def goal_values(self, goal: dict[str, Any]) -> set[str]:
        """Product name, variant, quantity, coupons, address, card and expiry."""
        ship, card = goal["shipping"], goal["payment"]
        return {
            goal["name"],
            goal["colour"],
            goal["size"],
            str(goal["qty"]),
            *goal["coupons"],
            *ship.values(),
            _spaced(card["card"]),
            card["expiry"],
            card["name"],
        }

    def subgoals(self, goal: dict[str, Any]) -> list[Subgoal]:
        """find_product -> add_to_cart -> apply_coupon -> ... -> place_order."""
        line = f"{goal['qty']} x {goal['name']} ({goal['colour']}, {goal['size']})"
        return [
            Subgoal(
                "find_product",
                f"Open the product page of the {goal['name']} by {goal['brand']}.",
                partial(_viewed, goal),
            ),
            Subgoal(
                "add_to_cart",
                f"Have exactly {line} in the cart, nothing else.",
                partial(_cart_right, goal),
                ("find_product",),
            ),
            Subgoal(
                "apply_coupon",
                f"Apply the coupon {goal['coupons'][-1]} in the cart.",
                partial(_coupon_right, goal),
                ("add_to_cart",),
            ),
            Subgoal(
                "shipping_details",
                "Enter the shipping address and continue to delivery.",
                partial(_committed, "shipping", goal),
                ("apply_coupon",),
            ),
            Subgoal(
                "choose_delivery",
                "Choose the delivery option and continue to payment.",
                partial(_committed, "delivery", goal),
                ("shipping_details",),
            ),
            Subgoal(
                "payment_details",
                "Enter the card details and continue to the review.",
                partial(_committed, "payment", goal),
                ("choose_delivery",),
            ),
            Subgoal(
                "place_order",
                "Place the order.",
                partial(_ordered, goal),
                ("payment_details",),
            ),
        ]

    def judge(self, goal: dict[str, Any], app: dict[str, Any]) -> tuple[bool, str, bool]:
        """Over once an order is placed; a success if it is exactly the goal's."""
        order = (app or {}).get("order")
        if not order:
            return False, "in_progress", False
        right = (
            order["lines"] == [_target_line(goal)]
            and order["coupon"] == goal["coupons"][-1]
            and order["shipping"] == goal["shipping"]
            and order["delivery"] == goal["delivery"]
            and order["payment"] == goal["payment"]
        )
        return True, "order_placed" if right else "wrong_order", right

    def expert(self, goal: dict[str, Any], app: dict[str, Any], snapshot: PageSnapshot) -> Intent:
        """Fixes the first unmet requirement: cart, coupon, shipping, delivery, payment, order."""
        route = route_of(snapshot.path)
        target = (goal["product"], goal["colour"], goal["size"])
        cart = app["cart"]
        if cart != [_target_line(goal)]:
            return self._fix_cart(goal, cart, target, route, snapshot)
        if app["coupon"] != goal["coupons"][-1]:
            return self._fix_coupon(goal, app, route, snapshot)
        if app["shipping"] != goal["shipping"] or route == "/checkout/shipping":
            if route == "/checkout/shipping":
                return fill(snapshot, _shipping(goal)) or Intent("click", "to-delivery")
            return _towards("/checkout/shipping", route)
        if app["delivery"] != goal["delivery"] or route == "/checkout/delivery":
            if route == "/checkout/delivery":
                radio = snapshot.by_key(f"delivery-{goal['delivery']}")
                if radio is not None and not radio.checked:
                    return Intent("click", radio.key)
                return Intent("click", "to-payment")
            return _towards("/checkout/delivery", route)
        if app["payment"] != goal["payment"] or route == "/checkout/payment":
            if route == "/checkout/payment":
                return fill(snapshot, _payment(goal)) or Intent("click", "to-review")
            return _towards("/checkout/payment", route)
        if route == "/checkout/review":
            return Intent("click", "place-order")
        return _towards("/checkout/review", route)

    @staticmethod
    def _fix_cart(
        goal: dict[str, Any],
        cart: list[dict[str, Any]],
        target: tuple[str, str, str],
        route: str,
        snapshot: PageSnapshot,
    ) -> Intent:
        keys = [(line["product"], line["colour"], line["size"]) for line in cart]
        wrong = [i for i, key in enumerate(keys) if key != target]
        if wrong or target in keys:
            if route != "/cart":
                return Intent("click", "cart-link")
            if wrong:
                return Intent("click", f"remove-{wrong[0]}")
            return Intent("select", f"qty-{keys.index(target)}", str(goal["qty"]))
        if route == f"/product/{goal['product']}":
            wanted = [
                Intent("select", "colour", goal["colour"]),
                Intent("select", "size", goal["size"]),
                Intent("select", "qty", str(goal["qty"])),
            ]
            return fill(snapshot, wanted) or Intent("click", "add-to-cart")
        link = f"product-{goal['product']}"
        if route == "/search" and (snapshot.by_key(link) or snapshot.where(link)):
            return Intent("click", link)
        if route == "/search" and snapshot.by_key("next-page") and goal["name"] in snapshot.title:
            return Intent("click", "next-page")
        search = snapshot.by_key("search")
        if search is not None and search.value != goal["name"]:
            return Intent("type", "search", goal["name"])
        return Intent("click", "search-go")

    @staticmethod
    def _fix_coupon(
        goal: dict[str, Any], app: dict[str, Any], route: str, snapshot: PageSnapshot
    ) -> Intent:
        if route != "/cart":
            return Intent("click", "cart-link")
        if app["coupon"]:
            return Intent("click", "remove-coupon")
        first, last = goal["coupons"][0], goal["coupons"][-1]
        code = first if first not in app["tried"] else last
        field = snapshot.by_key("coupon")
        if field is not None and field.value != code:
            return Intent("type", "coupon", code)
        return Intent("click", "apply-coupon")


def _spaced(card: str) -> str:
    return " ".join(card[i : i + 4] for i in range(0, len(card), 4))


def _towards(target: str, route: str) -> Intent:
    """One step along cart -> shipping -> delivery -> payment -> review towards ``target``."""
    if route in _CHECKOUT and _CHECKOUT.index(route) < _CHECKOUT.index(target):
        return Intent("click", _NEXT[route])
    return Intent("click", "cart-link")


def _shipping(goal: dict[str, Any]) -> list[Intent]:
    ship = goal["shipping"]
    return [
        *(Intent("type", key, ship[field]) for key, field in _SHIPPING_FIELDS),
        Intent("select", "ship-country", ship["country"]),
    ]


def _payment(goal: dict[str, Any]) -> list[Intent]:
    card = goal["payment"]
    return [
        Intent("type", "card", _spaced(card["card"])),
        Intent("select", "expiry", card["expiry"]),
        Intent("type", "card-name", card["name"]),
    ]
