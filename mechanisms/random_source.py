"""Sources of randomness for the noise mechanisms.

Production code uses :class:`SecureRandomSource` only. Tests inject their own seeded
source through the :class:`RandomSource` protocol; no predictable source lives here, so
one cannot be wired into the proxy by mistake.
"""

from __future__ import annotations

import math
import os
import threading
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


# Bytes of the operating system's CSPRNG read at once, per thread. One exact discrete
# Laplace draw takes several uniform draws, and a fresh private count (its τ chosen, then
# its noise) dozens: a getrandom() call each doubled the cost of a draw.
_BUFFER_BYTES = 4096


class _Buffers(threading.local):
    """Each thread's unread CSPRNG bytes (never shared between threads)."""

    def __init__(self) -> None:
        self.data = b""
        self.at = 0


_buffers = _Buffers()


def _forget_buffers() -> None:
    """In a forked child (only the forking thread lives on): the parent's unread bytes
    are the parent's alone, or the child would draw the parent's noise again."""
    _buffers.data, _buffers.at = b"", 0


os.register_at_fork(after_in_child=_forget_buffers)


class SecureRandomSource:
    """Cryptographically secure source: the operating system's CSPRNG (os.urandom), read
    _BUFFER_BYTES at a time per thread. `randbelow` is what `secrets.randbelow` does
    (the fewest whole bytes holding n's bits, shifted down to those bits, drawn again
    while not below n), from the buffer."""

    def randbelow(self, n: int) -> int:
        """Return a uniform integer in [0, n) from the operating system's CSPRNG."""
        if n <= 0:
            raise ValueError(f"randbelow needs a positive bound, got {n}")
        bits = n.bit_length()
        size = (bits + 7) // 8
        extra = size * 8 - bits
        while True:
            value = int.from_bytes(_random_bytes(size), "big") >> extra
            if value < n:
                return value


def _random_bytes(size: int) -> bytes:
    """`size` bytes of the CSPRNG, each handed out once."""
    buffers = _buffers
    at = buffers.at
    if at + size > len(buffers.data):
        if size > _BUFFER_BYTES:
            return os.urandom(size)
        buffers.data, at = os.urandom(_BUFFER_BYTES), 0
    buffers.at = at + size
    return buffers.data[at:at + size]


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
