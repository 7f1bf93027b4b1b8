"""Coverage of the error bar every released column states, per column kind (issue 29).

For each kind — a count, a sum, an average, a variance, a standard deviation, a ratio of
released values, a quantile and a histogram cell — `queries` statements over windows of
100 products (~10,000 orders each) are planned with the demo policy (unit mode: the
customer, τ chosen per query) and at row level, run once on PostgreSQL for their
pre-noise rows, and released `draws` times at ε 0.1 with dpgate's own release() from a
seeded source (no analyst shift, as bench/accuracy.py). A column computed from released
values (variance, stddev, ratio) is computed as the proxy does, by its post_sql on
PostgreSQL over the released values. The stated interval — the NOTICE's "±a", "a (upper
end +b)" or "b (lower end −a)" — covers when PostgreSQL's exact, untruncated answer lies
in it. A quantile states a rank: it covers when the released grid point's rank among the
untruncated rows snapped to the grid as the mechanism snaps them, [#{x < y}, #{x <= y}],
comes within that many rows of p·n (its value interval would need the data:
docs/queries.md).

    .venv/bin/python bench/accuracy.py --kinds [--queries 200] [--draws 1]
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mechanisms.seeded_source import SeededRandomSource  # noqa: E402
from proxy.config import PrivacySettings  # noqa: E402
from proxy.engine.release import release  # noqa: E402
from rewriter.aggregate.private import plan_private_aggregate  # noqa: E402
from rewriter.analysis.classify import parse_query  # noqa: E402
from rewriter.plan import OutputKind, PrivateAggregate  # noqa: E402
from rewriter.release.computed import BoundValues, with_rows  # noqa: E402
from rewriter.sensitivity.calibrate import calibrate  # noqa: E402
from tests.unit_support import demo_policy, measured_metrics  # noqa: E402

EPSILON = 0.1
DELTA = 1e-8
NO_SHIFT = PrivacySettings(shift_interval=(0.0, 0.0))
WINDOW = "FROM orders WHERE product_id BETWEEN {n} AND {n} + 99"
KINDS = {
    "count": "SELECT count(*) " + WINDOW,
    "sum": "SELECT sum(order_cost) " + WINDOW,
    "avg": "SELECT avg(order_cost) " + WINDOW,
    "variance": "SELECT var_samp(order_cost) " + WINDOW,
    "stddev": "SELECT stddev(order_cost) " + WINDOW,
    "ratio": "SELECT count(*) FILTER (WHERE quantity > 3) * 100.0 / count(*) " + WINDOW,
    "quantile": "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY order_cost) " + WINDOW,
    "histogram cell": "SELECT quantity, count(*) " + WINDOW + " GROUP BY quantity",
}
QUANTILE_LEVEL = 0.5
# PostgreSQL's names of the types released values are cast to in post_sql (proxy: the
# Describe of the statement; here counts are bigint, every other aggregate numeric).
_TYPE_NAMES = {20: "bigint", 23: "integer", 1700: "numeric", 25: "text"}


@dataclass
class Kind:
    """One kind in one mode: cells released, how many the interval covered, NULL answers,
    and the intervals' relative half-widths."""

    cells: int = 0
    covered: int = 0
    nulls: int = 0
    unbounded: int = 0
    widths: list[float] = field(default_factory=list)


def ends(bound: int | str | None) -> tuple[float, float] | None:
    """(below, above) of a stated interval, None when none is stated."""
    if bound is None:
        return None
    text = str(bound)
    first = text.split()[0]
    if first == "∞":
        return math.inf, math.inf
    near = float(first)
    if "(upper end +" in text:
        return near, float(text.split("(upper end +")[1].split(")")[0])
    if "(lower end −" in text:
        return float(text.split("(lower end −")[1].split(")")[0]), near
    return near, near


def run_kinds(dsn: str, count: int, draws: int) -> None:
    metrics = measured_metrics(dsn)
    modes = {"unit": demo_policy(), "row": demo_policy(unit=False)}
    rng = SeededRandomSource(2029)
    results: dict[tuple[str, str], Kind] = {}
    with psycopg.connect(dsn, autocommit=True) as connection:
        for kind, template in KINDS.items():
            print(f"{kind}: {count} queries × {draws} releases × {len(modes)} modes",
                  file=sys.stderr, flush=True)
            for mode, policy in modes.items():
                figures = results.setdefault((kind, mode), Kind())
                for n in range(1, count + 1):
                    _measure(connection, template.format(n=(n * 37) % 900 + 1), policy,
                             metrics, rng, draws, figures)
    print(f"\nerror-bar coverage per column kind at epsilon {EPSILON:g}, {count} queries "
          f"x {draws} releases, against PostgreSQL's exact untruncated answer "
          "(quantile: in rank)")
    print(f"{'kind':15} {'mode':5} {'cells':>6} {'covered':>8} {'NULL':>5} {'unbounded':>9} "
          f"{'median ±/truth':>15}")
    for (kind, mode), figures in results.items():
        share = figures.covered / figures.cells if figures.cells else float("nan")
        width = statistics.median(figures.widths) if figures.widths else float("nan")
        print(f"{kind:15} {mode:5} {figures.cells:>6} {share:>8.1%} {figures.nulls:>5} "
              f"{figures.unbounded:>9} {width:>15.1%} "
              f"{'met' if share >= 0.95 else 'MISS'}", flush=True)


def _measure(connection: psycopg.Connection, sql: str, policy, metrics,
             rng: SeededRandomSource, draws: int, figures: Kind) -> None:
    plan = plan_private_aggregate(parse_query(sql), policy, 0, metrics)
    cursor = connection.execute(plan.sql)
    rows = [[None if v is None else _text(v) for v in row] for row in cursor.fetchall()]
    key_types = [column.type_code for column in cursor.description[:plan.keys]]
    truth = {tuple(str(k) for k in row[:-1]): row[-1] for row in connection.execute(sql)}
    calibration = calibrate(plan, EPSILON, DELTA)
    columns = [(o.name, _type_oid(o, key_types)) for o in plan.outputs] \
        if plan.post_sql is not None else None
    for _ in range(draws):
        released = release(plan, calibration, key_types, rows, 0.0, NO_SHIFT, rng, columns)
        name = plan.visible[-1].name
        values = _values(connection, plan, released.rows, columns)
        stated = ends(released.bounds.get(name))
        for row in values:
            key, value = tuple(row[:-1]), row[-1]
            if value is None:
                figures.nulls += 1
                continue
            figures.cells += 1
            if stated is None:
                continue
            below, above = stated
            figures.unbounded += math.isinf(above)
            value = float(value)
            if any(o.kind == OutputKind.CHOICE for o in plan.outputs):
                grid = plan.parts[0].grid
                assert grid is not None
                figures.covered += _rank_covered(connection, sql, value, grid.step / 2, below)
                continue
            exact = float(truth.get(key) or 0)  # a cell PostgreSQL does not list: 0
            figures.covered += value - below <= exact <= value + above
            if exact and not math.isinf(above):
                figures.widths.append((below + above) / 2 / abs(exact))


def _values(connection: psycopg.Connection, plan: PrivateAggregate,
            rows: list[list[str | None]], columns: list[tuple[str, int]] | None
            ) -> list[list[str | None]]:
    """The answer as the client sees it: post_sql over the released values, as the proxy
    runs it (release/computed.py), or the released rows."""
    if plan.post_sql is None:
        return rows
    assert columns is not None
    bound = BoundValues(0)
    sql = with_rows(plan.post_sql, rows, [_TYPE_NAMES[t] for _, t in columns], bound)
    with psycopg.RawCursor(connection) as cursor:
        cursor.execute(sql, [None if v is None else v.decode() for v in bound.values])
        return [[None if v is None else str(v) for v in row] for row in cursor.fetchall()]


def _rank_covered(connection: psycopg.Connection, sql: str, value: float, half: Fraction,
                  ranks: float) -> bool:
    """Whether the released grid point y's rank among the untruncated rows snapped to the
    grid as the mechanism snaps them (to the nearest point, `half` a step either side),
    [#{snapped x < y}, #{snapped x <= y}], comes within `ranks` of p·n."""
    where = sql.split(" FROM ", 1)[1]
    point = Fraction(value)
    low, high = (str(float(point - half)), str(float(point + half)))
    below, upto, n = connection.execute(
        "SELECT count(*) FILTER (WHERE order_cost < %s::numeric), count(*) FILTER (WHERE "
        f"order_cost < %s::numeric), count(order_cost) FROM {where}", (low, high)).fetchone()
    target = QUANTILE_LEVEL * n
    return max(below - target, 0, target - upto) <= ranks


def _type_oid(output, key_types: list[int]) -> int:
    if output.kind == OutputKind.KEY:
        return key_types[output.parts[0]]
    return 20 if output.aggregate in ("count", "count_distinct") else 1700


def _text(value: object) -> bytes:
    if isinstance(value, list):
        return ("{" + ",".join(str(v) for v in value) + "}").encode()
    return str(value).encode()
