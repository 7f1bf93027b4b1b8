"""The exponential mechanism, sampled exactly: most frequent category and quantiles.

McSherry & Talwar 2007: choose r with probability ∝ exp(ε·u(D, r)/(2Δu)).

How it is sampled, and why not with floats. Gumbel-max or inverse-CDF sampling on doubles
gives some candidates probability exactly 0 (an underflowed weight, a Gumbel variate that
cannot exceed ~38) on one database and not on its neighbour: an infinite privacy loss on
rare outputs, the exponential-mechanism form of Mironov's attack (see also Ilvento,
"Implementing the Exponential Mechanism with Base-2 Differential Privacy", CCS 2020, which
likewise replaces e by a base that exact arithmetic can handle). Here every step is exact
integer arithmetic on draws from the :class:`RandomSource`:

1. Base. Utilities are integers in units of Δu/R (R the public *resolution*), so a
   weight is ρ^d for an integer gap d = R·(u* − u)/Δu, with ρ = A/2^48 a dyadic just
   above exp(−ε/(2R)). The mechanism is thus exactly the exponential mechanism at
   ε' = 2R·ln(1/ρ) <= ε (ε − ε' < 10⁻⁷·ε for 10⁻⁶·R <= ε <= 30·R): ε-DP, never more.
2. Clamp. Gaps beyond T (where N·ρ^T < 2^−64, N the number of outputs) count as T. That
   is the exponential mechanism for u' = max(u, u* − T·Δu/R), and u' has sensitivity Δu
   because u and u* = max u do: still exactly ε'-DP, and accuracy moves by < 2^−64.
3. Sampling. A gap d is proposed with probability ∝ (multiplicity)·q_d, q_d a 128-bit
   upper bound of ρ^d (integer arithmetic, rounded up), and accepted with probability
   ρ^d/q_d >= 1 − 2^−70 by an exact comparison. The output distribution is exactly
   ∝ multiplicity·ρ^d, at a cost linear in the number of candidates.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, MutableSequence, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from mechanisms.numbers import Real, exact_value, parameter
from mechanisms.random_source import RandomSource

Category = TypeVar("Category", bound=Hashable)

_BASE_BITS = 48
_PRECISION = 128
_TAIL_BITS = 64
_FAST_BITS = 64
# Quantile levels are read to this denominator (0.1% steps): the resolution R is public.
_LEVEL_DENOMINATOR = 1000
# Default number of cells of a quantile's domain [lo, hi].
QUANTILE_GRID_BITS = 20


@dataclass(frozen=True)
class ExponentialBase:
    """ρ = numerator/2^48 >= exp(−ε/(2R)): one unit of utility gap (Δu/R) costs a factor ρ."""

    numerator: int
    resolution: int

    @property
    def log_inverse(self) -> float:
        """ln(1/ρ), the effective exponent per unit of gap."""
        # log1p keeps full precision when ρ is close to 1 (small ε).
        return -math.log1p(-(2**_BASE_BITS - self.numerator) / 2**_BASE_BITS)

    @property
    def epsilon(self) -> float:
        """ε' = 2R·ln(1/ρ) <= ε: the guarantee actually delivered."""
        return 2 * self.resolution * self.log_inverse


def exponential_base(epsilon: Real, resolution: int = 1) -> ExponentialBase:
    """The dyadic base of the exponential mechanism for ε at utility resolution R."""
    eps = parameter(epsilon, "epsilon")
    if eps <= 0:
        raise ValueError(f"epsilon must be positive, got {epsilon!r}")
    if not isinstance(resolution, int) or resolution < 1:
        raise ValueError(f"resolution must be a positive integer, got {resolution!r}")
    exponent = float(eps / (2 * resolution))
    # exp's error is far below one unit of 2^-48, so +1 guarantees ρ >= exp(−ε/(2R)).
    numerator = math.ceil(math.exp(-exponent) * 2**_BASE_BITS) + 1
    if numerator >= 2**_BASE_BITS:
        raise ValueError(f"epsilon {epsilon!r} is too small for utility resolution "
                         f"{resolution}: each unit of utility would weigh nothing")
    return ExponentialBase(numerator, resolution)


def _multiply(x: tuple[int, int], y: tuple[int, int], precision: int,
              up: bool) -> tuple[int, int]:
    """(m, e) meaning m·2^−e; the product rounded up (or down) to ``precision`` bits."""
    mantissa, exponent = x[0] * y[0], x[1] + y[1]
    excess = mantissa.bit_length() - precision
    if excess > 0:
        mantissa = -(-mantissa >> excess) if up else mantissa >> excess
        exponent -= excess
    return mantissa, exponent


def _power(numerator: int, gap: int, precision: int = _PRECISION,
           up: bool = True) -> tuple[int, int]:
    """(m, e): m·2^−e bounds (numerator/2^48)^gap above (or below), to a factor
    1 ± (4·gap + 128)·2^(1−precision).

    Each rounding costs a factor below 1 + 2^(1−precision); squaring doubles what a power
    already carries, so the gap's bits add up to at most 4·gap + 128 such factors.
    """
    result, power = (1, 0), (numerator, _BASE_BITS)
    while gap:
        if gap & 1:
            result = _multiply(result, power, precision, up)
        gap >>= 1
        if gap:
            power = _multiply(power, power, precision, up)
    return result


def _upper_powers(numerator: int, gaps: list[int]) -> dict[int, tuple[int, int]]:
    """Upper bounds of ρ^d for sorted gaps d, each from the previous one (one product each).

    The factors ρ^(step) add up to at most (4·d + 129·K)·2^−127 of relative error for K
    gaps. Gaps never exceed the clamp T < 2^54 (ρ <= 1 − 2^−48 and N < e^20 outputs), so
    with up to 2^40 candidates q_d stays within 1 + 2^−70 of ρ^d and the acceptance
    ratio of :func:`_accept_rounding` above 1 − 2^−64, as its fast path requires.
    """
    bounds, factors = {}, {}
    previous_gap, previous = 0, (1, 0)
    for gap in gaps:
        step = gap - previous_gap
        if step not in factors:
            factors[step] = _power(numerator, step)
        previous = _multiply(previous, factors[step], _PRECISION, up=True)
        previous_gap = gap
        bounds[gap] = previous
    return bounds


def _ratio(x: tuple[int, int], y: tuple[int, int]) -> Fraction:
    """x/y for two (m, e) = m·2^−e; only the difference of the exponents is materialised
    (ρ^gap itself may need more bits than memory holds)."""
    shift = y[1] - x[1]
    return Fraction(x[0] << max(shift, 0), y[0] << max(-shift, 0))


def _accept_rounding(base: ExponentialBase, gap: int, bound: tuple[int, int],
                     rng: RandomSource) -> bool:
    """Bernoulli(ρ^gap / q) exactly, for the upper bound q = m·2^−e of ρ^gap.

    V uniform in [0, 1) is read 64 bits at a time and compared with the ratio, whose
    bounds are refined until they separate from V's interval: ρ^gap is rational, but
    written out exactly it could need more memory than there is.
    """
    # Below 1 − 2^−64, V is surely under the ratio (>= 1 − 2^−64, see _upper_powers).
    if rng.randbelow(1 << _FAST_BITS) < (1 << _FAST_BITS) - 1:
        return True
    drawn, bits, precision = 0, 0, _PRECISION
    while True:
        # V = 1 − 2^−64 + W·2^−64: accept iff W < 2^64·(ratio − 1) + 1.
        drawn = (drawn << _FAST_BITS) + rng.randbelow(1 << _FAST_BITS)
        bits += _FAST_BITS
        precision = 2 * precision
        low = _ratio(_power(base.numerator, gap, precision, up=False), bound)
        high = _ratio(_power(base.numerator, gap, precision, up=True), bound)
        if Fraction(drawn + 1, 1 << bits) <= (low - 1) * (1 << _FAST_BITS) + 1:
            return True
        if Fraction(drawn, 1 << bits) >= (high - 1) * (1 << _FAST_BITS) + 1:
            return False


def _sample_gap(groups: dict[int, int], base: ExponentialBase, rng: RandomSource) -> int:
    """A gap d with probability ∝ groups[d]·ρ^d, exactly."""
    gaps = sorted(groups)
    bounds = _upper_powers(base.numerator, gaps)
    top = max(exponent for _, exponent in bounds.values())
    cumulative, total = [], 0
    for gap in gaps:
        mantissa, exponent = bounds[gap]
        total += groups[gap] * (mantissa << (top - exponent))
        cumulative.append(total)
    while True:
        gap = gaps[bisect.bisect_right(cumulative, rng.randbelow(total))]
        if _accept_rounding(base, gap, bounds[gap], rng):
            return gap


def _sample_levels(levels: Sequence[int], counts: Sequence[int], base: ExponentialBase,
                   rng: RandomSource) -> int:
    """Index j with probability ∝ counts[j]·ρ^(max level − levels[j]), gaps clamped."""
    best = max(level for level, m in zip(levels, counts, strict=True) if m > 0)
    outputs = sum(counts)
    cap = math.ceil((_TAIL_BITS * math.log(2) + math.log(outputs)) / base.log_inverse)
    # Gaps stay below 2^54 (_upper_powers): an array the collector does not walk.
    gaps = array("q", (min(best - level, cap) for level in levels))
    groups: Counter[int] = Counter()
    for gap, m in zip(gaps, counts, strict=True):
        if m:
            groups[gap] += m
    chosen = _sample_gap(dict(groups), base, rng)
    # Within the chosen gap every output weighs the same: pick one uniformly.
    position = rng.randbelow(groups[chosen])
    for index, (gap, m) in enumerate(zip(gaps, counts, strict=True)):
        if m and gap == chosen:
            if position < m:
                return index
            position -= m
    raise AssertionError("unreachable: the chosen gap has candidates")


def exponential_mechanism(utilities: Sequence[Real], epsilon: Real, rng: RandomSource, *,
                          sensitivity: Real = 1, resolution: int = 1,
                          multiplicities: Sequence[int] | None = None) -> int:
    """Index j with probability ∝ m_j·exp(ε'·u_j/(2Δu)), sampled exactly; ε' <= ε.

    ``utilities[j]·resolution/sensitivity`` must be an integer for every j; the
    resolution R must not depend on the data (it sets the base, see the module notes).
    ``multiplicities`` m_j >= 0 (default 1) count identical outputs that candidate j
    stands for, e.g. the grid points of one quantile interval; m_j = 0 excludes j.
    """
    delta_u = parameter(sensitivity, "sensitivity")
    if delta_u <= 0:
        raise ValueError(f"sensitivity must be positive, got {sensitivity!r}")
    counts = [1] * len(utilities) if multiplicities is None else list(multiplicities)
    if len(counts) != len(utilities):
        raise ValueError("utilities and multiplicities differ in length")
    if any(not isinstance(m, int) or m < 0 for m in counts) or sum(counts) == 0:
        raise ValueError("multiplicities must be non-negative integers, not all zero")
    base = exponential_base(epsilon, resolution)
    levels = [_level(u, resolution, delta_u) for u in utilities]
    return _sample_levels(levels, counts, base, rng)


def _level(utility: Real, resolution: int, sensitivity: Fraction) -> int:
    """utility·R/Δu, which must be an integer."""
    if isinstance(utility, int) and sensitivity == 1:
        return utility * resolution  # counts, the common case: no Fraction arithmetic
    level = exact_value(utility, "utility") * resolution / sensitivity
    if level.denominator != 1:
        raise ValueError(f"utility {utility!r} is not a multiple of sensitivity/resolution")
    return level.numerator


def private_mode(counts: Mapping[Category, int], epsilon: Real,
                 rng: RandomSource) -> Category:
    """The most frequent category, chosen with utility = count (Δu = 1), ε-DP.

    ``counts`` must hold every category of the *public* domain, those with count 0
    included: leaving absent categories out would reveal that they are absent.
    """
    categories = list(counts)
    if not categories:
        raise ValueError("the domain of categories is empty")
    return categories[exponential_mechanism([counts[c] for c in categories], epsilon, rng)]


def quantile_level(p: Real) -> Fraction:
    """p in [0, 1] as the Fraction actually used (nearest with denominator <= 1000)."""
    level = parameter(p, "p").limit_denominator(_LEVEL_DENOMINATOR)
    if not 0 <= level <= 1:
        raise ValueError(f"the quantile level must be in [0, 1], got {p!r}")
    return level


@dataclass(frozen=True)
class QuantileGrid:
    """The public outputs of a quantile: lo + i·step for i = 0 … points − 1."""

    lo: Fraction
    step: Fraction
    points: int

    def index(self, value: Real) -> int:
        """The grid point nearest to the value clamped into [lo, hi]."""
        i = round((exact_value(value) - self.lo) / self.step)
        return min(max(i, 0), self.points - 1)

    def value(self, index: int) -> Fraction:
        """The answer at a grid point."""
        return self.lo + index * self.step


def quantile_grid(lo: Real, hi: Real, step: Real | None = None) -> QuantileGrid:
    """The grid of [lo, hi]: ``step`` apart (default (hi − lo)/2^20)."""
    low, high = parameter(lo, "lo"), parameter(hi, "hi")
    if not low < high:
        raise ValueError(f"the domain needs lo < hi, got [{lo!r}, {hi!r}]")
    width = high - low
    spacing = width / 2**QUANTILE_GRID_BITS if step is None else parameter(step, "step")
    if not 0 < spacing <= width:
        raise ValueError(f"step must be in (0, hi − lo], got {step!r}")
    return QuantileGrid(low, spacing, math.floor(width / spacing) + 1)


def quantile_from_counts(index_counts: Mapping[int, int], p: Real, grid: QuantileGrid,
                         epsilon: Real, rng: RandomSource) -> float:
    """The p-quantile from how many values fell on each grid point, ε-DP.

    Smith's exponential mechanism (STOC 2011) on the grid. A grid point y has utility
    −dist(p·n, [#{x < y}, #{x <= y}]): zero where p·n falls among the values equal to y,
    so heavily tied data (many equal values) still points at the tied value. Both counts
    move by at most 1 when a row is added, removed or changed, and p·n by at most p, so
    Δu = 1. Points between two consecutive occupied grid points share a utility, so the
    mechanism picks an occupied point or a gap with weight (points in it)·exp(ε·u/2), then
    a point uniformly inside. ``index_counts`` maps grid indices (see
    :meth:`QuantileGrid.index`) to counts, so a database can snap and GROUP BY.
    """
    level = quantile_level(p)
    base = exponential_base(epsilon, level.denominator)
    n = sum(index_counts.values())
    target = level.numerator * n  # p·n, in units of 1/R (R = p's denominator)

    def level_of(below: int, upto: int) -> int:
        # −dist(p·n, [below, upto]) in units of 1/R: an integer.
        return -max(level.denominator * below - target, 0, target - level.denominator * upto)

    # Kept in int64 arrays, which the garbage collector does not walk: its passes hold
    # every thread (the event loop's too) and walked lists of 2·points entries, ~9 ms for
    # 182,000 points, at every pass while a quantile was drawn (bench/event_loop.py).
    # Lists of Python ints only where a value could outgrow 64 bits.
    small = grid.points < 2**62 and level.denominator * n < 2**61
    starts, lengths, levels = (_ints(small) for _ in range(3))
    position, below = 0, 0
    for i in _ints(small, sorted(index_counts)):
        count = index_counts[i]
        if not 0 <= i < grid.points:
            raise ValueError(f"grid index {i} outside 0 … {grid.points - 1}")
        if not isinstance(count, int) or count < 0:
            raise ValueError(f"count {count!r} at grid index {i} is not a count")
        starts.append(position)
        starts.append(i)
        lengths.append(i - position)  # the gap before the point, then the point itself
        lengths.append(1)
        levels.append(level_of(below, below))
        levels.append(level_of(below, below + count))
        position, below = i + 1, below + count
    starts.append(position)
    lengths.append(grid.points - position)
    levels.append(level_of(below, below))
    chosen = _sample_levels(levels, lengths, base, rng)
    return float(grid.value(starts[chosen] + rng.randbelow(lengths[chosen])))


def _ints(small: bool, values: Iterable[int] = ()) -> MutableSequence[int]:
    """A sequence of ints the garbage collector does not walk (an int64 array) when
    `small` says every value fits in one, else a list."""
    return array("q", values) if small else list(values)


def private_quantile(values: Iterable[Real], p: Real, lo: Real, hi: Real, epsilon: Real,
                     rng: RandomSource, step: Real | None = None) -> float:
    """The p-quantile of values over the public domain [lo, hi], ε-DP.

    p = 0.5 is the median; p = 0 and p = 1 estimate the minimum and maximum, but every
    point between the extreme value and the domain bound is then equally good, so the
    answer is uniform there: ask for p = 0.01 or 0.99 for a tighter estimate. Values
    outside [lo, hi] are clamped.
    """
    grid = quantile_grid(lo, hi, step)
    return quantile_from_counts(Counter(grid.index(v) for v in values), p, grid, epsilon, rng)
