"""What PostgreSQL said about a lifted statement's shape (literals.py), remembered.

A lifted statement's text, parameter types and plan are the same for every value of its
literals, and Parse/Describe read catalogs only, so what they answered (the answer's
columns and types) is remembered per (text, types, plan) instead of asked per answer. Only
the event loop uses it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Remembered(Generic[K, V]):
    """A least-recently-used map of bounded size."""

    def __init__(self, size: int = 4096):
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value remembered for `key`, or None."""
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: K, value: V) -> None:
        """Remember `value`, forgetting the least recently used beyond `size`."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
