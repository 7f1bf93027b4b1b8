"""Choosing a count's τ privately (mechanisms/contribution_bound.py), checked by brute force.

On tiny databases (a few units, each with a few rows) every neighbour (one unit added or
removed, with any number of rows) is enumerated, and the exact probability of every
output of the release is computed: the walk's stop (summed over every value of its
threshold noise), then the count at the chosen τ and, below the cap, the rows beyond it,
each with its discrete Laplace pmf. The privacy loss of every output must stay within the
charged ε.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import replace

import pytest

from mechanisms.accuracy import laplace_bound
from mechanisms.contribution_bound import (
    COUNT_HEDGE,
    COUNT_UPPER_THRESHOLD_SCALES,
    UPPER_THRESHOLD_SCALES,
    BoundChoice,
    beyond,
    bound_grid,
    choose_bound,
    heavy_distribution,
    heavy_levels,
    privacy_map,
    truncated_total,
)
from mechanisms.names import Mechanism
from mechanisms.seeded_source import SeededRandomSource
from proxy.config import PrivacySettings
from proxy.engine.chosen_bound import CHOICE_PART, TRUNCATION_PART
from proxy.engine.release import release
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.policy.session import with_session_bounds, with_session_noise
from rewriter.sensitivity.calibrate import calibrate
from tests.test_unit_golden import METRICS
from tests.unit_support import demo_policy

pytestmark = pytest.mark.statistical  # exact pmfs over every neighbour, seeded draws

CAP = 4
GRID = bound_grid(CAP)


def _histogram(counts: tuple[int, ...]) -> dict[int, int]:
    return dict(Counter(counts))


def _databases(units: int) -> list[tuple[int, ...]]:
    return [counts for size in range(units + 1)
            for counts in itertools.combinations_with_replacement(range(1, CAP + 1), size)]


def _neighbours(counts: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every database one unit away: one unit removed, or one added with 1…CAP rows."""
    removed = {counts[:i] + counts[i + 1:] for i in range(len(counts))}
    added = {tuple(sorted(counts + (c,))) for c in range(1, CAP + 1)}
    return sorted(removed | added)


def _stops(choice: BoundChoice, counts: tuple[int, ...]) -> list[float]:
    histogram = _histogram(counts)
    return heavy_distribution(choice, [beyond(histogram, tau) for tau in choice.grid])


def _pmf(x: int, scale: float) -> float:
    p = math.exp(-1 / scale)
    return (1 - p) / (1 + p) * p ** abs(x)


def test_the_grid_is_geometric_and_ends_at_the_limit():
    assert bound_grid(100) == (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 100)
    assert bound_grid(64)[-3:] == (32, 48, 64) and bound_grid(1) == (1,)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("upper", [UPPER_THRESHOLD_SCALES, COUNT_UPPER_THRESHOLD_SCALES, 0.0])
def test_the_choice_of_tau_is_epsilon_private_against_every_neighbour(epsilon, upper):
    """For every threshold above τ = 1 (a histogram's, a lone count's, and none at all:
    the proof needs of T only that it does not depend on the data)."""
    choice = BoundChoice(epsilon, GRID, upper_scales=upper)
    worst = 0.0
    for counts in _databases(3):
        stops = _stops(choice, counts)
        assert sum(stops) == pytest.approx(1, abs=1e-9)
        for other in _neighbours(counts):
            for p, q in zip(stops, _stops(choice, other), strict=True):
                worst = max(worst, abs(math.log(p / q)))
    assert worst <= privacy_map(choice) * (1 + 1e-9)
    assert worst > 0.3 * epsilon  # the check can fail: the walk does depend on the data


@pytest.mark.parametrize("lone", [False, True])
def test_the_whole_release_stays_within_the_charged_epsilon(lone: bool):
    """(τ, noisy count at τ, noisy rows beyond τ up to the cap): the exact joint pmf, every
    output in a window wide enough for all the probability that matters, on every
    neighbour pair. The split of what the choice leaves depends on τ alone. Both walks:
    the default thresholds and hedge, and a lone count's (lower above τ = 1, COUNT_HEDGE)."""
    epsilon, share = 1.5, 0.4
    choice = BoundChoice(epsilon * share * CHOICE_PART, GRID)
    if lone:
        choice = BoundChoice(choice.epsilon, GRID, COUNT_HEDGE, COUNT_UPPER_THRESHOLD_SCALES)
    rest = epsilon - choice.epsilon
    worst = 0.0
    for counts in _databases(2):
        for other in _neighbours(counts):
            for (m, p), (_, q) in zip(enumerate(_stops(choice, counts)),
                                      enumerate(_stops(choice, other)), strict=True):
                tau = choice.bound(m)
                estimate = 0.0 if tau == CAP else rest * TRUNCATION_PART
                answer = rest - estimate
                a, b = (truncated_total(_histogram(c), tau) for c in (counts, other))
                k, j = (truncated_total(_histogram(c), CAP) - truncated_total(_histogram(c), tau)
                        for c in (counts, other))
                for value in range(-15, 25):
                    for rows in range(-20, 30) if estimate else (0,):
                        mine, theirs = (p * _pmf(value - a, tau / answer),
                                        q * _pmf(value - b, tau / answer))
                        if estimate:
                            scale = (CAP - tau) / estimate
                            mine *= _pmf(rows - k, scale)
                            theirs *= _pmf(rows - j, scale)
                        worst = max(worst, abs(math.log(mine / theirs)))
    assert worst <= epsilon * (1 + 1e-9)
    assert worst > 0.5 * epsilon


def test_the_sampler_follows_the_exact_distribution():
    choice = BoundChoice(1.0, GRID)
    counts = (1, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4)
    histogram = _histogram(counts)
    rng = SeededRandomSource(7)
    trials = 20_000
    seen = Counter(heavy_levels(choice, histogram, rng) for _ in range(trials))
    for m, p in enumerate(_stops(choice, counts)):
        assert seen[m] / trials == pytest.approx(p, abs=4 * math.sqrt(p * (1 - p) / trials)
                                                 + 1e-3)


def test_few_units_keep_tau_at_one_and_many_heavy_units_raise_it():
    choice = BoundChoice(0.015, bound_grid(100))  # 15% of ε = 0.1
    rng = SeededRandomSource(3)
    few = {1: 270, 2: 7}  # one product: hardly anyone orders it twice
    assert sum(choose_bound(choice, few, rng) == 1 for _ in range(200)) >= 190
    # 5,000 units with 40 rows: the walk passes every level below 40, τ lands above it
    many = {40: 5000}
    assert all(choose_bound(choice, many, rng) >= 64 for _ in range(50))


def test_a_chosen_count_names_tau_and_its_truncation_estimate():
    plan = plan_private_aggregate(parse_query("SELECT count(*) FROM orders"), demo_policy(),
                                  0, METRICS)
    assert plan.unit is not None and plan.unit.chosen_limit == 100
    calibration = calibrate(plan, 0.1, 1e-8)
    settings = PrivacySettings(shift_interval=(0.0, 0.0))
    histogram = [[b"40", b"5000"]]  # 200,000 rows, none beyond τ once τ ≥ 40
    answer = release(plan, calibration, [], histogram, 0.0, settings, SeededRandomSource(1))
    assert "a bound chosen privately for this query (at most 100" in (answer.unit_note or "")
    tau = int((answer.unit_note or "").split("at most ")[1].split()[0])
    assert tau >= 40
    # noise at scale τ/ε_a, its bound at β/2 = 2.5%; below the cap the upper end adds the
    # noisy rows beyond τ (none here) and their one-sided bound at 2.5%
    rest = 0.1 * (1 - 0.2 * CHOICE_PART)
    answer_epsilon = rest if tau == 100 else rest * (1 - TRUNCATION_PART)
    scale = tau / answer_epsilon
    noise = math.ceil(laplace_bound(scale, 0.025))
    if tau == 100:
        assert answer.bounds["count"] == noise
        assert "never counted, nor allowed for" in (answer.unit_note or "")
    else:
        assert str(answer.bounds["count"]).startswith(f"{noise} (upper end +")
        assert "the interval's upper end allows for them" in (answer.unit_note or "")
    assert abs(int(answer.rows[0][0] or 0) - 200_000) <= 20 * scale


def test_the_interval_covers_every_row_up_to_the_cap_when_truncation_bites():
    """Heavy units far beyond any τ the walk picks: the stated interval must still hold
    Σ_u min(c_u, cap) at its confidence (it missed this before the rows beyond τ were
    released: the units-beyond estimate rarely showed them)."""
    plan = plan_private_aggregate(parse_query("SELECT count(*) FROM orders"), demo_policy(),
                                  0, METRICS)
    calibration = calibrate(plan, 0.1, 1e-8)
    settings = PrivacySettings(shift_interval=(0.0, 0.0))
    histogram = {1: 20_000, 30: 400, 100: 150}  # a few hundred units beyond τ ≈ 32–64
    truth = sum(count * units for count, units in histogram.items())
    rows = [[str(c).encode(), str(u).encode()] for c, u in histogram.items()]
    rng = SeededRandomSource(29)
    inside, below = 0, 0
    for _ in range(400):
        answer = release(plan, calibration, [], rows, 0.0, settings, rng)
        value = int(answer.rows[0][0] or 0)
        bound = str(answer.bounds["count"])
        low = high = int(bound.split()[0])
        if "upper end +" in bound:
            high = int(bound.split("+")[1].rstrip(")"))
        inside += value - low <= truth <= value + high
        below += int((answer.unit_note or "").split("at most ")[1].split()[0]) < 100
    assert below >= 100  # truncation did bite, often
    assert inside >= 0.95 * 400



def test_a_session_tau_answers_from_the_same_histogram_without_a_choice():
    policy = with_session_bounds(demo_policy(), {"dp.max_contributions": "3"})
    plan = plan_private_aggregate(parse_query("SELECT count(*) FROM orders"), policy, 0,
                                  METRICS)
    assert plan.unit is not None and plan.unit.chosen_limit is None
    assert plan.fingerprint_text != plan_private_aggregate(
        parse_query("SELECT count(*) FROM orders"), demo_policy(), 0, METRICS).fingerprint_text
    calibration = calibrate(plan, 1.0, 1e-8)
    assert calibration.parts[0].scale == 3
    answer = release(plan, calibration, [], [[b"1", b"10"], [b"5", b"4"]], 0.0,
                     PrivacySettings(shift_interval=(0.0, 0.0)), SeededRandomSource(2))
    assert answer.unit_note is None  # the plan's own clause: at most 3 rows
    assert abs(int(answer.rows[0][0] or 0) - (10 + 4 * 3)) <= 40


def _cell_rows(units: list[dict[int, int]], by_size: bool = False
               ) -> list[tuple[bytes | None, ...]]:
    """The backend's rows for a histogram over keys 1…10: per key, (m, n, how many units
    have m rows there and n in all) (bounding.cell_contributions), or `by_size` the
    same as by_unit_size gives them."""
    counted: Counter[tuple[int, int, int]] = Counter()
    for unit in units:
        total = sum(unit.values())
        for key, rows in unit.items():
            counted[(key, rows, total)] += 1
    result: list[tuple[bytes | None, ...]] = []
    for key in range(1, 11):
        found = sorted((m, n, c) for (k, m, n), c in counted.items() if k == key)
        result += [(str(key).encode(), str(m).encode(), str(n).encode(), str(c).encode())
                   for m, n, c in found] or [(str(key).encode(), None, None, None)]
    return by_unit_size(result) if by_size else result


def by_unit_size(rows: list[tuple[bytes | None, ...]]) -> list[tuple[bytes | None, ...]]:
    """A one-key histogram's rows by unit, (key, m, n, units), as the backend gives them by
    unit size (bounding.weighted_rows): (key, n, the rows there of units of n rows)."""
    sizes: dict[bytes | None, Counter[int]] = {}
    for key, m, n, units in rows:
        cell = sizes.setdefault(key, Counter())
        if n is not None:
            cell[int(n)] += int(m or 0) * int(units or 0)
    return [row for key, cell in sizes.items() for row in (
        [(key, str(n).encode(), str(r).encode()) for n, r in sorted(cell.items())]
        or [(key, None, None)])]


def _histogram_plan(by_size: bool):
    """The quantity histogram's plan: by unit size (any noise but the Gaussian), or by
    unit (the Gaussian's whole cells); either is released the same under Laplace."""
    mechanism = Mechanism.SHIFTED_LAPLACE if by_size else Mechanism.GAUSSIAN
    plan = plan_private_aggregate(parse_query(
        "SELECT quantity, count(*) FROM orders GROUP BY quantity"),
        with_session_noise(demo_policy(), mechanism), 0, METRICS)
    assert plan.unit is not None and plan.unit.cells_by_size == by_size
    return plan


def test_a_histograms_two_forms_give_the_same_cells():
    """Rows by unit size carry exactly what the fractional cells, the choice of τ and the
    rows beyond it need: the same releases as the rows by unit, draw for draw."""
    import random

    from proxy.engine.chosen_bound import count_at_bound
    draw = random.Random(7)
    plans = [_histogram_plan(by_size) for by_size in (False, True)]
    for share in (0.0, 0.2):
        settings = PrivacySettings(shift_interval=(0.0, 0.0), bound_choice_share=share)
        for _ in range(30):
            units = [{k: draw.choice([1, 1, 2, 5, 30]) for k in
                      draw.sample(range(1, 11), draw.randint(1, 6))}
                     for _ in range(draw.randint(0, 200))]
            counts = [count_at_bound(plan, calibrate(plan, 0.5, 1e-8),
                                     _cell_rows(units, plan.unit.cells_by_size), settings,
                                     SeededRandomSource(3)) for plan in plans]
            assert counts[0] == replace(counts[1], calibration=counts[0].calibration)
            assert counts[0].calibration.parts == counts[1].calibration.parts


@pytest.mark.parametrize("by_size", [False, True])
def test_a_histograms_cells_at_tau_move_by_at_most_tau_when_a_unit_comes(by_size: bool):
    """The cells are released in steps of 1/Q rows: a unit moves them by at most Q·τ
    steps plus the rounding of each of the 10 cells, the sensitivity their noise has."""
    from mechanisms.contribution_bound import cell_resolution
    from proxy.engine.chosen_bound import count_at_bound

    plan = _histogram_plan(by_size)
    assert plan.unit is not None and plan.unit.chosen_limit == 50  # κ·τ_g of the policy
    # n per unit: a window over the (unit, key) aggregates, or the units' sizes joined
    assert "row_number" not in plan.sql and plan.checks.windows == int(not by_size)
    assert len(plan.checks.reads) == 2 * by_size
    calibration = calibrate(plan, 1.0, 1e-8)
    fixed = PrivacySettings(shift_interval=(0.0, 0.0), bound_choice_share=0)  # τ = 10
    rng = SeededRandomSource(5)
    q = cell_resolution(10)
    import random
    draw = random.Random(11)
    for _ in range(40):
        units = [{k: draw.randint(1, 6) for k in draw.sample(range(1, 11), draw.randint(1, 6))}
                 for _ in range(draw.randint(0, 6))]
        newcomer = {k: draw.randint(1, 20) for k in draw.sample(range(1, 11), draw.randint(1, 9))}
        counts = [count_at_bound(plan, calibration, _cell_rows(group, by_size), fixed, rng)
                  for group in (units, units + [newcomer])]
        assert counts[0].resolution == q
        before, after = ({row[0]: int(row[1] or 0) for row in count.rows} for count in counts)
        assert len(before) == 10  # every key of the domain, empty ones too
        moved = sum(abs(after[k] - before[k]) for k in before)
        assert moved <= q * 10 + 10
        total = sum(newcomer.values())
        # within τ the newcomer is counted in full; beyond, exactly τ rows up to rounding
        assert abs(moved - q * min(total, 10)) <= (len(newcomer) if total > 10 else 0)
        # a unit within τ is counted in full: the cells are PostgreSQL's counts
        if all(sum(u.values()) <= 10 for u in units):
            assert sum(before.values()) == q * sum(sum(u.values()) for u in units)
    assert counts[0].calibration.parts[0].scale == pytest.approx((10 + 10 / q) / 1.0)


@pytest.mark.parametrize("by_size", [False, True])
def test_a_heavy_units_thin_cells_keep_their_share_of_tau(by_size: bool):
    """A unit of 700 rows over 7 cells at τ = 10 keeps 10/7 of a row in each (10 in all):
    the proportional floor kept 1 in each (7), a bias the interval did not allow for."""
    from proxy.engine.chosen_bound import count_at_bound

    plan = _histogram_plan(by_size)
    calibration = calibrate(plan, 1.0, 1e-8)
    fixed = PrivacySettings(shift_interval=(0.0, 0.0), bound_choice_share=0)  # τ = 10
    count = count_at_bound(plan, calibration,
                           _cell_rows([{k: 100 for k in range(1, 8)}], by_size),
                           fixed, SeededRandomSource(1))
    cells = [int(row[1] or 0) for row in count.rows]
    assert cells == [round(count.resolution * 10 / 7)] * 7 + [0] * 3


def test_a_histograms_interval_holds_every_cell_up_to_the_cap_on_adversarial_data():
    """Heavy units (40 rows, beyond the τ the walk picks) all in one cell, light ones
    spread: every cell's stated interval must hold its untruncated count at the stated
    confidence, for the heavy cell too. The allowance is the noisy rows beyond τ plus
    their one-sided bound, so it holds on any data (the estimate of units beyond τ it
    replaced, which allowed for them only when it showed them, covered the heavy cell in
    55 of these 300 releases). The guarantee is the plain cells': the shape × total
    estimator, which quantity's cells may take, assumes the units' rows fall in the cells
    as all rows do, which this data breaks on purpose: it is the policy's opt-in
    (shape_times_total), off in the demo policy."""
    plan = _histogram_plan(by_size=True)  # the default noise's plan
    assert plan.unit is not None and plan.unit.counts_cap == 50 and not plan.unit.spread_keys
    calibration = calibrate(plan, 0.5, 1e-8)
    settings = PrivacySettings(shift_interval=(0.0, 0.0))
    units = [{3: 40}] * 60 + [{k: 1 for k in range(1, 11)}] * 400 + [{1: 2, 2: 1}] * 500
    truth = {k: sum(u.get(k, 0) for u in units) for k in range(1, 11)}
    rows = _cell_rows(units, by_size=True)
    rng = SeededRandomSource(29)
    inside: Counter[int] = Counter()
    below = 0
    releases = 300
    for _ in range(releases):
        answer = release(plan, calibration, [23], rows, 0.0, settings, rng)  # int4 keys
        tau = int((answer.unit_note or "").split("at most ")[1].split()[0])
        below += tau < 40
        bound = str(answer.bounds["count"])
        low = high = int(bound.split()[0])
        if "upper end +" in bound:
            high = int(bound.split("+")[1].rstrip(")"))
        for key, value in answer.rows:
            k = int(key or 0)
            inside[k] += int(value or 0) - low <= truth[k] <= int(value or 0) + high
    assert below >= releases // 2  # truncation did bite, in the heavy cell
    assert all(inside[k] >= 0.95 * releases for k in truth), inside
