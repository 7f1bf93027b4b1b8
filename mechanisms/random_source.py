"""Sources of randomness for the noise mechanisms.

Production code uses :class:`SecureRandomSource` only. Tests inject their own seeded
source through the :class:`RandomSource` protocol; no predictable source lives here, so
one cannot be wired into the proxy by mistake.
"""

from __future__ import annotations

import math
import secrets
from typing import Protocol, runtime_checkable

# 53 bits fill a double's significand, so every draw maps to a distinct float in [0, 1].
_UNIFORM_BITS = 53
_UNIFORM_STEPS = 1 << _UNIFORM_BITS


@runtime_checkable
class RandomSource(Protocol):
    """Anything that can draw uniform integers; all samplers use only this."""

    def randbelow(self, n: int) -> int:
        """Return a uniform integer in [0, n); ``n`` must be positive."""
        ...


class SecureRandomSource:
    """Cryptographically secure source backed by :func:`secrets.randbelow` (os.urandom)."""

    def randbelow(self, n: int) -> int:
        """Return a uniform integer in [0, n) from the operating system's CSPRNG."""
        if n <= 0:
            raise ValueError(f"randbelow needs a positive bound, got {n}")
        return secrets.randbelow(n)


def uniform(lo: float, hi: float, rng: RandomSource) -> float:
    """Return a uniform real in [lo, hi] built from 53 random bits of ``rng``.

    Meant for data-independent draws such as an analyst's shift μ_u; noise added to
    query answers must come from the exact discrete samplers instead.
    """
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"uniform needs finite bounds, got [{lo}, {hi}]")
    if lo > hi:
        raise ValueError(f"uniform needs lo <= hi, got [{lo}, {hi}]")
    # Dividing by 2^53 - 1 makes both endpoints reachable, as the closed interval promises.
    u = rng.randbelow(_UNIFORM_STEPS) / (_UNIFORM_STEPS - 1)
    # The convex combination cannot overflow even when hi - lo would.
    x = (1.0 - u) * lo + u * hi
    # Rounding can step one ulp outside the interval; clamp it back.
    return min(max(x, lo), hi)
