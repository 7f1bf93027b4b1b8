"""The threshold of key selection with bounded contributions.

A group released only because its noisy count passes a threshold T: a unit that is alone
in up to κ groups, with at most τ_g rows in each, must make any of them appear with
probability at most δ (Korolova et al. 2009; Wilson et al. 2020, "Differentially private
SQL with bounded user contribution", which use the same union over the unit's groups).

The counts get discrete Laplace noise X of scale b, P(X = x) ∝ e^(−|x|/b), whose tail is
P(X ≥ x) = e^(−x/b)/(1 + e^(−1/b)) ≤ e^(−x/b) for integers x ≥ 0. A group with true count
c ≤ τ_g is released when c + X > T, so with probability at most e^(−(T − τ_g)/b); over κ
groups at most κ·e^(−(T − τ_g)/b). Setting that to δ:

    T = τ_g + b · ln(κ / δ)

Row-level FLEX key selection is the case κ = τ_g = S (one row changes S rows).
tests/test_unit_key_selection.py checks the formula against the exact probability.
"""

from __future__ import annotations

import math


def key_selection_threshold(group_rows: float, groups: float, scale: float,
                            delta: float) -> float:
    """T such that a unit alone in `groups` groups of ≤ `group_rows` rows each makes any of
    them pass (noisy count > T, discrete Laplace of `scale`) with probability ≤ δ."""
    if not 0 < delta < 1:
        raise ValueError("key selection needs 0 < delta < 1")
    return max(group_rows, 1.0) + scale * math.log(max(groups, 1.0) / delta)


def release_probability(group_rows: int, groups: int, scale: float, threshold: float,
                        terms: int = 1_000_000) -> float:
    """The exact probability that at least one of `groups` groups of `group_rows` rows
    passes `threshold`, by summing the discrete Laplace pmf (for tests and docs)."""
    p = math.exp(-1 / scale)
    first = math.floor(threshold - group_rows) + 1  # the smallest noise that passes
    normaliser = (1 - p) / (1 + p)
    one = 0.0
    for x in range(max(first, 0), max(first, 0) + terms):
        term = normaliser * p ** abs(x)
        one += term
        if term < one * 1e-17:
            break
    if first < 0:  # threshold below the count: negative noise may pass too
        one += sum(normaliser * p ** abs(x) for x in range(first, 0))
    return 1 - (1 - one) ** groups
