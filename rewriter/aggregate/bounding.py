"""Contribution bounding in the rewritten SQL.

After FROM, joins and WHERE, and before any aggregate, each privacy unit keeps at most τ
rows; under GROUP BY it also keeps at most κ groups and τ_g rows per group. Which rows
and groups a unit keeps is decided by `random()`, one draw per row: the choice depends on
nothing but that unit's own rows, so adding or removing a unit changes only that unit's
kept rows (the sensitivity argument), and a uniform choice keeps the answer an unbiased
sample of each unit's rows (an order by value would bias a SUM). The database never
tells how many rows were left out: only the aggregates of the kept rows leave it.

The stages, each a subquery because a window function cannot be filtered at its level:

    rows  (k…, a…, u = unit, r = random())
    → rg = row_number() per (unit, group) by r; keep rg <= τ_g
    → gr = min(r) per (unit, group); g = dense_rank() per unit by (gr, keys): a random
      order of the unit's groups; keep g <= κ
    → rt = row_number() per unit by r; keep rt <= τ

Without GROUP BY only the last two stages run; with it, the τ_g stage only when τ_g < τ
and the κ stage only when κ < τ (else it could not bind: a unit of ≤ τ rows has ≤ τ
groups, and the planner sets κ = τ where a group bound would not lower the noise).
The window functions are dpgate's own: plan_check.py allows as many WindowAgg nodes in
PostgreSQL's plan as `window_count` says, and refuses any further one (an analyst's
window function stays refused).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

UNIT = '"_dp_unit"'
DRAW = '"_dp_draw"'


@dataclass(frozen=True)
class Bounding:
    """What the rewriter needs to bound contributions: the unit of a row and τ, κ, τ_g."""

    unit: exp.Expression  # over the statement's FROM aliases
    max_contributions: int
    max_groups: int
    max_group_contributions: int
    # Foreign-key hops to the unit that dpgate joins itself (unit.py): FROM items, and
    # the WHERE conjuncts that link them.
    tables: tuple[exp.Expr, ...] = ()
    conditions: tuple[exp.Expression, ...] = ()



def window_count(bounding: Bounding, grouped: bool) -> int:
    """The window functions bounded_rows writes (with GROUP BY when `grouped`)."""
    rows, groups = _stages(bounding, grouped)
    return 1 + int(rows) + 2 * int(groups)


def _stages(bounding: Bounding, grouped: bool) -> tuple[bool, bool]:
    """Whether the τ_g stage and the κ stage can bind."""
    tau = bounding.max_contributions
    return (grouped and bounding.max_group_contributions < tau,
            grouped and bounding.max_groups < tau)


def bounded_rows(inner: exp.Select, bounding: Bounding, keys: list[str],
                 values: list[str]) -> str:
    """SQL of the rows of `inner` (columns `keys` then `values`, quoted names) that the
    bounds keep, with the same columns."""
    rows = _with_unit(inner, bounding).select(
        exp.alias_(exp.func("RANDOM"), DRAW.strip('"'), quoted=True))
    columns = ", ".join(f"b.{name}" for name in keys + values)
    sql = rows.sql(dialect="postgres")
    group_rows, groups = _stages(bounding, bool(keys))
    group = ", ".join(f"b.{name}" for name in keys)
    if group_rows:
        sql = (f"SELECT b.*, row_number() OVER (PARTITION BY b.{UNIT}, {group} ORDER BY "
               f"b.{DRAW}) AS \"_dp_group_row\" FROM ({sql}) AS b")
        sql = (f"SELECT b.* FROM ({sql}) AS b "
               f"WHERE b.\"_dp_group_row\" <= {bounding.max_group_contributions}")
    if groups:
        sql = (f"SELECT b.*, min(b.{DRAW}) OVER (PARTITION BY b.{UNIT}, {group}) "
               f"AS \"_dp_group_draw\" FROM ({sql}) AS b")
        sql = (f"SELECT b.*, dense_rank() OVER (PARTITION BY b.{UNIT} ORDER BY "
               f"b.\"_dp_group_draw\", {group}) AS \"_dp_group\" FROM ({sql}) AS b")
        sql = (f"SELECT b.* FROM ({sql}) AS b WHERE b.\"_dp_group\" <= {bounding.max_groups}")
    sql = (f"SELECT b.*, row_number() OVER (PARTITION BY b.{UNIT} ORDER BY b.{DRAW}) "
           f"AS \"_dp_row\" FROM ({sql}) AS b")
    return (f"SELECT {columns} FROM ({sql}) AS b "
            f"WHERE b.\"_dp_row\" <= {bounding.max_contributions}")


def contribution_histogram(base: exp.Select, bounding: Bounding, cap: int) -> str:
    """SQL of the histogram of per-unit row counts of `base`'s rows (FROM, joins, WHERE):
    `c0` = min(c_u, cap), `c1` = the number of units with that count. A hash aggregate
    over the rows, then one over the units: no draw, no window. A count with τ chosen per
    query (mechanisms/contribution_bound.py) needs nothing else: both the choice of τ (how
    many units have more than τ rows) and the answer Σ_u min(c_u, τ) follow from it.
    The units are asked for in order: where an index on the unit can give the rows so,
    PostgreSQL then counts them in one pass down the index (a quarter of the hash
    aggregate's time at 1,000,000 rows), and elsewhere it sorts the units' counts,
    far fewer than the rows (docs/privacy-unit.md, "Cost")."""
    rows = _with_unit(base.select(append=False), bounding).sql(dialect="postgres")
    return (f'SELECT LEAST(h."_dp_rows", {cap}) AS "c0", count(*) AS "c1" FROM '
            f'(SELECT count(*) AS "_dp_rows" FROM ({rows}) AS b GROUP BY b.{UNIT} '
            f"ORDER BY b.{UNIT}) AS h GROUP BY 1 ORDER BY 1")


def _with_unit(rows: exp.Select, bounding: Bounding) -> exp.Select:
    """`rows` with the unit of each as `_dp_unit`, through the hops dpgate joins itself.
    Rows whose unit is NULL belong to no unit and are left out, in every unit-mode shape
    alike (docs/privacy-unit.md, "Rows without a unit")."""
    rows = rows.select(exp.alias_(bounding.unit.copy(), UNIT.strip('"'), quoted=True))
    for table in bounding.tables:  # a comma item: valid after explicit JOINs and commas
        rows.append("joins", exp.Join(this=table.copy()))
    for condition in bounding.conditions:
        rows = rows.where(condition.copy())
    return rows.where(exp.Not(this=exp.Is(this=bounding.unit.copy(), expression=exp.Null())))


def cell_contributions(inner: exp.Select, bounding: Bounding, keys: list[str]) -> str:
    """SQL of a histogram's rows by unit, for a τ chosen per query: per key (`keys`, the
    quoted key columns of `inner`), per m = a unit's rows in that cell and n = its rows
    in all, `c2` = how many units have that (m, n). One aggregate per (unit, key), then a
    window over those (never more than the rows) for n = Σ m of the unit, then one
    aggregate per (key, m, n): no join of the rows back to their units and no copy of
    them. Each cell at any τ is then Σ units·(m if n ≤ τ else m·τ/n), a unit adding at
    most τ rows in all. Rows whose unit is NULL are left out (`_with_unit`)."""
    rows = _with_unit(inner, bounding).sql(dialect="postgres")
    group = ", ".join(f"b.{key}" for key in keys)
    cells = ", ".join(f"w.{key}" for key in keys)
    # The unit first: a sort-based plan of the aggregate then feeds the window in order.
    return (f'SELECT {cells}, w."_dp_rows" AS "c0", w."_dp_n" AS "c1", count(*) AS "c2" '
            f'FROM (SELECT g.*, CAST(sum(g."_dp_rows") OVER (PARTITION BY g.{UNIT}) '
            f'AS int8) AS "_dp_n" FROM (SELECT b.{UNIT}, {group}, count(*) AS "_dp_rows" '
            f"FROM ({rows}) AS b GROUP BY b.{UNIT}, {group}) "
            f'AS g) AS w GROUP BY {cells}, w."_dp_rows", w."_dp_n"')


def weighted_rows(inner: exp.Select, bounding: Bounding, keys: list[str],
                  columns: list[tuple[str, bool]]) -> tuple[str, tuple[str, str]]:
    """SQL of `inner`'s rows aggregated per key (`keys`, quoted columns of `inner`) and per
    n = the rows of their unit in all: `_dp_n`, `_dp_rows` (rows of such units in the
    group), then `columns` (over `q.`), those marked True grouped on too (a bucket's
    index). The proxy weighs each (group, n) by min(1, τ/n) after choosing τ
    (proxy/engine/weighted_sums.py): a unit's rows then weigh at most τ in all, with no
    sort. Rows whose unit is NULL are left out (`_with_unit`). Returned with the SQL of
    its two reads, which the plan check plans on their own (PlanChecks.reads).

    The rows are read twice: once for the units' sizes, asked for in unit order as
    contribution_histogram's (an index on the unit counts them in one pass, no hash
    table), and once joined to them; no CTE, which PostgreSQL would write to a tuplestore
    and read back (docs/privacy-unit.md, "Cost"). The two reads give the same rows only
    where nothing in the statement draws a random number or reads the clock on its rows
    (weighted.py checks it, sql.functions.reads_alike) and one statement reads one
    snapshot; PlanChecks.reads lets the plan check expect the second read."""
    rows = _with_unit(inner, bounding)
    # OFFSET 0 keeps the joined rows a subquery of their own, so that each value (a
    # clamped CASE) is computed once per row: pulled up, PostgreSQL repeats it in every
    # aggregate and bucket over it (20% of a lone sum at 1,000,000 rows). Rows with no
    # value (a count histogram's) are pulled up: the fence costs them 15%. The sizes'
    # read is pulled up, so that it can count the units down an index.
    fenced = (rows.copy().offset(0) if columns else rows).sql(dialect="postgres")
    outputs = [f"q.{key}" for key in keys] + ['u."_dp_n"', 'count(*) AS "_dp_rows"'] + \
        [column for column, _ in columns]
    group = [str(i + 1) for i in range(len(keys) + 1)] + \
        [str(len(keys) + 3 + i) for i, (_, grouped) in enumerate(columns) if grouped]
    sizes = (f'SELECT r.{UNIT}, count(*) AS "_dp_n" FROM ({rows.sql(dialect="postgres")}) '
             f"AS r GROUP BY r.{UNIT} ORDER BY r.{UNIT}")
    return (f'SELECT {", ".join(outputs)} FROM ({fenced}) AS q JOIN ({sizes}) AS u '
            f"ON u.{UNIT} = q.{UNIT} GROUP BY {', '.join(group)}"), (fenced, sizes)
