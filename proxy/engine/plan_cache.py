"""Plans cached by statement text and metrics version, calibrations by plan and (ε, δ).

The rewriter is pure, so its output for the same inputs can be reused: a repeated query
costs a dictionary lookup instead of a parse and an analysis.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

from mechanisms.names import Mechanism
from rewriter.calibrate import Calibration, calibrate
from rewriter.classify import Statement
from rewriter.plan import PrivateAggregate

CacheKey = tuple[str, int]


class PlanCache:
    """A least-recently-used map from (SQL text, metrics version) to plans, bounded by
    entries and by the bytes of the texts it holds, so that many long distinct statements
    cannot grow the proxy without end."""

    def __init__(self, size: int = 2048, max_bytes: int = 64 << 20):
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0
        self._plans: OrderedDict[CacheKey, tuple[list[Statement], int]] = OrderedDict()

    def get(self, key: CacheKey) -> list[Statement] | None:
        entry = self._plans.get(key)
        if entry is None:
            return None
        self._plans.move_to_end(key)
        return entry[0]

    def put(self, key: CacheKey, statements: list[Statement]) -> None:
        weight = _weight(key, statements)
        if weight > self.max_bytes:
            return  # would evict everything else: not worth keeping
        previous = self._plans.pop(key, None)
        if previous is not None:
            self.bytes -= previous[1]
        self._plans[key] = (statements, weight)
        self.bytes += weight
        while len(self._plans) > self.size or self.bytes > self.max_bytes:
            _, (_, evicted) = self._plans.popitem(last=False)
            self.bytes -= evicted


def _weight(key: CacheKey, statements: list[Statement]) -> int:
    """About what an entry holds: the text as key and in each statement, and the SQL each
    plan keeps (plans hold strings and small tuples, no syntax trees)."""
    plans: list[str] = [getattr(s.plan, "sql", None) or getattr(s.plan, "text", None) or ""
                        for s in statements]
    return len(key[0]) + sum(len(s.text) for s in statements) + sum(len(p) for p in plans) \
        + 512 * len(statements)


@lru_cache(maxsize=4096)
def calibrate_cached(plan: PrivateAggregate, epsilon: float, delta: float,
                     mechanism: str = Mechanism.SHIFTED_LAPLACE) -> Calibration:
    """calibrate(), remembered: the smooth-sensitivity scan is the costly part."""
    return calibrate(plan, epsilon, delta, mechanism=mechanism)
