"""A reproducible and therefore PREDICTABLE random source, for experiments and tests only.

Noise drawn from it protects nothing: whoever knows the seed knows the noise. It exists so
that `dpgate experiment` can be rerun with the same numbers (only when the operator asks
with ``--seed``, and its output says so) and so that tests are deterministic. The proxy
never imports this module (tests/test_mechanisms_sources.py checks it) and no setting
of dpgate.toml can select it: released answers always use
:class:`~mechanisms.random_source.SecureRandomSource`.
"""

from __future__ import annotations

import random


class SeededRandomSource:
    """Deterministic :class:`~mechanisms.random_source.RandomSource` (Mersenne Twister)."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def randbelow(self, n: int) -> int:
        """Return a uniform integer in [0, n), determined by the seed."""
        if n <= 0:
            raise ValueError(f"randbelow needs a positive bound, got {n}")
        return self._rng.randrange(n)
