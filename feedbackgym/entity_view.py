"""An env's observation as entities: which vector keys are per-entity rows, relations or global.

An env whose observation is a table of entities at positions (OpsIncident's
services) declares an :class:`EntityView` as its ``entity_view`` attribute;
:class:`EntityLayout` turns the declaration and an observation space into
column indices of the flat vector a trainer reads
(:class:`~feedbackgym.training.common.trainer_view.FlatLayout`'s order: the
``Dict``'s key order, ``Discrete`` keys one-hot), and :meth:`EntityLayout.split`
cuts a batch of flat observations into ``(entities [B, n, F], present [B, n],
relations [B, n, n, R], globals [B, G])`` with one gather each. Keys the view
does not name are global; the guide's ``hint_targets`` channel, one column a
target, joins the entity columns when the env's targets are its entities.

A policy built on the layout has no weight that depends on ``n``: the same
weights read an env with more positions, and permuting the positions permutes
the per-entity outputs the same way.

Example:
    >>> from gymnasium import spaces
    >>> space = spaces.Dict({
    ...     "present": spaces.MultiBinary(2), "load": spaces.Box(0, 1, (4,)),
    ...     "calls": spaces.MultiBinary(4), "time": spaces.Box(0, 1, (1,))})
    >>> view = EntityView(count=2, present="present", entities={"present": 1, "load": 2},
    ...                   relations=("calls",), entity_actions=3, global_actions=1)
    >>> layout = EntityLayout(space, view)
    >>> entities, present, relations, globals_ = layout.split(np.arange(11.0)[None])
    >>> entities.tolist(), present.tolist(), globals_.tolist()  # keys in the Dict's (sorted) order
    ([[[4.0, 5.0, 8.0], [6.0, 7.0, 9.0]]], [[8.0, 9.0]], [[10.0]])
    >>> relations.shape, layout.n_actions
    ((1, 2, 2, 1), 7)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["ENTITY_VIEW", "HINT_TARGETS", "EntityLayout", "EntityView", "entity_view_of"]

ENTITY_VIEW = "entity_view"
"""The env attribute that holds its :class:`EntityView` (absent: the env declares none)."""

HINT_TARGETS = "hint_targets"
"""The guide's per-target vector channel (one column a target of ``target_vocabulary``)."""


@dataclass(frozen=True)
class EntityView:
    """Which of an env's vector keys are per-entity rows, entity×entity relations, or global.

    Attributes:
        count: Entity positions (``n``).
        present: The key with one flag a position: 1 where an entity is.
        entities: Per-entity keys and their columns an entity: key ``k`` with
            ``c`` columns holds ``n * c`` values position-major (position ``p``'s
            are ``[p * c, (p + 1) * c)``); values past ``n * c`` are global.
        relations: Keys of ``n * n`` values, row-major (``[i * n + j]``: ``i``
            to ``j``), one relation channel each.
        entity_actions: Actions each entity has: action ``p * entity_actions + v``
            is verb ``v`` on position ``p``.
        global_actions: Actions on no entity, numbered after the entities'.
        targets_are_entities: The env's ``target_vocabulary`` is its positions,
            so the guide's ``hint_targets`` is one more entity column.
    """

    count: int
    present: str
    entities: Mapping[str, int]
    relations: tuple[str, ...] = ()
    entity_actions: int = 0
    global_actions: int = 0
    targets_are_entities: bool = True

    @property
    def n_actions(self) -> int:
        """The size of the ``Discrete`` action space this view's actions make."""
        return self.count * self.entity_actions + self.global_actions


def entity_view_of(env: Any) -> EntityView | None:
    """The :class:`EntityView` an env (or a wrapper around it) declares, or ``None``."""
    getter = getattr(env, "get_wrapper_attr", None)
    try:
        view = getter(ENTITY_VIEW) if getter is not None else getattr(env, ENTITY_VIEW)
    except AttributeError:
        return None
    return view if isinstance(view, EntityView) else None


@dataclass
class EntityLayout:
    """Where an :class:`EntityView`'s parts lie in the flat vector of an observation space.

    Args:
        space: The observation space (a ``Dict``; ``Text`` keys are skipped as
            the flat layout skips them).
        view: The env's declaration.
        offset: Columns before the first key's (0).

    Raises:
        ValueError: A key the view names is missing, or has a size the view
            does not fit; or the view's actions do not match ``n_actions``.
    """

    space: spaces.Dict
    view: EntityView
    offset: int = 0
    entity_index: np.ndarray = field(init=False)
    """``[n, F]``: the flat column of each entity feature."""
    present_index: np.ndarray = field(init=False)
    """``[n]``: the flat column of each position's presence flag."""
    relation_index: np.ndarray = field(init=False)
    """``[n, n, R]``: the flat column of each relation."""
    global_index: np.ndarray = field(init=False)
    """``[G]``: the flat column of each global feature."""
    size: int = field(init=False)
    """The numeric columns of the flat vector (the text's and the mask's come after them)."""

    def __post_init__(self) -> None:
        view, n = self.view, self.view.count
        columns = self._key_columns()
        entity_keys = dict(view.entities)
        if view.targets_are_entities and HINT_TARGETS in columns:
            entity_keys.setdefault(HINT_TARGETS, 1)
        for key in (view.present, *entity_keys, *view.relations):
            if key not in columns:
                raise ValueError(
                    f"the entity view names {key!r}, which the observation does not have "
                    f"(its keys: {', '.join(columns)})"
                )
        per_entity: list[np.ndarray] = []
        global_parts: list[np.ndarray] = []
        for key, cols in columns.items():
            if key in entity_keys:
                width = entity_keys[key]
                if len(cols) < n * width:
                    raise ValueError(
                        f"entity key {key!r} has {len(cols)} values, fewer than {n} positions "
                        f"x {width} columns"
                    )
                per_entity.append(cols[: n * width].reshape(n, width))
                global_parts.append(cols[n * width :])
            elif key in view.relations:
                if len(cols) != n * n:
                    raise ValueError(f"relation key {key!r} has {len(cols)} values, not {n}x{n}")
            else:
                global_parts.append(cols)
        present = columns[view.present]
        if len(present) != n:
            raise ValueError(f"presence key {view.present!r} has {len(present)} values, not {n}")
        self.present_index = present
        self.entity_index = np.concatenate(per_entity, axis=1)
        relations = [columns[key].reshape(n, n) for key in view.relations]
        self.relation_index = (
            np.stack(relations, axis=-1) if relations else np.zeros((n, n, 0), np.int64)
        )
        self.global_index = np.concatenate(global_parts) if global_parts else np.zeros(0, np.int64)

    def _key_columns(self) -> dict[str, np.ndarray]:
        """Each numeric key's flat columns, in the flat layout's order."""
        columns: dict[str, np.ndarray] = {}
        start = self.offset
        for key, sub in self.space.spaces.items():
            if isinstance(sub, spaces.Text):
                continue
            size = int(sub.n) if isinstance(sub, spaces.Discrete) else int(np.prod(sub.shape or ()))
            columns[key] = np.arange(start, start + size)
            start += size
        self.size = start
        return columns

    @property
    def n_actions(self) -> int:
        """The actions a policy on this layout scores (:attr:`EntityView.n_actions`)."""
        return self.view.n_actions

    @property
    def widths(self) -> dict[str, int]:
        """The widths that shape a policy's weights; none depends on the entity count.

        Example:
            >>> from gymnasium import spaces
            >>> space = spaces.Dict({"present": spaces.MultiBinary(3)})
            >>> EntityLayout(space, EntityView(3, "present", {"present": 1}, (), 2, 1)).widths
            {'entity': 1, 'relation': 0, 'globals': 0, 'entity_actions': 2, 'global_actions': 1}
        """
        return {
            "entity": self.entity_index.shape[1],
            "relation": self.relation_index.shape[2],
            "globals": len(self.global_index),
            "entity_actions": self.view.entity_actions,
            "global_actions": self.view.global_actions,
        }

    def feature_columns(self, keys: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Where ``keys``' values lie among the entity features and the globals.

        Returns:
            ``(entity, globals_)``: indices into the ``F`` entity features and the ``G``
            globals of :meth:`split` that hold a value of one of ``keys`` (keys the
            observation lacks hold none). Neither depends on the entity count.

        Example:
            >>> from gymnasium import spaces
            >>> space = spaces.Dict({"hint_targets": spaces.MultiBinary(2),
            ...     "present": spaces.MultiBinary(2), "time": spaces.Box(0, 1, (1,))})
            >>> layout = EntityLayout(space, EntityView(2, "present", {"present": 1}))
            >>> layout.feature_columns(("hint_targets", "time"))
            ((0,), (0,))
        """
        wanted = {int(c) for key, cols in self._key_columns().items() if key in keys for c in cols}
        entity = tuple(f for f, column in enumerate(self.entity_index[0]) if column in wanted)
        globals_ = tuple(g for g, column in enumerate(self.global_index) if column in wanted)
        return entity, globals_

    @property
    def indices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The four index arrays, in :meth:`split`'s order."""
        return self.entity_index, self.present_index, self.relation_index, self.global_index

    @property
    def gather_index(self) -> np.ndarray:
        """The four index arrays end to end: :meth:`split` takes every part in one gather."""
        return np.concatenate([index.ravel() for index in self.indices])

    def split(self, flat: Any, gather_index: Any = None) -> tuple[Any, ...]:
        """Cuts a batch of flat observations ``[B, D]`` into the view's four parts.

        One gather, then views. Works on numpy arrays and on torch tensors (give
        ``gather_index`` as a tensor on the batch's device: :attr:`gather_index`,
        converted once).

        Returns:
            ``(entities [B, n, F], present [B, n], relations [B, n, n, R], globals [B, G])``.
        """
        index = self.gather_index if gather_index is None else gather_index
        gathered = flat[:, index]
        parts, start = [], 0
        for part in self.indices:
            parts.append(gathered[:, start : start + part.size].reshape(-1, *part.shape))
            start += part.size
        return tuple(parts)
