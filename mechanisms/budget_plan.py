"""Risk-based distribution of privacy budget among analysts (Bkakria, Cuppens &
Cuppens, "Optimal Distribution of Privacy Budget in Differential Privacy").

Analyst u discloses what they learn with probability p_u, independently of the others.
The data owner gives α(x): the largest acceptable probability that a total budget x
leaks. A distribution ε_u is α-risky when every group U' of analysts satisfies
Π_{u∈U'} p_u ≤ α(Σ_{u∈U'} ε_u), and monotone when a riskier analyst (higher p_u) never
gets more than a safer one.

Everything is computed with w_u = −log10 p_u (so Π p becomes Σ w and nothing
underflows) and, for a group S, W_S = Σ_{u∈S} w_u. Because α does not increase, group S
is within its limit exactly when Σ_{u∈S} ε_u ≤ c(W_S), where c(W) is the largest total
whose α is still at least 10^−W. So the α-risky distributions form a polytope, and the
plan is its *leximin* point: the smallest budget as large as possible, then the second
smallest, and so on. That point is unique, monotone, and no analyst's budget can grow
without another's shrinking (it is optimal in the paper's sense).

- Exponential α (the paper's example): c(W) = ε·(1 + W), the constraint of every group is
  Σ_{u∈S} (ε_u − ε·w_u) ≤ ε, and the tightest group is the analysts with ε_u > ε·w_u.
  The plan is water filling: ε_u = ε·max(w_u, L) where L solves Σ_u max(0, L − w_u) = 1
  (O(n log n); 10,000 analysts take milliseconds).
- Table α: progressive filling over all 2^n groups, for at most MAX_SUBSET_ANALYSTS.

Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

TIE_BREAK = (
    "leximin: the smallest budget as large as possible, then the second smallest, and so "
    "on; unique, equal risks get equal budgets, and no budget can grow without another "
    "shrinking"
)
# Group-by-group planning and checking enumerate 2^n groups (a million at 20).
MAX_SUBSET_ANALYSTS = 20
# Budgets are floats: a group is judged at its total minus this fraction, so rounding in
# the last digit never fails a distribution that is exactly on its limit.
TOLERANCE = 1e-9
# Groups whose room is within this fraction of the smallest are tight together.
_TIGHT = 1e-12


class _AlphaFunction:
    """α itself, from the log10 α that the computations use."""

    def log10(self, total: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __call__(self, total: float) -> float:
        return float(10.0 ** self.log10(np.asarray(total, dtype=float)))


@dataclass(frozen=True)
class ExponentialAlpha(_AlphaFunction):
    """The paper's example: α(x) = 1 for x ≤ ε, 10^(−(x−ε)/ε) beyond."""

    epsilon: float

    def __post_init__(self) -> None:
        if not 0 < self.epsilon < math.inf:
            raise ValueError(f"the epsilon of α must be positive and finite, not {self.epsilon}")

    def log10(self, total: np.ndarray) -> np.ndarray:
        """log10 α(total), elementwise."""
        return np.minimum(0.0, -(np.asarray(total, dtype=float) - self.epsilon) / self.epsilon)

    def max_total(self, weight: np.ndarray) -> np.ndarray:
        """c(W): the largest total a group of joint probability 10^−W may hold."""
        return self.epsilon * (1.0 + np.asarray(weight, dtype=float))

    def to_json(self) -> dict[str, Any]:
        return {"kind": "exponential", "epsilon": self.epsilon}


@dataclass(frozen=True)
class TableAlpha(_AlphaFunction):
    """α from points (total x, acceptable probability a), x increasing, a in (0, 1] and
    non-increasing. Between two points log10 α is linear (each piece decays exponentially,
    like the paper's example); before the first point α is the first point's value; beyond
    the last point α is 0: no larger total is acceptable at any risk."""

    points: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError("an α table needs at least one point")
        xs, probabilities = zip(*self.points, strict=True)
        if not all(math.isfinite(x) for x in xs) or any(b <= a for a, b in pairwise(xs)):
            raise ValueError("the totals of an α table must be finite and increasing")
        if not all(0 < a <= 1 for a in probabilities):
            raise ValueError("the probabilities of an α table must be in (0, 1]")
        if any(b > a for a, b in pairwise(probabilities)):
            raise ValueError("the probabilities of an α table must not increase")

    @property
    def _xs(self) -> np.ndarray:
        return np.array([x for x, _ in self.points])

    @property
    def _logs(self) -> np.ndarray:
        return np.log10([a for _, a in self.points])

    def log10(self, total: np.ndarray) -> np.ndarray:
        """log10 α(total), elementwise (−inf beyond the last point)."""
        total = np.asarray(total, dtype=float)
        inside = np.interp(total, self._xs, self._logs)
        return np.where(total > self._xs[-1], -np.inf, inside)

    def max_total(self, weight: np.ndarray) -> np.ndarray:
        """c(W): the largest total x with log10 α(x) ≥ −W (−inf when there is none)."""
        xs, logs = self._xs, self._logs
        target = -np.asarray(weight, dtype=float)
        # Points with log α ≥ target form a prefix; `last` is its final index.
        last = len(logs) - 1 - np.searchsorted(logs[::-1], target, side="left")
        segment = np.clip(last, 0, len(xs) - 2) if len(xs) > 1 else np.zeros_like(last)
        following = np.minimum(segment + 1, len(xs) - 1)
        drop = logs[segment] - logs[following]
        fraction = np.divide(logs[segment] - target, drop, out=np.zeros_like(target),
                             where=drop > 0)
        between = xs[segment] + (xs[following] - xs[segment]) * fraction
        return np.where(last < 0, -np.inf, np.where(last == len(xs) - 1, xs[-1], between))

    def to_json(self) -> dict[str, Any]:
        return {"kind": "table", "points": [list(point) for point in self.points]}


Alpha = ExponentialAlpha | TableAlpha


def alpha_from_json(data: Mapping[str, Any]) -> Alpha:
    """The inverse of `to_json` of either α."""
    if data.get("kind") == "exponential":
        return ExponentialAlpha(float(data["epsilon"]))
    if data.get("kind") == "table":
        return TableAlpha(tuple((float(x), float(a)) for x, a in data["points"]))
    raise ValueError(f"unknown α: {data!r}")


@dataclass(frozen=True)
class Verification:
    """The result of checking a distribution. `margin` is log10 α(Σε) − log10 Π p of the
    tightest group found (negative: that group breaks its limit)."""

    method: str
    groups_checked: int
    alpha_risky: bool
    tightest: tuple[str, ...]
    margin: float
    monotone: bool
    positive: bool

    @property
    def ok(self) -> bool:
        return self.alpha_risky and self.monotone and self.positive


def plan_budgets(risks: Mapping[str, float], alpha: Alpha) -> dict[str, float]:
    """The optimal (leximin, see TIE_BREAK) α-risky monotone budgets, by analyst name.

    `risks` maps each analyst to their disclosure probability p in (0, 1]; p = 1 is the
    classic model where everything an analyst learns is assumed public. Raises ValueError
    when no distribution gives everyone a positive budget, or for a table α with more
    than MAX_SUBSET_ANALYSTS analysts.
    """
    if isinstance(alpha, ExponentialAlpha):
        weights = _weights(risks)
        level = _water_level(sorted(weights.values()))
        return {name: alpha.epsilon * max(w, level) for name, w in weights.items()}
    return plan_by_subsets(risks, alpha)


def _weights(risks: Mapping[str, float]) -> dict[str, float]:
    bad = [f"{name}={p}" for name, p in risks.items() if not 0 < p <= 1]
    if bad:
        raise ValueError(f"disclosure probabilities must be in (0, 1]: {', '.join(bad)}")
    # 0.0, not -0.0, for p = 1: it is printed.
    return {name: -math.log10(p) + 0.0 for name, p in risks.items()}


def _water_level(weights: list[float]) -> float:
    """L (in units of ε) with Σ max(0, L − w) = 1, for weights in increasing order.

    The riskiest analysts (smallest w) share one ε above their weights, levelled up
    together; everyone whose weight is above the level keeps ε·w, which alone risks
    nothing beyond what α allows for a group of joint probability 10^−w.
    """
    total = 0.0
    for count, weight in enumerate(weights, start=1):
        total += weight
        level = (1.0 + total) / count
        if count == len(weights) or level <= weights[count]:
            return level
    return math.inf  # no analysts: nothing to level


def plan_by_subsets(risks: Mapping[str, float], alpha: Alpha) -> dict[str, float]:
    """The leximin α-risky monotone budgets by progressive filling over every group.

    Works for any α; enumerates all 2^n groups, so n ≤ MAX_SUBSET_ANALYSTS. The budgets
    rise together; when a group reaches its limit c(W_S), its members and every riskier
    analyst (who may not get more) stop, and the others go on rising.
    """
    weights = _weights(risks)
    _check_group_count(len(weights))
    names = sorted(weights, key=lambda name: (weights[name], name))
    ordered = np.array([weights[name] for name in names])
    capacity = alpha.max_total(_subset_sums(ordered))[1:]
    top = _subset_top(len(names))[1:]
    budgets = np.zeros(len(names))
    stopped = 0  # analysts [0, stopped) have their final budget
    while stopped < len(names):
        rising = np.arange(len(names)) >= stopped
        fixed = _subset_sums(np.where(rising, 0.0, budgets))[1:]
        counts = _subset_sums(rising.astype(float))[1:]
        room = np.full_like(capacity, np.inf)
        np.divide(capacity - fixed, counts, out=room, where=counts > 0)
        level = float(room.min())
        if not level > 0:
            raise ValueError(_no_positive_budget(names, capacity, top, room))
        budgets[rising] = level
        tight = room <= level * (1 + _TIGHT)
        stopped = int(top[tight].max()) + 1
    return dict(zip(names, budgets.tolist(), strict=True))


def _no_positive_budget(names: list[str], capacity: np.ndarray, top: np.ndarray,
                        room: np.ndarray) -> str:
    mask = int(np.argmin(room)) + 1
    group = [names[i] for i in range(int(top[mask - 1]) + 1) if mask >> i & 1]
    return (f"α allows no positive budget for the group {', '.join(group)}: its largest "
            f"acceptable total is {capacity[mask - 1]:g}")


def _check_group_count(count: int) -> None:
    if count > MAX_SUBSET_ANALYSTS:
        raise ValueError(
            f"{count} analysts: checking every group works up to {MAX_SUBSET_ANALYSTS} "
            "analysts (2^n groups); use the exponential α (--epsilon) for more")


def _subset_sums(values: np.ndarray) -> np.ndarray:
    """Σ_{i∈S} values[i] for every S, indexed by the bit mask of S (bit i = element i)."""
    sums = np.zeros(1)
    for value in values:
        sums = np.concatenate((sums, sums + value))
    return sums


def _subset_top(count: int) -> np.ndarray:
    """The highest element of every S, indexed by bit mask (−1 for the empty set)."""
    top = np.full(1, -1)
    for index in range(count):
        top = np.concatenate((top, np.full(len(top), index)))
    return top


def verify_by_subsets(risks: Mapping[str, float], budgets: Mapping[str, float],
                      alpha: Alpha) -> Verification:
    """Check the paper's Definition 3 literally on every group (n ≤ MAX_SUBSET_ANALYSTS),
    plus monotonicity and positivity."""
    weights = _weights(risks)
    _check_group_count(len(weights))
    names = sorted(weights)
    totals = _subset_sums(np.array([budgets[name] for name in names]))[1:]
    weight_sums = _subset_sums(np.array([weights[name] for name in names]))[1:]
    margins = _margin(alpha, totals, weight_sums)
    worst = int(np.argmin(margins))  # the group of bit mask worst + 1 (no empty group)
    return Verification(
        method="every group", groups_checked=len(margins),
        alpha_risky=bool(margins[worst] >= 0),
        tightest=tuple(name for i, name in enumerate(names) if (worst + 1) >> i & 1),
        margin=float(margins[worst]), monotone=is_monotone(risks, budgets),
        positive=all(budgets[name] > 0 for name in names))


def verify_exponential(risks: Mapping[str, float], budgets: Mapping[str, float],
                       alpha: ExponentialAlpha) -> Verification:
    """The same check in O(n) for the exponential α, on its tightest group only: the
    analysts with ε_u > ε·w_u (every other group is within its limit if this one is)."""
    weights = _weights(risks)
    tightest = tuple(sorted(n for n, w in weights.items() if budgets[n] > alpha.epsilon * w))
    total = sum(budgets[name] for name in tightest)
    margin = _margin(alpha, total, sum(weights[name] for name in tightest))
    return Verification(
        method="tightest group of the exponential alpha", groups_checked=1,
        alpha_risky=bool(margin >= 0), tightest=tightest, margin=float(margin),
        monotone=is_monotone(risks, budgets),
        positive=all(budget > 0 for budget in budgets.values()))


def _margin(alpha: Alpha, total: Any, weight: Any) -> np.ndarray:
    """log10 α(total) − log10 Π p for groups of this total budget and weight Σ w."""
    return alpha.log10(np.asarray(total) * (1 - TOLERANCE)) + np.asarray(weight)


def verify(risks: Mapping[str, float], budgets: Mapping[str, float],
           alpha: Alpha) -> list[Verification]:
    """Every check that applies: the exponential α's fast check, and the group-by-group
    one whenever the number of analysts allows it."""
    checks = []
    if isinstance(alpha, ExponentialAlpha):
        checks.append(verify_exponential(risks, budgets, alpha))
    if len(risks) <= MAX_SUBSET_ANALYSTS:
        checks.append(verify_by_subsets(risks, budgets, alpha))
    return checks


def is_monotone(risks: Mapping[str, float], budgets: Mapping[str, float]) -> bool:
    """(p₁ − p₂)·(ε₁ − ε₂) ≤ 0 for every pair: a riskier analyst never gets more.

    Analysts of equal risk are not compared, as in the seed.
    """
    by_risk: dict[float, list[float]] = {}
    for name, p in risks.items():
        by_risk.setdefault(p, []).append(budgets[name])
    smallest_safer = math.inf  # smallest budget among the analysts less risky so far
    for p in sorted(by_risk):
        group = by_risk[p]
        if max(group) > smallest_safer * (1 + TOLERANCE):
            return False
        smallest_safer = min(smallest_safer, *group)
    return True
