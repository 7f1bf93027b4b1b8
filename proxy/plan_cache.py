"""Plans cached by statement text and metrics version, calibrations by plan and (ε, δ).

The rewriter is pure, so its output for the same inputs can be reused: a repeated query
costs a dictionary lookup instead of a parse and an analysis.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

from rewriter.calibrate import Calibration, calibrate
from rewriter.classify import Statement
from rewriter.plan import PrivateAggregate

CacheKey = tuple[str, int]


class PlanCache:
    """A bounded least-recently-used map from (SQL text, metrics version) to plans."""

    def __init__(self, size: int = 2048):
        self.size = size
        self._plans: OrderedDict[CacheKey, list[Statement]] = OrderedDict()

    def get(self, key: CacheKey) -> list[Statement] | None:
        statements = self._plans.get(key)
        if statements is not None:
            self._plans.move_to_end(key)
        return statements

    def put(self, key: CacheKey, statements: list[Statement]) -> None:
        self._plans[key] = statements
        self._plans.move_to_end(key)
        while len(self._plans) > self.size:
            self._plans.popitem(last=False)


@lru_cache(maxsize=4096)
def calibrate_cached(plan: PrivateAggregate, epsilon: float, delta: float,
                     mechanism: str = "shifted_laplace") -> Calibration:
    """calibrate(), remembered: the smooth-sensitivity scan is the costly part."""
    return calibrate(plan, epsilon, delta, mechanism=mechanism)
