"""Tests for mechanisms/: exact samplers, calibration and accuracy bounds.

Every statistical test uses a fixed seed and a fixed tolerance, so results are
deterministic; tolerances are several standard errors wide so a change of seed would
not make them fail either.
"""

from __future__ import annotations

import math
import os
import threading
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from mechanisms.accuracy import laplace_bound, shifted_laplace_bound
from mechanisms.laplace import (
    laplace_scale,
    sample_bernoulli_exp,
    sample_discrete_laplace,
    shifted_laplace_count,
)
from mechanisms.random_source import RandomSource, SecureRandomSource, uniform
from mechanisms.seeded_source import SeededRandomSource as SeededSource

pytestmark = pytest.mark.statistical

N_DRAWS = 100_000


def dlap_p(scale: Fraction | float) -> float:
    return math.exp(-1.0 / float(scale))


def dlap_pmf(x: int, p: float) -> float:
    return (1 - p) / (1 + p) * p ** abs(x)


def dlap_sf(k: int, p: float) -> float:
    """P(X >= k) for X ~ DLap with parameter p."""
    if k >= 1:
        return p**k / (1 + p)
    return 1.0 - p ** (1 - k) / (1 + p)


def exact_tail(scale: float, mu: float, alpha: float) -> float:
    """Exact P(|round(mu) + DLap(scale)| > alpha)."""
    p = dlap_p(scale)
    j = round(mu)
    k = math.floor(alpha) + 1  # |N| > alpha  <=>  |N| >= k for integer N
    if k <= 0:
        return 1.0
    return dlap_sf(k - j, p) + dlap_sf(k + j, p)


SCALES = [Fraction(1, 2), Fraction(1), Fraction(10, 3)]


@pytest.fixture(scope="module")
def dlap_draws() -> dict[Fraction, np.ndarray]:
    """100k seeded draws per scale, shared by the distribution tests."""
    out = {}
    for i, scale in enumerate(SCALES):
        rng = SeededSource(1000 + i)
        out[scale] = np.array([sample_discrete_laplace(scale, rng) for _ in range(N_DRAWS)])
    return out


# --- random source -----------------------------------------------------------------


def test_secure_source_randbelow_in_range() -> None:
    src = SecureRandomSource()
    assert isinstance(src, RandomSource)
    for n in (1, 2, 7, 2**64 + 3):
        for _ in range(200):
            assert 0 <= src.randbelow(n) < n
    assert {src.randbelow(2) for _ in range(200)} == {0, 1}
    with pytest.raises(ValueError):
        src.randbelow(0)


@pytest.mark.parametrize("lo,hi", [(0.0, 1.0), (-3.5, 2.25), (1e-300, 2e-300), (-1e308, 1e308)])
def test_uniform_within_bounds(lo: float, hi: float) -> None:
    for src in (SecureRandomSource(), SeededSource(7)):
        xs = [uniform(lo, hi, src) for _ in range(2000)]
        assert all(lo <= x <= hi for x in xs)


def test_uniform_endpoints_and_spread() -> None:
    class Fixed:
        def __init__(self, value: int) -> None:
            self.value = value

        def randbelow(self, n: int) -> int:
            return min(self.value, n - 1)

    assert uniform(-2.0, 5.0, Fixed(0)) == -2.0
    assert uniform(-2.0, 5.0, Fixed(2**60)) == 5.0
    assert uniform(4.0, 4.0, SeededSource(1)) == 4.0
    xs = np.array([uniform(10.0, 20.0, SeededSource(s)) for s in range(5000)])
    assert abs(xs.mean() - 15.0) < 0.15  # sd of the mean is 10/sqrt(12*5000) ~ 0.04
    with pytest.raises(ValueError):
        uniform(1.0, 0.0, SeededSource(1))
    with pytest.raises(ValueError):
        uniform(0.0, math.inf, SeededSource(1))


# --- calibration -------------------------------------------------------------------


def test_laplace_scale_exact() -> None:
    assert laplace_scale(1, 0.1) == Fraction(10)
    assert laplace_scale(2.0, 0.3) == Fraction(20, 3)
    assert laplace_scale(Fraction(1, 3), 1) == Fraction(1, 3)
    assert laplace_scale(0, 0.5) == 0
    assert isinstance(laplace_scale(1.0, 1.0), Fraction)
    for bad in [(1, 0), (1, -0.1), (-1, 1), (1, math.nan), (math.inf, 1)]:
        with pytest.raises(ValueError):
            laplace_scale(*bad)


# --- Bernoulli(exp(-gamma)) --------------------------------------------------------


@pytest.mark.parametrize(
    "gamma", [Fraction(1, 3), Fraction(1), Fraction(3, 2), Fraction(7, 3), Fraction(5, 2)]
)
def test_bernoulli_exp_frequency(gamma: Fraction) -> None:
    n = 40_000
    rng = SeededSource(int(gamma * 100))
    hits = sum(sample_bernoulli_exp(gamma, rng) for _ in range(n))
    q = math.exp(-gamma)
    se = math.sqrt(q * (1 - q) / n)
    assert abs(hits / n - q) < 5 * se


def test_bernoulli_exp_edge_cases() -> None:
    rng = SeededSource(3)
    assert all(sample_bernoulli_exp(Fraction(0), rng) for _ in range(1000))
    # exp(-40) ~ 4e-18: never seen in 1000 draws, and terminates quickly.
    assert not any(sample_bernoulli_exp(Fraction(40), rng) for _ in range(1000))
    with pytest.raises(ValueError):
        sample_bernoulli_exp(Fraction(-1, 2), rng)


# --- discrete Laplace --------------------------------------------------------------


@pytest.mark.parametrize("scale", SCALES)
def test_discrete_laplace_chi_square(scale: Fraction, dlap_draws) -> None:
    draws = dlap_draws[scale]
    n = len(draws)
    p = dlap_p(scale)
    # Largest K with every bin -K..K and both merged tails expecting >= 5 draws.
    k = 0
    while n * dlap_pmf(k + 1, p) >= 5 and n * dlap_sf(k + 2, p) >= 5:
        k += 1
    support = np.arange(-k, k + 1)
    observed = [int(np.sum(draws < -k))]
    observed += [int(np.sum(draws == x)) for x in support]
    observed += [int(np.sum(draws > k))]
    tail = n * dlap_sf(k + 1, p)
    expected = [tail] + [n * dlap_pmf(int(x), p) for x in support] + [tail]
    assert min(expected) >= 5
    assert len(expected) >= 5
    _, pvalue = stats.chisquare(observed, expected)
    assert pvalue > 1e-3


@pytest.mark.parametrize("scale", SCALES)
def test_discrete_laplace_mean_and_variance(scale: Fraction, dlap_draws) -> None:
    draws = dlap_draws[scale].astype(float)
    n = len(draws)
    p = dlap_p(scale)
    var = 2 * p / (1 - p) ** 2
    assert abs(draws.mean()) < 5 * math.sqrt(var / n)
    # Kurtosis of DLap is below 6, so the sample variance has relative sd < sqrt(5/n) ~ 0.7%.
    assert draws.var() == pytest.approx(var, rel=0.05)
    # Symmetry: P(X > 0) = P(X < 0) = p/(1+p).
    assert np.mean(draws > 0) == pytest.approx(p / (1 + p), abs=0.01)
    assert np.mean(draws < 0) == pytest.approx(p / (1 + p), abs=0.01)


def test_discrete_laplace_scale_zero_and_invalid() -> None:
    rng = SeededSource(5)
    assert all(sample_discrete_laplace(Fraction(0), rng) == 0 for _ in range(100))
    with pytest.raises(ValueError):
        sample_discrete_laplace(Fraction(-1), rng)


def test_discrete_laplace_large_irregular_scale() -> None:
    # FLEX reference scale: a Fraction with a large denominator.
    scale = Fraction(repr(5409.181856298167))
    rng = SeededSource(11)
    draws = np.array([sample_discrete_laplace(scale, rng) for _ in range(5000)], dtype=float)
    p = dlap_p(scale)
    sd = math.sqrt(2 * p) / (1 - p)
    assert abs(draws.mean()) < 5 * sd / math.sqrt(len(draws))
    assert draws.std() == pytest.approx(sd, rel=0.1)


def test_secure_source_drives_sampler() -> None:
    src = SecureRandomSource()
    xs = [sample_discrete_laplace(Fraction(3), src) for _ in range(200)]
    assert all(isinstance(x, int) for x in xs)
    assert len(set(xs)) > 5


# --- shifted Laplace release -------------------------------------------------------


@pytest.mark.parametrize("shift", [2.6, -2.5, 0.0, 7.4])
def test_shifted_laplace_count_mean(shift: float) -> None:
    scale = Fraction(2)
    true_value = 100
    n = 20_000
    rng = SeededSource(int(shift * 10) + 50)
    xs = np.array([shifted_laplace_count(true_value, scale, shift, rng) for _ in range(n)])
    assert xs.dtype.kind == "i"
    p = dlap_p(scale)
    se = math.sqrt(2 * p / (1 - p) ** 2 / n)
    assert abs(xs.mean() - (true_value + round(shift))) < 5 * se


def test_shifted_laplace_count_scale_zero_is_deterministic() -> None:
    assert shifted_laplace_count(10, Fraction(0), 2.6, SeededSource(0)) == 13
    with pytest.raises(ValueError):
        shifted_laplace_count(10, Fraction(1), math.nan, SeededSource(0))


# --- accuracy bound ----------------------------------------------------------------

BOUND_SCALES = [0.1, 0.5, 1.0, 10 / 3, 10.0, 50.0, 1000.0]
BOUND_SHIFTS = [0.0, 0.4, 0.5, 2.5, 3.0, 5.0, 12.7, 100.0]


@pytest.mark.parametrize("scale", BOUND_SCALES)
@pytest.mark.parametrize("max_shift", BOUND_SHIFTS)
@pytest.mark.parametrize("beta", [0.05, 0.01, 0.3])
def test_bound_exact_coverage_and_tightness(scale: float, max_shift: float, beta: float) -> None:
    alpha = shifted_laplace_bound(scale, max_shift, beta)
    # Valid for every shift in [-M, M] (grid includes all rounding ties).
    grid = np.linspace(-max_shift, max_shift, 41)
    worst = max(exact_tail(scale, float(mu), alpha) for mu in grid)
    assert worst <= beta * (1 + 1e-9)
    # Tight: one less already fails at the worst shift, unless the bound is the shift itself.
    m = math.floor(max_shift + 0.5)
    if alpha > m + 1e-9:
        assert exact_tail(scale, m, alpha - 1) > beta * (1 - 1e-9)
    # Never more than 1/2 above the continuous Theorem 2 bound at the rounded shift.
    continuous = scale * math.log(math.cosh(m / scale) / beta) if m / scale < 700 else math.inf
    assert alpha <= max(m, continuous) + 0.5 + 1e-6


@pytest.mark.parametrize(
    "seed,scale,mu",
    [
        (1, 1.0, 0.0),
        (2, 1.0, 5.0),
        (3, 1.0, -2.5),
        (4, 10 / 3, 5.0),
        (5, 10 / 3, -4.6),
        (6, 0.5, 5.0),
        (7, 25.0, 5.0),
        (8, 25.0, 0.3),
    ],
)
def test_bound_empirical_coverage(seed: int, scale: float, mu: float) -> None:
    max_shift = 5.0
    n = 20_000
    beta = 0.05
    alpha = shifted_laplace_bound(scale, max_shift, beta)
    rng = SeededSource(2000 + seed)
    frac = Fraction(repr(scale))
    noise = np.array([shifted_laplace_count(0, frac, mu, rng) for _ in range(n)])
    freq = np.mean(np.abs(noise) > alpha)
    # At the worst shift the true tail is close to beta; allow 4 standard errors.
    assert freq <= beta + 4 * math.sqrt(beta * (1 - beta) / n)


def test_bound_not_loose_for_large_scale() -> None:
    scale = Fraction(50)
    rng = SeededSource(99)
    noise = np.abs([sample_discrete_laplace(scale, rng) for _ in range(20_000)])
    q95 = np.quantile(noise, 0.95)
    alpha = laplace_bound(float(scale))
    assert np.mean(noise > alpha) <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / len(noise))
    assert alpha <= 1.5 * q95
    assert alpha == pytest.approx(50 * math.log(20), abs=0.6)


def test_bound_special_cases() -> None:
    assert shifted_laplace_bound(0, 2.6) == 3.0
    assert shifted_laplace_bound(0.0, 0.0) == 0.0
    assert laplace_bound(0) == 0.0
    assert laplace_bound(10.0) == shifted_laplace_bound(10.0, 0.0)
    assert laplace_bound(Fraction(10, 3)) == laplace_bound(10 / 3)
    # Monotone in the shift bound and in the scale; no overflow for huge shifts.
    assert shifted_laplace_bound(5.0, 10.0) >= shifted_laplace_bound(5.0, 3.0)
    assert laplace_bound(20.0) >= laplace_bound(10.0)
    assert math.isfinite(shifted_laplace_bound(1.0, 1e6))
    for bad in [
        (-1.0, 0.0, 0.05),
        (1.0, -1.0, 0.05),
        (1.0, 0.0, 0.0),
        (1.0, 0.0, 1.0),
        (math.nan, 0.0, 0.05),
    ]:
        with pytest.raises(ValueError):
            shifted_laplace_bound(*bad)


def test_secure_source_reads_the_csprng_in_blocks_each_byte_once() -> None:
    """SecureRandomSource keeps a block of os.urandom per thread: bounds wider than the
    block still draw uniformly, two threads never hand out the same bytes, and a forked
    child does not draw the parent's unread bytes (it would repeat the parent's noise)."""
    src = SecureRandomSource()
    huge = 1 << (8 * 5000)  # more bytes than one block
    assert 0 <= src.randbelow(huge) < huge and src.randbelow(huge) != src.randbelow(huge)
    drawn: list[int] = []
    threads = [threading.Thread(target=lambda: drawn.extend(
        src.randbelow(1 << 64) for _ in range(500))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(drawn)) == len(drawn) == 2000
    src.randbelow(2)  # the parent's block holds unread bytes now
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: its next 32 bytes, then out
        os.write(write, src.randbelow(1 << 256).to_bytes(32, "big"))
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    from_child = os.read(read, 32)
    os.close(read)
    assert len(from_child) == 32
    assert from_child != src.randbelow(1 << 256).to_bytes(32, "big")
