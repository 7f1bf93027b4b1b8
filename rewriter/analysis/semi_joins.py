"""IN (SELECT …) and EXISTS (…) over private tables, written as joins with a DISTINCT table.

`R WHERE x IN (SELECT c FROM T WHERE w)` keeps the rows of R whose x is among the values
of c: exactly the rows of `R, (SELECT DISTINCT c AS k FROM T WHERE w) AS s WHERE x = s.k`,
since each R row meets each distinct value at most once and NULL equals nothing on either
side. `EXISTS (SELECT … FROM T WHERE T.c = R.x AND w)` is the same semi-join on its
correlating equalities, and `NOT EXISTS (…)` its anti-join:
`R LEFT JOIN (…) AS s ON x = s.k WHERE s.k IS NULL` (a matched row has a non-NULL s.k).
Once so written, the analyses of joins and derived tables apply unchanged, in both privacy
models: docs/queries.md ("Semi-joins and anti-joins") argues the sensitivity.

Only a conjunct of a WHERE that the subquery reads private tables (or CTEs) in is rewritten;
one over public tables is computed first, as before (constants.py). `NOT IN` is refused:
one NULL among the subquery's values makes it NULL for every row, so one changed row
could change every row of R.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from ..errors import unsupported
from ..policy.model import Policy
from ..sql.nodes import unalias, unparen
from ..sql.positions import position_of
from .constants import from_items
from .joins import conjuncts

PREFIX = "_dp_semi"  # the derived tables and columns dpgate writes (reserved names)
_CORRELATION_HINT = ("Correlate with equalities of columns only: EXISTS (SELECT 1 FROM t "
                     "WHERE t.x = r.x AND …).")


def rewrite_semi_joins(tree: exp.Select, policy: Policy, offset: int) -> None:
    """Rewrite, in place, the semi- and anti-joins over private tables in the WHERE of
    every query that reads rows (the statement, its CTEs and derived tables)."""
    ctes = frozenset(cte.alias_or_name for cte in tree.find_all(exp.CTE))
    counter = iter(range(1, 1_000_000))
    for select in list(_row_queries(tree)):
        _rewrite(select, policy, ctes, offset, counter)


def _row_queries(query: exp.Expression) -> Iterator[exp.Select]:
    if isinstance(query, exp.SetOperation):
        yield from _row_queries(query.this)
        yield from _row_queries(query.expression)
    with_ = query.args.get("with_") or query.args.get("with")
    for cte in with_.expressions if with_ is not None else []:
        yield from _row_queries(cte.this)
    if not isinstance(query, exp.Select):
        return
    yield query
    items = [query.args.get("from_") or query.args.get("from"), *(query.args.get("joins") or [])]
    for item in items:
        if item is not None and isinstance(item.this, exp.Subquery):
            yield from _row_queries(item.this.this)


def _rewrite(select: exp.Select, policy: Policy, ctes: frozenset[str], offset: int,
             counter: Iterator[int]) -> None:
    where = select.args.get("where")
    if where is None:
        return
    items = list(from_items(select))
    kept = []
    for conjunct in conjuncts(where.this):
        negated = isinstance(conjunct, exp.Not)
        inner = unparen(conjunct.this) if negated else conjunct
        subquery = _private_subquery(inner, policy, ctes)
        if subquery is None:
            kept.append(conjunct)
            continue
        if isinstance(inner, exp.In):
            if negated:
                raise unsupported(
                    "NOT IN over a subquery of private tables is not supported: one NULL "
                    "among its values makes it NULL for every row, so one changed row could "
                    "change them all", hint="Write NOT EXISTS (SELECT 1 FROM t WHERE t.c = x).",
                    position=position_of(conjunct, offset))
            pairs, body = _in_join(inner, subquery, offset)
        else:
            pairs, body = _exists_join(subquery, offset)
        if len(items) == 1:  # the outer columns' table, for an analysis without a catalog
            for outer, _ in pairs:
                for column in outer.find_all(exp.Column):
                    if not column.table:
                        column.set("table", exp.to_identifier(items[0].alias_or_name))
        number = next(counter)
        alias = f"{PREFIX}{number}"
        names = [f"{PREFIX}{number}_key{i}" for i in range(1, len(pairs) + 1)]
        body.set("expressions", [exp.alias_(value, name, quoted=True)
                                 for (_, value), name in zip(pairs, names, strict=True)])
        body.set("distinct", exp.Distinct())
        table = exp.Subquery(this=body, alias=exp.TableAlias(
            this=exp.to_identifier(alias, quoted=True)))
        links: list[exp.Expression] = [
            exp.EQ(this=outer, expression=exp.column(name, table=alias, quoted=True))
            for (outer, _), name in zip(pairs, names, strict=True)]
        if negated:
            _anti_join(select, table, links, conjunct, offset)
            kept.append(exp.Is(this=exp.column(names[0], table=alias, quoted=True),
                               expression=exp.Null()))
        else:
            select.append("joins", exp.Join(this=table))  # a comma item: WHERE links it
            kept.extend(links)
    select.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)


def _private_subquery(node: exp.Expression, policy: Policy, ctes: frozenset[str]
                      ) -> exp.Select | None:
    """The SELECT of `x IN (SELECT …)` or `EXISTS (SELECT …)` when it reads a private
    table or a CTE of the statement; None otherwise."""
    if isinstance(node, exp.In) and node.args.get("query") is not None:
        query = node.args["query"].this
    elif isinstance(node, exp.Exists):
        query = node.this
    else:
        return None
    if not isinstance(query, exp.Select):
        return None
    for table in query.find_all(exp.Table):
        if (not table.db and table.name in ctes) or policy.is_private(table.db, table.name):
            return query
    return None


def _in_join(node: exp.In, query: exp.Select, offset: int
             ) -> tuple[list[tuple[exp.Expression, exp.Expression]], exp.Select]:
    """`x IN (SELECT c …)`: the pairs (outer, inner) to equate, and the body to make
    DISTINCT. A subquery with its own grouping or limit is read as a derived table."""
    if len(query.expressions) != 1 or isinstance(query.expressions[0], exp.Star):
        raise unsupported("IN (SELECT …) takes one column", position=position_of(node, offset))
    pairs, rest = _correlations(query, offset)
    if _plain(query):
        body = query.copy()
        body.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
        return [(node.this.copy(), unalias(query.expressions[0]).copy()), *pairs], body
    if pairs:
        raise unsupported("a correlated IN (SELECT …) with GROUP BY, LIMIT or an aggregate "
                          "over private tables is not supported", hint=_CORRELATION_HINT,
                          position=position_of(node, offset))
    rows = f"{PREFIX}_rows"
    body = exp.select(exp.column("v", table=rows, quoted=True)).from_(exp.Subquery(
        this=query.copy(), alias=exp.TableAlias(this=exp.to_identifier(rows, quoted=True),
                                                columns=[exp.to_identifier("v", quoted=True)])))
    return [(node.this.copy(), exp.column("v", table=rows, quoted=True))], body


def _exists_join(query: exp.Select, offset: int
                 ) -> tuple[list[tuple[exp.Expression, exp.Expression]], exp.Select]:
    """`EXISTS (SELECT … WHERE t.c = r.x AND w)`: the correlating pairs and the body."""
    limit = query.args.get("limit")
    if not _plain(query, limit_allowed=True) or (
            limit is not None and not _positive_literal(limit.expression)):
        raise unsupported("EXISTS over private tables takes a subquery without GROUP BY, "
                          "aggregates, OFFSET or a LIMIT other than a positive number",
                          position=position_of(query, offset))
    pairs, rest = _correlations(query, offset)
    if not pairs:
        raise unsupported("an EXISTS over private tables must be correlated with the rows it "
                          "filters by an equality", hint=_CORRELATION_HINT,
                          position=position_of(query, offset))
    body = query.copy()
    body.set("limit", None)
    body.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    return pairs, body


def _correlations(query: exp.Select, offset: int
                  ) -> tuple[list[tuple[exp.Expression, exp.Expression]], list[exp.Expression]]:
    """The WHERE conjuncts `inner = outer.column` of a subquery, as (outer, inner) pairs,
    and its other conjuncts, which must not read the outer query."""
    own = {item.alias_or_name for item in from_items(query)}
    where = query.args.get("where")
    pairs, rest = [], []
    for conjunct in conjuncts(where.this) if where is not None else []:
        pair = _correlation(conjunct, own)
        if pair is not None:
            pairs.append(pair)
            continue
        outer = next((c for c in conjunct.find_all(exp.Column) if _is_outer(c, own)), None)
        if outer is not None:
            raise unsupported("a subquery over private tables may refer to the outer query "
                              "only in equalities of columns", hint=_CORRELATION_HINT,
                              position=position_of(outer, offset))
        rest.append(conjunct)
    for node in [*query.expressions, *(query.args.get("joins") or [])]:
        outer = next((c for c in node.find_all(exp.Column) if _is_outer(c, own)), None)
        if outer is not None:
            raise unsupported("a subquery over private tables may refer to the outer query "
                              "only in its WHERE's equalities", hint=_CORRELATION_HINT,
                              position=position_of(outer, offset))
    return pairs, rest


def _correlation(conjunct: exp.Expression, own: set[str]
                 ) -> tuple[exp.Expression, exp.Expression] | None:
    if not isinstance(conjunct, exp.EQ):
        return None
    a, b = conjunct.this, conjunct.expression
    for outer, inner in ((a, b), (b, a)):
        if isinstance(outer, exp.Column) and _is_outer(outer, own) and \
                isinstance(inner, exp.Column) and not _is_outer(inner, own):
            return outer.copy(), inner.copy()
    return None


def _is_outer(column: exp.Column, own: set[str]) -> bool:
    """A column qualified by a name the subquery's own FROM does not define (unqualified
    names are read as the subquery's own, as PostgreSQL reads them first)."""
    return bool(column.table) and column.table not in own


def _anti_join(select: exp.Select, table: exp.Subquery, links: list[exp.Expression],
               conjunct: exp.Expression, offset: int) -> None:
    """NOT EXISTS as `… LEFT JOIN s ON links`: the LEFT JOIN reads everything before it,
    which a comma item would break (PostgreSQL binds JOIN tighter than a comma)."""
    if any(_is_comma(join) for join in select.args.get("joins") or []):
        raise unsupported("NOT EXISTS over private tables needs the query's tables joined "
                          "with JOIN … ON, not commas", hint="Write FROM a JOIN b ON a.x = b.y.",
                          position=position_of(conjunct, offset))
    select.append("joins", exp.Join(this=table, side="LEFT", on=exp.and_(*links)))


def _is_comma(join: exp.Join) -> bool:
    return not any(join.args.get(key) for key in ("on", "using", "side", "kind", "method"))


def _plain(query: exp.Select, limit_allowed: bool = False) -> bool:
    if any(query.args.get(key) for key in ("group", "having", "distinct", "offset", "with_",
                                            "windows", "qualify")):
        return False
    if query.args.get("limit") is not None and not limit_allowed:
        return False
    return not any(p.find(exp.AggFunc, exp.Window) for p in query.expressions)


def _positive_literal(node: exp.Expression | None) -> bool:
    return isinstance(node, exp.Literal) and node.is_int and int(node.this) >= 1
