"""Exact rational reading of mechanism parameters and of true answers.

Samplers and calibrations work on :class:`~fractions.Fraction` so that no rounding of a
double can change the distribution that is actually sampled (Mironov, CCS 2012).
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

Real = int | float | Fraction | Decimal


def parameter(x: Real, name: str) -> Fraction:
    """Read a parameter (ε, Δ, a scale) as the user wrote it: floats by their repr.

    ``parameter(0.1, "epsilon") == Fraction(1, 10)``: the charge "ε = 0.1" means one
    tenth, not the double nearest to it. Raises ValueError for NaN or infinities.
    """
    if isinstance(x, Fraction):
        return x
    if isinstance(x, int):
        return Fraction(x)
    if isinstance(x, Decimal):
        if not x.is_finite():
            raise ValueError(f"{name} must be finite, got {x!r}")
        return Fraction(x)
    xf = float(x)
    if not math.isfinite(xf):
        raise ValueError(f"{name} must be finite, got {x!r}")
    # repr gives the shortest decimal that round-trips, i.e. what the user wrote.
    return Fraction(repr(xf))


def exact_value(x: Real, name: str = "value") -> Fraction:
    """Convert a true answer exactly (a double by its binary value, a NUMERIC as Decimal).

    Unlike :func:`parameter`, no reinterpretation: two answers at distance Δ stay at
    distance Δ, which the sensitivity argument of every mechanism relies on.
    """
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x!r}")
    if isinstance(x, Decimal) and not x.is_finite():
        raise ValueError(f"{name} must be finite, got {x!r}")
    return Fraction(x)
