"""Build the SQL the backend runs for a private aggregate.

It returns the group keys as k0…, then one true aggregate per noisy part as c0…, and never
sorts, limits or filters on aggregate values: those are applied by the proxy after noise.
A histogram over declared domains is computed as domain LEFT JOIN data, so every key of
the domain comes back, with 0 where the data has none. The candidates of the
exponential mechanism come back the same way: every key of a mode's domain with its
count, and for a quantile the count of each grid cell, the values snapped in SQL so that
no value itself leaves the database.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from ..plan import Grouping
from ..policy.model import ColumnDomain, Domain, DomainValue, Policy, RangeDomain, ValuesDomain
from ..sensitivity.metrics import quote_identifier
from ..sql.scopes import cte_reference_ids
from .aggregate_args import clamped
from .bounding import (
    Bounding,
    bounded_rows,
    cell_contributions,
    contribution_histogram,
    weighted_rows,
)


@dataclass(frozen=True)
class KeySpec:
    column: exp.Column
    domain: Domain | None  # None: plain GROUP BY, groups chosen by key selection
    # A function of `column` grouped on (a time, CASE or arithmetic bucket); its groups
    # are the image of the column's domain, and it is evaluated on the domain only
    # (buckets.py): the private rows give the raw column, joined with `mapping_sql`.
    expression: exp.Expression | None = None
    # WHERE conjuncts that read `column` alone: a key they reject cannot hold a row, so it
    # is not listed (the statement's text decides, never the data).
    restriction: tuple[exp.Expr, ...] = ()
    # The column's type, which the domain's value is read as by the restriction.
    restriction_type: str | None = None
    # The column's type, which the domain's value is read as by `expression` (None: the
    # domain's own type).
    column_type: str | None = None
    # The placeholder name of the computed constant that evaluates the mapping before the
    # private query (`check_sql`); it is written into the join with the mapping.
    check_name: str | None = None
    # The column's enum type, which the domain's values are cast to (domain_values_sql).
    enum_type: str | None = None

    def value(self) -> exp.Expression:
        return (self.expression or self.column).copy()

    def domain_sql(self, name: str) -> str:
        """The keys released: the domain, or its image under the expression."""
        if self.expression is None:
            return self._values_sql(name)
        return (f"SELECT DISTINCT m._dp_bucket AS {name} FROM ({self.mapping_sql()}) AS m "
                "WHERE m._dp_bucket IS NOT NULL")

    def _values_sql(self, name: str) -> str:
        """The domain's values, restricted by the WHERE conjuncts on the key alone."""
        values = domain_values_sql(self.domain, name, self.enum_type)
        if self.restriction:
            kept = exp.and_(*(self._on_domain(c, "kept", name) for c in self.restriction))
            values = (f"SELECT kept.{name} FROM ({values}) AS kept "
                      f"WHERE {kept.sql(dialect='postgres')}")
        return values

    def mapping_sql(self, restricted: bool = True) -> str:
        """raw, bucket: each value of the domain (read as the column's type) and its
        bucket, one row per value. Only this SQL ever evaluates the expression."""
        assert self.expression is not None
        raw: exp.Expr = exp.column("v", table="dom", quoted=True)
        if self.column_type is not None:
            raw = exp.cast(raw, exp.DataType.build(self.column_type, dialect="postgres"))
        bucket = self.expression.transform(
            lambda n: exp.column("_dp_raw", table="r")
            if isinstance(n, exp.Column) else n).sql(dialect="postgres")
        values = self._values_sql('"v"') if restricted else \
            domain_values_sql(self.domain, '"v"', self.enum_type)
        return (f"SELECT r._dp_raw, {bucket} AS _dp_bucket FROM (SELECT DISTINCT "
                f"{raw.sql(dialect='postgres')} AS _dp_raw FROM ({values}) AS dom) AS r")

    def check_sql(self) -> str:
        """A scalar that evaluates the bucket of every domain value: computed before the
        private query, it fails (free, whatever the rows hold) where the mapping would.
        Over the whole domain: the restriction may hold parameters ($1), which have no
        value when constants are computed, and a superset checks every value the
        restricted mapping evaluates."""
        return f"(SELECT count(m._dp_bucket) FROM ({self.mapping_sql(restricted=False)}) AS m)"

    def _on_domain(self, condition: exp.Expr, alias: str, name: str) -> exp.Expr:
        """The condition with the key column read from the domain's `alias`.`name`."""
        value: exp.Expr = exp.column(name.strip('"'), table=alias, quoted=True)
        if self.restriction_type is not None:
            value = exp.cast(value, exp.DataType.build(self.restriction_type, dialect="postgres"))
        return condition.copy().transform(
            lambda n: value.copy() if isinstance(n, exp.Column) else n)


def keyed_rows(base: exp.Select, keys: list[KeySpec]) -> tuple[exp.Select, list[exp.Expression]]:
    """`base` joined with the mapping of every computed key, and each key's value: the
    column itself, or its bucket read from the mapping (never computed on a row)."""
    values: list[exp.Expression] = []
    for index, key in enumerate(keys):
        if key.expression is None:
            values.append(key.column.copy())
            continue
        alias = f"_dp_map{index}"
        condition: exp.Expr = exp.EQ(this=exp.column("_dp_raw", table=alias, quoted=True),
                                     expression=key.column.copy())
        if key.check_name is not None:  # constants.py writes the checked count here
            condition = exp.and_(condition, exp.Not(this=exp.Is(
                this=exp.Placeholder(this=key.check_name), expression=exp.Null())))
        mapping: exp.Expression = exp.maybe_parse(key.mapping_sql(), dialect="postgres")
        base = base.join(exp.Subquery(this=mapping, alias=exp.TableAlias(
            this=exp.to_identifier(alias, quoted=True))), on=condition, join_type="inner")
        values.append(exp.column("_dp_bucket", table=alias, quoted=True))
    return base, values


@dataclass(frozen=True)
class PartSpec:
    """An aggregate as written (COUNT, or the SUM/AVG whose argument is summed)."""

    aggregate: str  # "count" or "sum"
    node: exp.Expression
    magnitude: float
    bounds: tuple[float, float] | None
    # A sum whose clamping bounds are chosen at release (mechanisms/approx_bounds.py):
    # the backend returns per bucket between these edges the count and the sum, as one
    # numeric[] (counts first); `centred` for an AVG's sum of x − (L + U)/2.
    edges: tuple[Fraction, ...] | None = None
    centred: bool = False
    presence_of: int | None = None  # NoisyPart.presence_of


def rewrite(tree: exp.Select, policy: Policy, keys: list[KeySpec], parts: list[PartSpec],
            grouping: Grouping | None, bounding: Bounding | None = None) -> str:
    """The backend's SQL: keys k0…, aggregates c0…; with `bounding`, over the rows each
    privacy unit may contribute (bounding.py)."""
    base = _base(tree, policy)
    if parts and (bounding is not None or any(p.edges is not None for p in parts)):
        # Over a subquery of the rows' values: a bucketed sum reads its value many times.
        return _bounded_aggregate(base, keys, parts, grouping, bounding)
    if not keys:
        return base.select(*(_alias(_aggregate(p), f"c{i}") for i, p in enumerate(parts)),
                           append=False).sql(dialect="postgres")
    if grouping is not None and grouping.key_selection:
        keyed, values = keyed_rows(base, keys)
        query = keyed.select(
            *(_alias(v, f"k{i}") for i, v in enumerate(values)),
            *(_alias(_aggregate(p), f"c{i}") for i, p in enumerate(parts)), append=False,
        ).group_by(*(v.copy() for v in values))
        return query.sql(dialect="postgres")
    return _filled_histogram(base, keys, parts)


def mode_sql(tree: exp.Select, policy: Policy, key: KeySpec,
             bounding: Bounding | None = None) -> str:
    """k0, c0: every key of the declared domain and how many rows hold it (0 included).

    With `bounding`, each unit keeps τ rows, κ keys and τ_g rows per key: a unit moves the
    count of any one candidate by at most min(τ, τ_g), its Δu."""
    count = PartSpec("count", exp.Count(this=exp.Star()), 1.0, None)
    return _filled_histogram(_base(tree, policy), [key], [count], bounding)


def quantile_sql(tree: exp.Select, policy: Policy, column: exp.Column,
                 bounds: tuple[float, float], cells: int,
                 bounding: Bounding | None = None) -> str:
    """k0, k1, c0: per occupied grid cell, its index k1 and its count c0, in the order
    of k1 (the mechanism sorts the cells; sorted already, that takes no time).

    A value x is clamped and snapped to the nearest of the cells + 1 points
    lo + i·(hi − lo)/cells in exact NUMERIC (what QuantileGrid.index does). k0 is always
    NULL; it is `min(x)` over no row, so that its described type is the column's.
    """
    inner = _base(tree, policy).select(_alias(column.copy(), "v"), append=False)
    inner_sql = inner.sql(dialect="postgres") if bounding is None else \
        bounded_rows(inner, bounding, [], ['"v"'])
    lo, hi = (repr(b) for b in bounds)
    index = (f"CAST(LEAST(GREATEST(ROUND((q.v::numeric - {lo}) * {cells} / ({hi} - {lo})), "
             f"0), {cells}) AS int8)")
    return (f"SELECT min(q.v) FILTER (WHERE FALSE) AS k0, {index} AS k1, count(*) AS c0 "
            f"FROM ({inner_sql}) AS q WHERE q.v IS NOT NULL GROUP BY 2 ORDER BY 2")


def rewrite_chosen_count(tree: exp.Select, policy: Policy, keys: list[KeySpec],
                         bounding: Bounding, cap: int, by_size: bool = False
                         ) -> tuple[str, tuple[str, ...]]:
    """The backend's SQL for a count(*) answered at a τ known only after it runs: the
    histogram of per-unit row counts (bounding.contribution_histogram); under GROUP BY,
    every key of the domain with its cells' rows by unit (bounding.cell_contributions),
    or, `by_size`, with per unit size n the rows of such units in the cell
    (bounding.weighted_rows), a key without rows once with NULLs. With the SQL of each
    read of the rows where it reads them twice (PlanChecks.reads)."""
    base = _base(tree, policy)
    if not keys:
        return contribution_histogram(base, bounding, cap), ()
    keyed, values = keyed_rows(base, keys)
    names = [quote_identifier(f"k{i}") for i in range(len(keys))]
    inner = keyed.select(*(_alias(v, f"k{i}") for i, v in enumerate(values)), append=False)
    if by_size:
        rows, reads = weighted_rows(inner, bounding, names, [])
        return _over_domain(keys, names, rows, ['"_dp_n"', '"_dp_rows"']), reads
    return _over_domain(keys, names, cell_contributions(inner, bounding, names),
                        ["c0", "c1", "c2"], order=2), ()


def _over_domain(keys: list[KeySpec], names: list[str], rows: str, columns: list[str],
                 order: int = 1) -> str:
    """Every key of the declared domains with `rows`' `columns`, ordered by the keys and
    the first `order` columns, a key without rows once with NULLs."""
    domain = " CROSS JOIN ".join(f"({k.domain_sql(name)}) AS d{i}"
                                 for i, (k, name) in enumerate(zip(keys, names, strict=True)))
    outer_keys = ", ".join(f"d{i}.{name}" for i, name in enumerate(names))
    join = " AND ".join(f"t.{name} = d{i}.{name}" for i, name in enumerate(names))
    outputs = ", ".join(f"t.{column}" for column in columns)
    ordered = ", ".join(f"t.{column}" for column in columns[:order])
    return (f"SELECT {outer_keys}, {outputs} FROM {domain} LEFT JOIN ({rows}) AS t "
            f"ON {join} ORDER BY {outer_keys}, {ordered}")


def rewrite_weighted(tree: exp.Select, policy: Policy, keys: list[KeySpec],
                     parts: list[PartSpec], bounding: Bounding) -> tuple[str, tuple[str, str]]:
    """The backend's SQL for aggregates weighted per unit at a τ known only after it runs:
    per key and per unit size n (bounding.weighted_rows), the rows and every part's
    aggregate; a sum whose clamping bounds are chosen at release as its bucket's index
    (grouped on), count and sum, from which the proxy builds its buckets' arrays (two
    aggregates instead of one per bucket and edge). Under GROUP BY
    every key of the domain, a key without rows once with NULLs. With the SQL of the
    statement's two reads of its rows (PlanChecks.reads)."""
    keyed, values = keyed_rows(_base(tree, policy), keys)
    inner = keyed.select(*(_alias(v, f"k{i}") for i, v in enumerate(values)),
                         *(_alias(_argument(p), f"a{i}") for i, p in enumerate(parts)),
                         append=False)
    names = [quote_identifier(f"k{i}") for i in range(len(keys))]
    columns: list[tuple[str, bool]] = []
    for i, part in enumerate(parts):
        value = f"q.{quote_identifier(f'a{i}')}"
        if part.edges is None:
            columns.append((f"{_outer_aggregate(part, i)} AS {quote_identifier(f'c{i}')}",
                            False))
            continue
        inner_edges = ", ".join(_edge(e) for e in part.edges[1:-1])
        columns += [(f"width_bucket({value}, ARRAY[{inner_edges}]::numeric[]) AS "
                     f"{quote_identifier(f'b{i}')}", True),
                    (f"count({value}) AS {quote_identifier(f'n{i}')}", False),
                    (f"sum({value}) AS {quote_identifier(f'c{i}')}", False)]
    rows, reads = weighted_rows(inner, bounding, names, columns)
    if not keys:
        # In no order: the proxy's sums are exact in any order, and an ORDER BY n here
        # makes PostgreSQL sort every row before grouping (it cannot tell how few (n,
        # bucket) groups there are), 20% of the statement at 1,000,000 rows.
        return rows, reads
    return _over_domain(keys, names, rows, ['"_dp_n"', '"_dp_rows"'] + [
        column.rsplit(" AS ", 1)[1] for column, _ in columns]), reads


def _base(tree: exp.Select, policy: Policy) -> exp.Select:
    """The statement's FROM, joins and WHERE, with every table schema-qualified."""
    base = tree.copy()
    for key in ("order", "limit", "offset", "having", "group"):
        base.set(key, None)
    ctes = cte_reference_ids(base)
    for table in base.find_all(exp.Table):
        if id(table) in ctes or not isinstance(table.this, exp.Identifier):
            continue
        schema, name = policy.resolve(table.db, table.name)
        table.set("db", exp.to_identifier(schema, quoted=True))
        table.set("this", exp.to_identifier(name, quoted=True))
    return base


def _alias(node: exp.Expr, name: str) -> exp.Expr:
    return exp.alias_(node, name, quoted=True)


def _aggregate(part: PartSpec) -> exp.Expression:
    if part.aggregate == "count":
        return part.node.copy()
    assert part.bounds is not None and part.edges is None  # bucketed: _outer_aggregate
    return exp.Sum(this=clamped(part.node.this, part.bounds))


def _buckets(value: str, edges: tuple[Fraction, ...]) -> str:
    """ARRAY[count per bucket…, sum per bucket…] of a value clamped to [edges[0],
    edges[-1]]: bucket i holds edges[i] <= v < edges[i + 1], the last one v = edges[-1]."""
    conditions = []
    for i in range(len(edges) - 1):
        parts = ([f"{value} >= {_edge(edges[i])}"] if i else []) + \
            ([f"{value} < {_edge(edges[i + 1])}"] if i < len(edges) - 2 else [])
        conditions.append(" AND ".join(parts) or "TRUE")
    counts = [f"count({value}) FILTER (WHERE {c})" for c in conditions]
    sums = [f"COALESCE(sum({value}) FILTER (WHERE {c}), 0)" for c in conditions]
    return f"ARRAY[{', '.join(counts + sums)}]::numeric[]"


def _edge(edge: Fraction) -> str:
    """An edge as an exact NUMERIC literal (a power of two is a finite decimal)."""
    if float(edge) == edge:
        return repr(float(edge))
    return f"({edge.numerator}::numeric / {edge.denominator})"


def _inner_rows(base: exp.Select, keys: list[KeySpec], parts: list[PartSpec],
                bounding: Bounding | None) -> str:
    """k0…, a0…: the keys and aggregated values of every row (every kept row, bounded)."""
    keyed, values = keyed_rows(base, keys)
    inner = keyed.select(
        *(_alias(v, f"k{i}") for i, v in enumerate(values)),
        *(_alias(_argument(p), f"a{i}") for i, p in enumerate(parts)), append=False,
    )
    if bounding is None:
        return inner.sql(dialect="postgres")
    return bounded_rows(inner, bounding, [quote_identifier(f"k{i}") for i in range(len(keys))],
                        [quote_identifier(f"a{i}") for i in range(len(parts))])


def _bounded_aggregate(base: exp.Select, keys: list[KeySpec], parts: list[PartSpec],
                       grouping: Grouping | None, bounding: Bounding | None) -> str:
    if keys and not (grouping is not None and grouping.key_selection):
        return _filled_histogram(base, keys, parts, bounding)
    rows = _inner_rows(base, keys, parts, bounding)
    key_names = [f"q.{quote_identifier(f'k{i}')}" for i in range(len(keys))]
    outputs = [f"{name} AS {quote_identifier(f'k{i}')}" for i, name in enumerate(key_names)]
    outputs += [f"{_outer_aggregate(p, i)} AS {quote_identifier(f'c{i}')}"
                for i, p in enumerate(parts)]
    group = f" GROUP BY {', '.join(key_names)}" if keys else ""
    return f"SELECT {', '.join(outputs)} FROM ({rows}) AS q{group}"


def _filled_histogram(base: exp.Select, keys: list[KeySpec], parts: list[PartSpec],
                      bounding: Bounding | None = None) -> str:
    key_names = [quote_identifier(f"k{i}") for i in range(len(keys))]
    domain = " CROSS JOIN ".join(
        f"({k.domain_sql(name)}) AS d{i}"
        for i, (k, name) in enumerate(zip(keys, key_names, strict=True)))
    outer_keys = ", ".join(f"d{i}.{name}" for i, name in enumerate(key_names))
    if not parts:  # only the keys: the domain itself, the private rows are not read
        return f"SELECT {outer_keys} FROM {domain} ORDER BY {outer_keys}"
    aggregates = ", ".join(f"{_outer_aggregate(p, i)} AS {quote_identifier(f'c{i}')}"
                           for i, p in enumerate(parts))
    join = " AND ".join(f"q.{name} = d{i}.{name}" for i, name in enumerate(key_names))
    return (f"SELECT {outer_keys}, {aggregates} FROM {domain} "
            f"LEFT JOIN ({_inner_rows(base, keys, parts, bounding)}) AS q ON {join} "
            f"GROUP BY {outer_keys} ORDER BY {outer_keys}")


def _argument(part: PartSpec) -> exp.Expression:
    """What the inner query passes up for one part (NULL where the part counts nothing)."""
    argument = part.node.this
    if part.aggregate == "sum":
        assert part.bounds is not None
        return clamped(argument, part.bounds)
    if isinstance(argument, exp.Distinct):
        return argument.expressions[0].copy()
    if isinstance(argument, exp.Star):
        return exp.Literal.number(1)
    return argument.copy()


def _outer_aggregate(part: PartSpec, index: int) -> str:
    column = f"q.{quote_identifier(f'a{index}')}"
    if part.aggregate == "sum":
        return f"sum({column})" if part.edges is None else _buckets(column, part.edges)
    if isinstance(part.node.this, exp.Distinct):
        return f"count(DISTINCT {column})"
    return f"count({column})"


def domain_values_sql(domain: Domain | None, name: str, enum_type: str | None = None) -> str:
    """The domain's values as a one-column SELECT (also what `dpgate policy check` types).

    For an enum column, its labels cast to `enum_type`: they are written as text, and
    PostgreSQL has no operator enum = text. The keys then come back as the column's type,
    in the enum's order, as its own GROUP BY would give them."""
    if enum_type is not None:
        values = domain_values_sql(domain, '"v"')
        return f"SELECT CAST(e.v AS {enum_type}) AS {name} FROM ({values}) AS e"
    if isinstance(domain, ValuesDomain):
        rows = ", ".join(f"({_literal(value)})" for value in domain.values)
        return f"SELECT v AS {name} FROM (VALUES {rows}) AS t(v)"
    if isinstance(domain, RangeDomain):
        # In FROM, not in the select list: a set-returning function in a select list is
        # what plan_check refuses (ProjectSet).
        if isinstance(domain.low, dt.date):
            return (f"SELECT g.v::date AS {name} FROM generate_series({_literal(domain.low)}, "
                    f"{_literal(domain.high)}, INTERVAL '{domain.step} day') AS g(v)")
        return (f"SELECT g.v AS {name} FROM generate_series({domain.low}, {domain.high}, "
                f"{domain.step}) AS g(v)")
    if isinstance(domain, ColumnDomain):
        schema, table = (quote_identifier(p) for p in domain.table.split(".", 1))
        column = quote_identifier(domain.column)
        return (f"SELECT DISTINCT {column} AS {name} FROM {schema}.{table} "
                f"WHERE {column} IS NOT NULL")
    raise ValueError("a filled histogram needs a domain for every key")


def _literal(value: DomainValue) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return exp.Literal.string(str(value)).sql(dialect="postgres")
