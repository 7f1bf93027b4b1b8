"""Error bars of the statement's own expressions over released values (post_sql):
`stddev(x)`, `count(*) * 2`, `sum(x) / count(*)`, `round(avg(x), 1)`, a CASE over them.

Each column's expression reads k noisy values; each gets its interval at β/k (a union
bound: all k hold at once with probability ≥ 1 − β), and rewriter/release/propagate.py
carries them through the expression. The NOTICE states, over the rows, the widest
distance from the released value to either end of its row's interval: released values
and public calibration only, never the data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from rewriter.plan import OutputColumn, OutputKind, PrivateAggregate
from rewriter.release.propagate import (
    INFINITE,
    Input,
    Interval,
    NoInterval,
    inputs_of,
    interval_of,
    projections,
)

# (output, its released value, the row's drawn parts, β) -> the output's interval
OutputInterval = Callable[[OutputColumn, object, list, float], Interval | None]
# Why a computed column may have no interval (the NOTICE, SHOW dp.last_answers).
NOT_STATED = ("NULL in every row, text, a date, or an operation dpgate does not bound, "
              "such as %, a cast to text or an unknown function")
UNBOUNDED = "∞ (a divisor's interval contains 0: the value may be anything)"


def computed_bounds(plan: PrivateAggregate, rows: Sequence[tuple[list, list]],
                    interval: OutputInterval, beta: float,
                    rounded: Callable[[float], int | str], whole: Sequence[bool]
                    ) -> dict[str, int | str]:
    """Per visible computed column with an interval, by its label (plan.labels): its
    (1 − β) error bar over `rows` (each the released outputs and the drawn parts),
    `rounded` up for the NOTICE; `whole` says which outputs PostgreSQL reads in an integer
    type."""
    assert plan.post_sql is not None and plan.computed is not None
    bounds: dict[str, int | str] = {}
    ranges = plan.computed.ranges or (None,) * len(plan.visible)
    # Per row, each input as read at a β (None: its released value), shared by the
    # columns: an interval is worked out once, not at every reference to it.
    caches: list[dict[tuple[int, float | None], Input]] = [{} for _ in rows]
    for output, label, node, limits in zip(plan.visible, plan.labels,
                                           projections(plan.post_sql), ranges, strict=True):
        if output.kind != OutputKind.COMPUTED:
            continue
        try:
            read = inputs_of(node)
            noisy = {plan.outputs[i].parts for i in read
                     if plan.outputs[i].kind == OutputKind.NOISY}
            share = beta / max(len(noisy), 1)
            below = above = -math.inf  # until a row's value is not NULL
            for (values, drawn), cache in zip(rows, caches, strict=True):
                ends = interval_of(node, _inputs(plan, values, drawn, interval, share, whole,
                                                 cache))
                point = interval_of(node, _inputs(plan, values, drawn, None, share, whole,
                                                  cache))
                if ends is None or point is None:
                    continue  # NULL here
                if limits is not None:  # the truth lies within them, whatever the data
                    cut = max(ends[0], limits[0]), min(ends[1], limits[1])
                    # (an interval wholly outside them missed: the range itself holds)
                    ends = cut if cut[0] <= cut[1] else limits
                below = max(below, point[1] - ends[0])
                above = max(above, ends[1] - point[0])
        except (NoInterval, ArithmeticError, ValueError):
            # No interval rather than no answer: the values are released and charged.
            continue
        if below > -math.inf:
            bounds[label] = _bar(max(below, 0.0), max(above, 0.0), rounded)
    return bounds


def _inputs(plan: PrivateAggregate, values: list, drawn: list,
            interval: OutputInterval | None, beta: float, whole: Sequence[bool],
            cache: dict[tuple[int, float | None], Input]) -> Callable[[int], Input]:
    """The released outputs as inputs: a key its value (a number, else text), a noisy
    output its interval (`interval` None: the released value itself), kept in `cache`."""
    def cached(index: int) -> Input:
        key = (index, None if interval is None else beta)
        if key not in cache:
            cache[key] = of(index)
        return cache[key]

    def of(index: int) -> Input:
        output, value = plan.outputs[index], values[index]
        if output.kind != OutputKind.NOISY:
            return Input(_key(value), ("key", index), whole_type=whole[index])
        # A SUM or an AVG of no row is NULL in PostgreSQL: the truth of one released with a
        # value may be NULL, and one released NULL (its noisy count below ½) may have any.
        nullable = output.aggregate == "avg" or output.present is not None
        if interval is None or (value is None and not nullable):
            # as PostgreSQL reads it: an integer column's value is sent rounded (_text)
            number = None if value is None else \
                float(round(value) if whole[index] else value)
            point = None if number is None else (number, number)
            return Input(point, output.parts, whole_type=whole[index])
        ends = INFINITE if value is None else interval(output, value, drawn, beta)
        if ends is None:
            raise NoInterval("a value without an interval")
        # The truth of a count is a whole number of rows (weighted or not, as released).
        return Input(ends, output.parts, output.aggregate in ("count", "count_distinct"),
                     whole[index], nullable)
    return cached


def _key(value: object) -> Interval | str | None:
    if value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    return (number, number) if math.isfinite(number) else str(value)


def _bar(below: float, above: float, rounded: Callable[[float], int | str]) -> int | str:
    """± the nearer end, and the further end named, as a count's '(upper end +N)'."""
    if not (math.isfinite(below) and math.isfinite(above)):  # ∞, or ∞ − ∞
        return UNBOUNDED
    low, high = rounded(below), rounded(above)
    if low == high:
        return low
    return f"{low} (upper end +{high})" if above > below else f"{high} (lower end −{low})"
