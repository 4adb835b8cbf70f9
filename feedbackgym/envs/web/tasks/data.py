"""Pools the task instances are drawn from: people, addresses, products, codes.

Every string a goal can ask an agent to type or select comes from here, so the
tasks' vocabularies are fixed and the action tables never change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "ADDRESSES",
    "BRANDS",
    "CARDS",
    "COLOURS",
    "COUNTRIES",
    "COUPONS",
    "EXPIRIES",
    "MONTHS",
    "PEOPLE",
    "PRODUCTS",
    "SIZES",
    "STREETS",
    "person",
    "pick",
    "sample",
]

T = TypeVar("T")

PEOPLE: tuple[tuple[str, str], ...] = (
    ("Ada", "Lovelace"),
    ("Alan", "Turing"),
    ("Grace", "Hopper"),
    ("Katherine", "Johnson"),
    ("Edsger", "Dijkstra"),
    ("Barbara", "Liskov"),
    ("Donald", "Knuth"),
    ("Margaret", "Hamilton"),
    ("Frances", "Allen"),
    ("John", "Backus"),
)
"""First and last names."""

ADDRESSES: tuple[tuple[str, str, str], ...] = (
    ("Berlin", "10115", "Germany"),
    ("Hamburg", "20095", "Germany"),
    ("Munich", "80331", "Germany"),
    ("Paris", "75001", "France"),
    ("Lyon", "69002", "France"),
    ("Vienna", "1010", "Austria"),
    ("Amsterdam", "1012 AB", "Netherlands"),
    ("Utrecht", "3511 AA", "Netherlands"),
    ("London", "SW1A 1AA", "United Kingdom"),
    ("Manchester", "M1 1AE", "United Kingdom"),
)
"""City, postcode, country: each postcode valid for its country."""

STREETS: tuple[str, ...] = (
    "12 Linden Street",
    "4 Harbour Road",
    "27 Mill Lane",
    "9 Station Road",
    "31 Garden Way",
    "8 Bridge Street",
    "15 Park Avenue",
    "22 Market Square",
)

COUNTRIES: tuple[str, ...] = ("Austria", "France", "Germany", "Netherlands", "United Kingdom")

COLOURS: tuple[str, ...] = ("black", "blue", "green", "grey", "navy", "orange", "red", "white")

SIZES: dict[str, tuple[str, ...]] = {
    "Shoes": ("39", "40", "41", "42", "43", "44", "45"),
    "Jackets": ("XS", "S", "M", "L", "XL"),
    "Shirts": ("XS", "S", "M", "L", "XL"),
    "Bags": ("One size",),
}
"""Sizes per product category."""

PRODUCTS: dict[str, tuple[str, ...]] = {
    "Shoes": ("Trail Runner", "Road Racer", "Canvas Sneaker", "Hiking Boot"),
    "Jackets": ("Rain Jacket", "Down Parka", "Fleece Jacket"),
    "Shirts": ("Linen Shirt", "Flannel Shirt", "Oxford Shirt"),
    "Bags": ("Day Pack", "Weekender Bag", "Messenger Bag"),
}
"""Product names per category."""

BRANDS: tuple[str, ...] = ("Alpina", "Corvo", "Fjell", "Kestrel", "Nordix", "Tundra")

COUPONS: dict[str, int] = {
    "SAVE10": 10,
    "WELCOME15": 15,
    "SPRING5": 5,
    "SUMMER20": 20,
    "AUTUMN12": 12,
    "VIP25": 25,
}
"""Coupon codes and their discount in percent (an instance marks some expired)."""

CARDS: tuple[str, ...] = (
    "4242 4242 4242 4242",
    "4000 0566 5566 5556",
    "5555 5555 5555 4444",
    "5200 8282 8282 8210",
)
"""Test card numbers (valid Luhn checksums)."""

EXPIRIES: tuple[str, ...] = ("01/27", "06/27", "11/27", "03/28", "09/28", "12/29")

MONTHS: tuple[str, ...] = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def pick(rng: np.random.Generator, pool: Sequence[T]) -> T:
    """One element of ``pool``."""
    return pool[int(rng.integers(len(pool)))]


def sample(rng: np.random.Generator, pool: Sequence[T], k: int) -> list[T]:
    """``k`` distinct elements of ``pool``, in random order."""
    return [pool[int(i)] for i in rng.choice(len(pool), size=k, replace=False)]


def person(rng: np.random.Generator) -> dict[str, Any]:
    """A person with a street address (all fields from the pools)."""
    first, last = pick(rng, PEOPLE)
    city, postcode, country = pick(rng, ADDRESSES)
    return {
        "first": first,
        "last": last,
        "name": f"{first} {last}",
        "street": pick(rng, STREETS),
        "city": city,
        "postcode": postcode,
        "country": country,
    }
