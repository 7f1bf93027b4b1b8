"""Interval arithmetic for expressions inside SUM/AVG (rewriter/aggregate/aggregate_args.py): the
derived bounds contain every value of in-bounds inputs, checked against brute force."""

from __future__ import annotations

import itertools
import math

import pytest
from sqlglot import exp, parse_one

from rewriter.aggregate.aggregate_args import NoBounds, interval, mark_total, with_clamped_columns
from rewriter.analysis.arithmetic import TOTAL

pytestmark = pytest.mark.unit

BOUNDS = {"a": (1.0, 10.0), "b": (-3.0, 5.0), "p": (0.0, 200.0), "d": (0.0, 0.5)}


def bounds_of(column: exp.Column) -> tuple[float, float]:
    return BOUNDS[column.name]


def derived(sql: str) -> tuple[float, float]:
    return interval(parse_one(sql, read="postgres"), bounds_of)


@pytest.mark.parametrize(("sql", "expected"), [
    ("a + b", (-2.0, 15.0)),
    ("a - b", (-4.0, 13.0)),
    ("a * b", (-30.0, 50.0)),
    ("-b", (-5.0, 3.0)),
    ("a * 2", (2.0, 20.0)),
    ("b / 2.0", (-1.5, 2.5)),
    ("b / -2.0", (-2.5, 1.5)),
    ("a::numeric", (1.0, 10.0)),
    ("(b / 2.0)::int", (-2.0, 3.0)),  # rounds half away from zero, as PostgreSQL
    ("p * (1 - d)", (0.0, 200.0)),
    ("CASE WHEN b > 0 THEN a * b ELSE 0 END", (-30.0, 50.0)),
    ("CASE WHEN b > 0 THEN a END", (1.0, 10.0)),
    ("COALESCE(b, 7)", (-3.0, 7.0)),
    # GREATEST and LEAST ignore a NULL argument: the other one is the value
    ("GREATEST(a, b)", (-3.0, 10.0)),
    ("LEAST(a, b)", (-3.0, 10.0)),
    ("abs(b)", (0.0, 5.0)),
    ("abs(a - 20)", (10.0, 19.0)),
])
def test_interval_of_each_form(sql, expected):
    assert derived(sql) == pytest.approx(expected)


@pytest.mark.parametrize("sql", [
    "a * b - abs(b) * 3", "p * (1 - d) + a", "GREATEST(a * b, -a) - LEAST(b, 2)",
    "CASE WHEN a > 5 THEN -b * a ELSE b / 4.0 END",
])
def test_every_value_of_in_bounds_inputs_lies_within_the_interval(sql):
    tree = parse_one(sql, read="postgres")
    lo, hi = interval(tree, bounds_of)
    grids = {name: [low + (high - low) * i / 8 for i in range(9)]
             for name, (low, high) in BOUNDS.items()}
    names = sorted(grids)
    for values in itertools.product(*(grids[n] for n in names)):
        row = dict(zip(names, values, strict=True))
        value = _evaluate(tree, row)
        assert lo - 1e-9 <= value <= hi + 1e-9, (row, value)


def _evaluate(node: exp.Expression, row: dict[str, float],
              integers: frozenset[str] | set[str] = frozenset()) -> float:
    """A small evaluator of the forms above (numbers only, no NULL); a division of
    `integers` columns by an integer truncates, as PostgreSQL's."""
    if isinstance(node, exp.Paren):
        return _evaluate(node.this, row, integers)
    if isinstance(node, exp.Column):
        return row[node.name]
    if isinstance(node, exp.Literal):
        return float(node.this)
    if isinstance(node, exp.Neg):
        return -_evaluate(node.this, row, integers)
    if isinstance(node, exp.Abs):
        return abs(_evaluate(node.this, row, integers))
    if isinstance(node, (exp.Greatest, exp.Least)):
        values = [_evaluate(e, row, integers) for e in [node.this, *node.expressions]]
        return max(values) if isinstance(node, exp.Greatest) else min(values)
    if isinstance(node, exp.Case):
        for branch in node.args["ifs"]:
            condition = branch.this
            assert isinstance(condition, exp.GT)
            if _evaluate(condition.this, row, integers) > \
                    _evaluate(condition.expression, row, integers):
                return _evaluate(branch.args["true"], row, integers)
        return _evaluate(node.args["default"], row, integers)
    left = _evaluate(node.this, row, integers)
    right = _evaluate(node.expression, row, integers)
    operations = {exp.Add: left + right, exp.Sub: left - right, exp.Mul: left * right}
    if isinstance(node, exp.Div):
        whole = node.expression.is_int and \
            all(c.name in integers for c in node.this.find_all(exp.Column))
        return float(int(left / right)) if whole else left / right
    if isinstance(node, exp.Mod):
        return math.fmod(left, right)
    return operations[type(node)]


@pytest.mark.parametrize("sql", [
    "a / 2",  # integer division when a is an integer: refused when its type is unknown
    "a / 0.0", "a / b", "a % b", "a % 0", "a::numeric(4, 1)", "a::text", "power(a, 2)",
    "CAST(a * 1e30 AS int)", "CAST(a * 1e40 AS real)", "length(x)", "a * 1e300 * 1e300",
    # PostgreSQL sums reals in single precision, far from the exact sum
    "a::real * b::real", "CAST(b AS real)",
])
def test_what_has_no_derivable_bounds_is_refused(sql):
    with pytest.raises((NoBounds, KeyError)):
        derived(sql)


def test_a_cast_to_double_precision_widens_and_is_computed_in_numeric():
    """Tableau's AVG(CAST(x AS DOUBLE PRECISION)): the bounds pass through, and the backend
    never casts to a float (a tiny NUMERIC fails to become one, on such rows only)."""
    assert derived("CAST(b AS double precision)") == (-3.0, 5.0)
    assert derived("a::float8 * 2.5") == (2.5, 25.0)
    tree = parse_one("CAST(b AS DOUBLE PRECISION) * 2", read="postgres")
    clamped = with_clamped_columns(tree, bounds_of).sql(dialect="postgres")
    assert "DOUBLE" not in clamped
    assert clamped == ("CASE WHEN b IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(b AS DECIMAL), "
                       "-3.0), 5.0) END * 2")


def test_each_column_is_clamped_and_case_conditions_read_the_column_as_written():
    tree = parse_one("CASE WHEN a > 5 THEN a * b ELSE 0 END", read="postgres")
    clamped = with_clamped_columns(tree, bounds_of).sql(dialect="postgres")
    assert clamped.startswith("CASE WHEN a > 5 THEN CASE WHEN a IS NULL THEN NULL ELSE "
                              "LEAST(GREATEST(CAST(a AS DECIMAL), 1.0), 10.0) END * ")
    assert "LEAST(GREATEST(CAST(b AS DECIMAL), -3.0), 5.0)" in clamped
    mark_total(tree)
    assert not tree.meta.get(TOTAL) and not tree.args["ifs"][0].this.meta.get(TOTAL)
    assert tree.args["ifs"][0].args["true"].meta.get(TOTAL)


@pytest.mark.unit
def test_arithmetic_after_an_integer_cast_runs_in_numeric():
    """`smallint * smallint` overflows on rows whose product passes 32,767 only."""
    node = with_clamped_columns(parse_one("a::smallint * b::smallint", read="postgres"),
                                bounds_of)
    assert all(isinstance(cast.parent, exp.Cast) and cast.parent.to.is_type("decimal")
               for cast in node.find_all(exp.Cast) if cast.to.is_type("smallint"))


# -- division and modulo by constants, with the columns' types -------------------------

TYPES = {"a": "integer", "b": "integer", "p": "numeric", "d": "numeric", "s": "smallint",
         "m": "integer", "g": "bigint"}
TYPED_BOUNDS = {**BOUNDS, "s": (-2.0 ** 15, 7.0), "m": (-2.0 ** 31, 0.0),
                "g": (-2.0 ** 31, 0.0)}


def typed(sql: str) -> tuple[float, float]:
    return interval(parse_one(sql, read="postgres"), lambda c: TYPED_BOUNDS[c.name],
                    lambda c: TYPES[c.name])


@pytest.mark.parametrize(("sql", "expected"), [
    ("a / 2", (0.0, 5.0)),  # integer division truncates toward zero
    ("b / 2", (-1.0, 2.0)),
    ("b / -2", (-2.0, 1.0)),
    ("a / -1", (-10.0, -1.0)),
    ("(a + b) / 3", (0.0, 5.0)),
    ("a::numeric / 4", (0.25, 2.5)),  # numeric division
    ("p / 3", (0.0, 200.0 / 3)),
    ("a / 2.0", (0.5, 5.0)),
    ("a % 3", (0.0, 2.0)),  # the sign of the dividend, below the divisor's magnitude
    ("b % 4", (-3.0, 3.0)),
    ("b % -2", (-1.0, 1.0)),
    ("p % 7.5", (0.0, 7.5)),
    ("g / -1", (0.0, 2.0 ** 31)),  # bigint holds 2^31
])
def test_division_and_modulo_by_a_constant(sql, expected):
    assert typed(sql) == pytest.approx(expected)


def test_an_integer_division_that_can_overflow_its_type_is_refused():
    # INT_MIN / -1 overflows integer, and it lies within m's bounds.
    with pytest.raises(NoBounds, match="can overflow integer"):
        typed("m / -1")
    # smallint / integer constant is integer division in integer (int2 / int4): 32,768.
    assert typed("s / -1") == (-7.0, 2.0 ** 15)


@pytest.mark.parametrize("sql", ["a / 3", "b / -2", "(a - b) / 4", "a % 3", "b % -4",
                                 "(a * b) % 7", "p / 3 + b % 2"])
def test_every_truncated_quotient_and_remainder_lies_within_the_interval(sql):
    """PostgreSQL's integer / and % (truncation toward zero, the dividend's sign) over
    every integer of the columns' bounds."""
    tree = parse_one(sql, read="postgres")
    lo, hi = interval(tree, bounds_of, lambda c: TYPES[c.name])
    for a in range(1, 11):
        for b in range(-3, 6):
            for p in (0.0, 0.5, 77.25, 200.0):
                value = _evaluate(tree, {"a": a, "b": b, "p": p}, {"a", "b"})
                assert lo - 1e-9 <= value <= hi + 1e-9, (a, b, p, value)


def test_integer_division_is_computed_by_div_and_numeric_division_as_written():
    types = lambda c: TYPES[c.name]  # noqa: E731
    node = with_clamped_columns(parse_one("a / 2 + p / 3 + a % 3", read="postgres"),
                                bounds_of, types)
    written = node.sql(dialect="postgres")
    assert written.startswith("DIV(CASE WHEN a IS NULL THEN NULL ELSE "
                              "LEAST(GREATEST(CAST(a AS DECIMAL), 1.0), 10.0) END, 2) + ")
    assert "END / 3 + " in written and written.endswith("END % 3")
