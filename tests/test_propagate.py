"""Intervals carried through expressions over released values (rewriter/release/propagate.py):
each enclosure is checked against the expression evaluated at many points of its inputs'
box, and its special cases (a divisor near 0, a square, a CASE, rounding) one by one."""

from __future__ import annotations

import itertools
import math

import pytest
import sqlglot

from rewriter.release.propagate import Input, NoInterval, interval_of, projections

pytestmark = pytest.mark.unit


def _interval(sql: str, inputs: dict[int, tuple[float, float] | str | None],
              same: tuple[int, ...] = ()):
    """The interval of `sql` over "r"."o<i>" inputs; the outputs in `same` are one value."""
    node = sqlglot.parse_one(sql, dialect="postgres")
    return interval_of(node, lambda i: Input(inputs[i], "same" if i in same else i))


def _grid(ends: tuple[float, float], points: int = 7) -> list[float]:
    lo, hi = ends
    return [lo + (hi - lo) * k / (points - 1) for k in range(points)]


@pytest.mark.parametrize("sql, python", [
    ('"r"."o0" * 100.0 / "r"."o1"', lambda a, b: a * 100.0 / b),
    ('"r"."o0" - "r"."o1" * 2', lambda a, b: a - b * 2),
    ('ROUND("r"."o0" / "r"."o1", 2)', lambda a, b: round(a / b, 2)),
    ('GREATEST("r"."o0" - "r"."o1", 0)', lambda a, b: max(a - b, 0)),
    ('CASE WHEN "r"."o0" > "r"."o1" THEN 1 ELSE -1 END', lambda a, b: 1 if a > b else -1),
    ('ABS("r"."o0" - "r"."o1")', lambda a, b: abs(a - b)),
    ('SQRT(GREATEST("r"."o0", 0) / "r"."o1")', lambda a, b: math.sqrt(max(a, 0) / b)),
])
def test_every_value_over_the_inputs_box_lies_within_the_interval(sql, python):
    box = {0: (-40.0, 900.0), 1: (3.0, 12.5)}
    low, high = _interval(sql, box)
    for a, b in itertools.product(_grid(box[0]), _grid(box[1])):
        assert low - 1e-9 <= python(a, b) <= high + 1e-9


def test_a_divisor_whose_interval_holds_zero_leaves_the_value_unbounded():
    assert _interval('"r"."o0" / "r"."o1"', {0: (10.0, 20.0), 1: (-1.0, 5.0)}) == \
        (-math.inf, math.inf)


def test_a_released_value_times_itself_is_a_square_not_a_product():
    # o0 and o1 are the same noisy part (a variance's sum read twice): [−3, 2]² is [0, 9]
    assert _interval('"r"."o0" * "r"."o1"', {0: (-3.0, 2.0), 1: (-3.0, 2.0)},
                     same=(0, 1)) == (0.0, 9.0)
    # two different values: the product of intervals
    assert _interval('"r"."o0" * "r"."o1"', {0: (-3.0, 2.0), 1: (-3.0, 2.0)}) == (-6.0, 9.0)


def test_the_variance_formula_stays_within_zero_and_the_ends():
    post = ('SELECT SQRT(CASE WHEN "r"."o0" > 1 THEN GREATEST("r"."o1" - "r"."o2" * '
            '"r"."o3" / "r"."o4", 0) / ("r"."o5" - 1) END) AS "s" FROM __dpgate_released__ '
            'AS r')
    node, = projections(post)
    n, s, q = (990.0, 1010.0), (-2.0e5, -1.9e5), (4.2e7, 4.4e7)
    inputs = {0: n, 1: q, 2: s, 3: s, 4: n, 5: n}
    low, high = interval_of(node, lambda i: Input(inputs[i], "n" if inputs[i] == n else i))
    assert low >= 0
    for count, total, squares in itertools.product(_grid(n, 3), _grid(s, 3), _grid(q, 3)):
        value = math.sqrt(max(squares - total * total / count, 0) / (count - 1))
        assert low - 1e-9 <= value <= high + 1e-9


def test_a_case_takes_only_the_branches_its_condition_may_reach():
    sql = 'CASE WHEN "r"."o0" > 100 THEN "r"."o0" ELSE 0 END'
    assert _interval(sql, {0: (150.0, 200.0)}) == (150.0, 200.0)
    assert _interval(sql, {0: (50.0, 200.0)}) == (0.0, 200.0)
    assert _interval('CASE WHEN "r"."o0" > 1 THEN 5 END', {0: (-3.0, 0.5)}) is None  # NULL


def test_rounding_covers_halves_either_way():
    assert _interval('ROUND("r"."o0")', {0: (2.5, 3.5)}) == (2.0, 4.0)
    assert _interval('CAST("r"."o0" AS INT)', {0: (2.4, 2.6)}) == (2.0, 3.0)


def test_text_keys_are_compared_but_not_bounded():
    assert _interval("CASE WHEN \"r\".\"o0\" = 'a' THEN \"r\".\"o1\" END",
                     {0: "a", 1: (1.0, 2.0)}) == (1.0, 2.0)
    with pytest.raises(NoInterval):
        _interval('CAST("r"."o0" AS TEXT)', {0: (1.0, 2.0)})
    with pytest.raises(NoInterval):
        _interval('"r"."o0"', {0: "a label"})


def test_a_branch_sees_its_condition_hold_for_a_whole_number():
    # CASE WHEN n > 1 THEN 1 / (n - 1) END: n's truth a count in [0.4, 30] reaches the
    # branch only at n >= 2, so the divisor is at least 1
    node = sqlglot.parse_one('CASE WHEN "r"."o0" > 1 THEN 10 / ("r"."o1" - 1) END',
                             dialect="postgres")
    count = Input((0.4, 30.0), "n", integer=True)
    # (0 from below: an integer division would truncate 10 / 29 to 0)
    assert interval_of(node, lambda i: count) == (0.0, 10.0)
    real = Input((0.4, 30.0), "n")  # not a whole number: the divisor may be near 0
    assert interval_of(node, lambda i: real) == (-math.inf, math.inf)



def test_a_division_truncates_only_where_postgresql_divides_integers():
    node = sqlglot.parse_one('"r"."o0" / "r"."o1"', dialect="postgres")

    def typed(whole):
        return lambda i: Input((7.0, 9.0) if i == 0 else (2.0, 2.0), i, whole_type=whole)
    assert interval_of(node, typed(True)) == (3.0, 4.0)  # bigint / bigint: 3 … 4
    assert interval_of(node, typed(False)) == (3.5, 4.5)  # numeric
    assert interval_of(node, typed(None)) == (3.0, 4.5)  # not known: either
    # an integer beside a numeric constant is numeric
    ratio = sqlglot.parse_one('"r"."o0" * 100.0 / "r"."o1"', dialect="postgres")
    assert interval_of(ratio, typed(True)) == (350.0, 450.0)


def test_a_value_that_may_be_null_leaves_is_null_and_coalesce_undecided():
    # A SUM released NULL (its noisy count below ½) may still hold a value: its truth
    # is anywhere, and whether it is NULL is not known.
    unknown = {0: (-math.inf, math.inf)}
    node = sqlglot.parse_one('COALESCE("r"."o0", 0)', dialect="postgres")
    assert interval_of(node, lambda i: Input(unknown[i], i, maybe_null=True)) == \
        (-math.inf, math.inf)
    # released with a value, its truth may still be NULL (no row): either branch
    node = sqlglot.parse_one('CASE WHEN "r"."o0" IS NULL THEN 0 ELSE 1 END',
                             dialect="postgres")
    assert interval_of(node, lambda i: Input((40.0, 60.0), i, maybe_null=True)) == (0.0, 1.0)
    assert interval_of(node, lambda i: Input((40.0, 60.0), i)) == (1.0, 1.0)


def test_a_branch_narrows_with_the_end_its_condition_guarantees():
    # o0 > o1 with o1 in [10, 50] only guarantees o0 > 10 (o0 = 20, o1 = 10 reaches it)
    sql = 'CASE WHEN "r"."o0" > "r"."o1" THEN "r"."o0" END'
    assert _interval(sql, {0: (0.0, 100.0), 1: (10.0, 50.0)}) == (10.0, 100.0)
    node = sqlglot.parse_one(sql, dialect="postgres")
    whole = interval_of(node, lambda i: Input({0: (0.0, 100.0), 1: (10.0, 50.0)}[i], i,
                                              integer=i == 0))
    assert whole == (11.0, 100.0)


def test_text_is_never_compared_in_python():
    # PostgreSQL finds timestamptz '2024-03-01 00:00:00+00' = '2024-03-01': undecided
    sql = "CASE WHEN \"r\".\"o0\" = '2024-03-01' THEN \"r\".\"o1\" ELSE 0 END"
    assert _interval(sql, {0: "2024-03-01 00:00:00+00", 1: (490.0, 510.0)}) == (0.0, 510.0)
    assert _interval("CASE WHEN \"r\".\"o0\" < 'b' THEN \"r\".\"o1\" ELSE 0 END",
                     {0: "a", 1: (490.0, 510.0)}) == (0.0, 510.0)
    # a key compared with itself holds whatever its collation
    assert _interval('CASE WHEN "r"."o0" = "r"."o0" THEN "r"."o1" ELSE 0 END',
                     {0: "a", 1: (490.0, 510.0)}) == (490.0, 510.0)


def test_a_cast_to_numeric_with_a_precision_alone_rounds_to_whole_numbers():
    assert _interval('CAST("r"."o0" AS NUMERIC(5))', {0: (2.4, 2.6)}) == (2.0, 3.0)
    assert _interval('CAST("r"."o0" AS NUMERIC(5, 1))', {0: (2.44, 2.66)}) == (2.4, 2.7)
