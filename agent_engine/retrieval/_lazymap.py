"""A mapping whose values are made on first use, from keys known up front.

An index restored from a saved snapshot knows every key at once (cheap: one dict of small
ints) but would spend seconds making every value (a term counter per document, a member list
per session) that a build touches a few hundred of. :class:`LazyMap` holds each key's
*recipe* until the value is asked for, then makes it once and keeps it; writes replace or
drop either form. Only the value-making is lazy: lengths, membership and iteration never
make a value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Generic, TypeVar

__all__ = ["LazyMap"]

K = TypeVar("K")
V = TypeVar("V")
R = TypeVar("R")

_MISSING: object = object()


class LazyMap(MutableMapping[K, V], Generic[K, V, R]):
    """Keys with either a value or a recipe ``make(recipe)`` turns into one on first read."""

    __slots__ = ("_made", "_make", "_recipes")

    def __init__(self, recipes: dict[K, R], make: Callable[[R], V]) -> None:
        self._recipes = recipes
        self._make = make
        self._made: dict[K, V] = {}

    def __getitem__(self, key: K) -> V:
        try:
            return self._made[key]
        except KeyError:
            recipe = self._recipes.pop(key)  # KeyError: unknown, as a dict says
            value = self._made[key] = self._make(recipe)
            return value

    def get(self, key: K, default: V | None = None) -> V | None:  # type: ignore[override]
        """The value of ``key`` (made now if only its recipe is held), else ``default``."""
        if key in self._made:
            return self._made[key]
        return self[key] if key in self._recipes else default

    def __setitem__(self, key: K, value: V) -> None:
        self._recipes.pop(key, None)
        self._made[key] = value

    def __delitem__(self, key: K) -> None:
        if self._recipes.pop(key, _MISSING) is _MISSING:
            del self._made[key]

    def __contains__(self, key: object) -> bool:
        return key in self._made or key in self._recipes

    def __iter__(self) -> Iterator[K]:
        yield from list(self._made)
        yield from list(self._recipes)

    def __len__(self) -> int:
        return len(self._made) + len(self._recipes)

    def recipe(self, key: K) -> R | None:
        """The recipe still held for ``key`` (``None``: its value was made, or it is unknown)."""
        return self._recipes.get(key)
