"""What PostgreSQL said about a lifted statement's shape (literals.py), remembered, and the
bounded map that remembers it (and the plan check's verdicts and type names).

A lifted statement's text, parameter types and plan are the same for every value of its
literals, and Parse/Describe read catalogs only, so what they answered (the answer's
columns and types) is remembered per (text, types, plan) instead of asked per answer. Only
the event loop uses it.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

# What one entry costs beyond the text it holds (the map's slot, tuples, small objects).
ENTRY_OVERHEAD = 512


class Remembered(Generic[K, V]):
    """A least-recently-used map bounded by entries and by the bytes of the text its keys
    hold (statement texts and SQL: what grows with what a client sends)."""

    def __init__(self, size: int = 4096, max_bytes: int = 16 << 20):
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value remembered for `key`, or None."""
        found = self._entries.get(key)
        if found is None:
            return None
        self._entries.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V, weight: int | None = None) -> None:
        """Remember `value`, forgetting the least recently used beyond the bounds. Its
        `weight` in bytes is by default the text its key holds."""
        weight = text_bytes(key) + ENTRY_OVERHEAD if weight is None else weight
        if weight > self.max_bytes:
            return  # would evict everything else: not worth keeping
        previous = self._entries.pop(key, None)
        if previous is not None:
            self.bytes -= previous[1]
        self._entries[key] = (value, weight)
        self.bytes += weight
        while len(self._entries) > self.size or self.bytes > self.max_bytes:
            _, (_, evicted) = self._entries.popitem(last=False)
            self.bytes -= evicted


def text_bytes(value: object, depth: int = 4) -> int:
    """About the bytes of the strings inside `value`: itself, or within its tuples and
    dataclass fields down to `depth` levels (plans hold their SQL a few levels deep)."""
    if isinstance(value, str | bytes):
        return len(value)
    if depth == 0:
        return 0
    if isinstance(value, tuple | list):
        return sum(text_bytes(item, depth - 1) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(text_bytes(getattr(value, field.name), depth - 1)
                   for field in dataclasses.fields(value))
    return 0
