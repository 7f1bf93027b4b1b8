"""Elastic stability as a function of k, and the smooth sensitivity built from it.

FLEX (Johnson, Near, Song, VLDB 2018) gives every relation a stability S(k) and every
column a max frequency mf_k(c), both functions of the distance k from the real database.
They are built from polynomials in k (maxFreq + k for a private column) with +, ×, max and
min, so they are represented here as small expression trees that keep integer
coefficients exact and evaluate at many k at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np


@dataclass(frozen=True)
class Elastic:
    """A non-negative, non-decreasing function of k ≥ 0.

    `op` is "poly" (then `coefficients`, constant term first) or one of "sum", "product",
    "max", "min" over `parts`. Build values with the helpers below, which fold constants.
    "unmeasured" stands for the frequency of the column `label` until it is measured: it
    may be carried around, but using it (see `unmeasured_columns`) needs the metric.
    """

    op: str
    coefficients: tuple[int, ...] = ()
    parts: tuple[Elastic, ...] = ()
    label: tuple[str, str] | None = None

    ZERO: ClassVar[Elastic]
    ONE: ClassVar[Elastic]

    def unmeasured_columns(self) -> set[tuple[str, str]]:
        if self.op == "unmeasured":
            return {self.label} if self.label else set()
        return set().union(*(part.unmeasured_columns() for part in self.parts))

    @property
    def depends_on_k(self) -> bool:
        if self.op == "poly":
            return any(self.coefficients[1:])
        return any(part.depends_on_k for part in self.parts)

    @property
    def degree(self) -> int:
        if self.op == "poly":
            nonzero = [i for i, c in enumerate(self.coefficients) if c]
            return nonzero[-1] if nonzero else 0
        degrees = [part.degree for part in self.parts] or [0]
        return sum(degrees) if self.op == "product" else max(degrees)

    def at(self, k: int) -> int:
        """The exact value at one integer k."""
        if self.op == "poly":
            return sum(c * k**i for i, c in enumerate(self.coefficients))
        values = [part.at(k) for part in self.parts]
        return _COMBINE_EXACT[self.op](values)

    def over(self, ks: np.ndarray) -> np.ndarray:
        """Values at every k of an array, as float64 (exact for integers below 2**53)."""
        if self.op == "poly":
            result = np.zeros_like(ks, dtype=np.float64)
            for power, coefficient in enumerate(self.coefficients):
                if coefficient:
                    result += coefficient * ks.astype(np.float64) ** power
            return result
        return _COMBINE_ARRAYS[self.op]([part.over(ks) for part in self.parts])

    def __str__(self) -> str:
        if self.op == "poly":
            terms = [f"{c}" if i == 0 else f"{c}k" if i == 1 else f"{c}k^{i}"
                     for i, c in enumerate(self.coefficients) if c]
            return " + ".join(terms) or "0"
        if self.op in ("max", "min"):
            return f"{self.op}({', '.join(map(str, self.parts))})"
        joiner = " + " if self.op == "sum" else " · "
        return "(" + joiner.join(map(str, self.parts)) + ")"


_COMBINE_EXACT: dict[str, Callable[[list[int]], int]] = {
    "sum": sum, "product": math.prod, "max": max, "min": min}
_COMBINE_ARRAYS = {
    "sum": lambda arrays: np.sum(arrays, axis=0),
    "product": lambda arrays: np.prod(arrays, axis=0),
    "max": lambda arrays: np.max(arrays, axis=0),
    "min": lambda arrays: np.min(arrays, axis=0),
}


def poly(*coefficients: int) -> Elastic:
    trimmed = list(coefficients)
    while len(trimmed) > 1 and trimmed[-1] == 0:
        trimmed.pop()
    return Elastic("poly", tuple(trimmed or [0]))


Elastic.ZERO = poly(0)
Elastic.ONE = poly(1)


def unmeasured(table: str, column: str) -> Elastic:
    return Elastic("unmeasured", label=(table, column))


def constant(value: int) -> Elastic:
    return poly(value)


def plus_k(value: int) -> Elastic:
    """maxFreq + k: a private column's frequency at distance k."""
    return poly(value, 1)


def add(*parts: Elastic) -> Elastic:
    polys = [p for p in parts if p.op == "poly"]
    others = [p for p in parts if p.op != "poly"]
    length = max((len(p.coefficients) for p in polys), default=1)
    folded = poly(*(sum(p.coefficients[i] if i < len(p.coefficients) else 0 for p in polys)
                    for i in range(length)))
    if not others:
        return folded
    if folded != Elastic.ZERO:
        others.append(folded)
    return others[0] if len(others) == 1 else Elastic("sum", parts=tuple(others))


def multiply(*parts: Elastic) -> Elastic:
    if any(p == Elastic.ZERO for p in parts):
        return Elastic.ZERO
    polys = [p for p in parts if p.op == "poly"]
    others = [p for p in parts if p.op != "poly"]
    product = Elastic.ONE
    for p in polys:
        product = _poly_product(product, p)
    if not others:
        return product
    if product != Elastic.ONE:
        others.append(product)
    return others[0] if len(others) == 1 else Elastic("product", parts=tuple(others))


def _poly_product(a: Elastic, b: Elastic) -> Elastic:
    coefficients = [0] * (len(a.coefficients) + len(b.coefficients) - 1)
    for i, x in enumerate(a.coefficients):
        for j, y in enumerate(b.coefficients):
            coefficients[i + j] += x * y
    return poly(*coefficients)


def maximum(*parts: Elastic) -> Elastic:
    return _extremum("max", parts)


def minimum(*parts: Elastic) -> Elastic:
    return _extremum("min", parts)


def _extremum(op: str, parts: tuple[Elastic, ...]) -> Elastic:
    unique = _drop_dominated(op, tuple(dict.fromkeys(parts)))
    if len(unique) == 1:
        return unique[0]
    if all(p.op == "poly" and not p.depends_on_k for p in unique):
        pick = max if op == "max" else min
        return constant(pick(p.coefficients[0] for p in unique))
    return Elastic(op, parts=unique)


def _dominates(a: Elastic, b: Elastic) -> bool:
    """a ≥ b for every k ≥ 0, known from the coefficients alone."""
    width = max(len(a.coefficients), len(b.coefficients))
    pad = [0] * width
    return all(x >= y for x, y in zip((list(a.coefficients) + pad)[:width],
                                      (list(b.coefficients) + pad)[:width], strict=True))


def _drop_dominated(op: str, parts: tuple[Elastic, ...]) -> tuple[Elastic, ...]:
    """Polynomials that can never be the max (or min) are dropped: max(1 + k, 100 + k)."""
    polys = [p for p in parts if p.op == "poly"]
    kept = []
    for part in parts:
        if part.op == "poly" and any(
                other is not part and other != part and
                (_dominates(other, part) if op == "max" else _dominates(part, other))
                for other in polys):
            continue
        kept.append(part)
    return tuple(kept)


@dataclass(frozen=True)
class Smooth:
    """The smooth bound S* = max_k e^(−βk)·ES(k), reached at k = k_star."""

    beta: float
    sensitivity: float
    k_star: int


# The longest scan of k the smooth sensitivity may take (a few tens of milliseconds).
MAX_SMOOTH_STEPS = 5_000_000


class SmoothScanTooLong(ValueError):
    """ε or δ so small that the exact scan of k would not end in reasonable time."""


def smooth_sensitivity(elastic: Elastic, epsilon: float, delta: float,
                       private_tables: int) -> Smooth:
    """S* for an (ε, δ) release with β = ε / (2 ln(2/δ)) (FLEX, after Nissim,
    Raskhodnikova & Smith's smooth sensitivity).

    ES(k) is a polynomial-like function of degree at most D = `private_tables`, so
    e^(−βk)·ES(k) decreases for every k > D/β: scanning 0 … ⌈D/β⌉ finds the exact maximum.
    """
    if not 0 < delta < 1:
        raise ValueError("smooth sensitivity needs 0 < delta < 1")
    beta = epsilon / (2 * math.log(2 / delta))
    degree = max(private_tables, elastic.degree)
    last = math.ceil(degree / beta) if degree else 0
    if last > MAX_SMOOTH_STEPS:
        raise SmoothScanTooLong(f"epsilon {epsilon:g} with delta {delta:g} would need a "
                                f"smooth-sensitivity scan of {last} steps, more than "
                                f"{MAX_SMOOTH_STEPS}")
    ks = np.arange(last + 1)
    weighted = np.exp(-beta * ks) * elastic.over(ks)
    k_star = int(np.argmax(weighted))
    return Smooth(beta, float(math.exp(-beta * k_star) * elastic.at(k_star)), k_star)
