"""The task families of ``WebEnv``, by name."""

from __future__ import annotations

from feedbackgym.envs.web.tasks.base import WebTask
from feedbackgym.envs.web.tasks.checkout import CheckoutTask
from feedbackgym.envs.web.tasks.form import FormTask
from feedbackgym.envs.web.tasks.order_admin import OrderAdminTask

__all__ = ["TASKS"]

TASKS: dict[str, type[WebTask]] = {
    "checkout": CheckoutTask,
    "form": FormTask,
    "order_admin": OrderAdminTask,
}
"""``task`` argument of ``WebEnv`` -> task family."""
