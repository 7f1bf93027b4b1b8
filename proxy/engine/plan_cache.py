"""Plans cached by statement text and metrics version, calibrations by their inputs.

The rewriter is pure, so its output for the same inputs can be reused: a repeated query
costs a dictionary lookup instead of a parse and an analysis.
"""

from __future__ import annotations

import threading

from mechanisms.names import Mechanism
from rewriter.analysis.classify import Statement
from rewriter.plan import Composite, PrivateAggregate
from rewriter.sensitivity.calibrate import SUM_COUNT_SHARE, Calibration, calibrate

from .shapes import Remembered

CacheKey = tuple[str, int]


class PlanCache:
    """A least-recently-used map from (SQL text, metrics version) to plans, bounded by
    entries and by the bytes of the texts it holds, so that many long distinct statements
    cannot grow the proxy without end."""

    def __init__(self, size: int = 2048, max_bytes: int = 64 << 20):
        self._plans: Remembered[CacheKey, list[Statement]] = Remembered(size, max_bytes)

    @property
    def bytes(self) -> int:
        """The bytes its entries are counted for."""
        return self._plans.bytes

    def get(self, key: CacheKey) -> list[Statement] | None:
        return self._plans.get(key)

    def put(self, key: CacheKey, statements: list[Statement]) -> None:
        self._plans.put(key, statements, _weight(key, statements))


def _weight(key: CacheKey, statements: list[Statement]) -> int:
    """About what an entry holds: the text as key and in each statement, and the SQL each
    plan keeps (plans hold strings and small tuples, no syntax trees)."""
    return len(key[0]) + sum(len(s.text) + _held(s.plan) for s in statements) \
        + 512 * len(statements)


def _held(plan: object) -> int:
    """The SQL a plan keeps: a Composite's, that of each of its releases too."""
    if isinstance(plan, Composite):
        return len(plan.combine) + sum(len(branch.text) + len(branch.plan.sql)
                                       for branch in plan.branches)
    return len(getattr(plan, "sql", None) or getattr(plan, "text", None) or "")


class CalibrationCache:
    """calibrate(), remembered by its inputs (plan, ε, δ, mechanism, a SUM's count share):
    the smooth-sensitivity scan and the Gaussian σ search are the costly parts. `get`
    answers from the cache only, so the event loop can skip the trip to a worker thread
    when the answer is known.
    Bounded by entries and by the bytes of the plans' SQL (shapes.py). Shared by sessions
    on the loop and on worker threads, hence the lock."""

    def __init__(self, size: int = 4096, max_bytes: int = 16 << 20):
        self._entries: Remembered[tuple, Calibration] = Remembered(size, max_bytes)
        self._lock = threading.Lock()

    def get(self, plan: PrivateAggregate, epsilon: float, delta: float,
            mechanism: str = Mechanism.SHIFTED_LAPLACE,
            sum_count_share: float = SUM_COUNT_SHARE) -> Calibration | None:
        """The remembered calibration, or None."""
        key = (plan, epsilon, delta, mechanism, sum_count_share)
        with self._lock:
            return self._entries.get(key)

    def __call__(self, plan: PrivateAggregate, epsilon: float, delta: float,
                 mechanism: str = Mechanism.SHIFTED_LAPLACE,
                 sum_count_share: float = SUM_COUNT_SHARE) -> Calibration:
        """The calibration, computed once per inputs (a Refusal is not remembered)."""
        found = self.get(plan, epsilon, delta, mechanism, sum_count_share)
        if found is not None:
            return found
        calibration = calibrate(plan, epsilon, delta, mechanism=mechanism,
                                sum_count_share=sum_count_share)
        with self._lock:
            self._entries.put((plan, epsilon, delta, mechanism, sum_count_share), calibration)
        return calibration


calibrate_cached = CalibrationCache()
