"""Joins of FROM items, FLEX's way: each item joined to those before it on equalities of
plain columns (ON, USING or WHERE), its sensitivity from the join keys' max frequencies
(sensitivity/outer_joins.py for inner and outer equijoins); cross, non-equi and OR joins
are refused."""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from ..errors import unsupported
from ..sensitivity.cross_joins import cross_stability
from ..sensitivity.elastic import Elastic, minimum, multiply
from ..sensitivity.metrics import ROWS
from ..sensitivity.outer_joins import join_bound
from ..sql.positions import position_of
from .findings import Findings
from .resolver import Resolver
from .sources import Relation, Resolved, Source

JOIN_HINT = ("Join private tables with equalities of plain columns: "
             "JOIN t ON a.x = t.y, USING (x), or FROM a, t WHERE a.x = t.y.")


@dataclass(frozen=True)
class Joiner:
    resolver: Resolver
    findings: Findings
    offset: int

    def join_all(self, sources: list[tuple[Source, exp.Join | None]], first: exp.Expression,
                 where: list[exp.Expression]) -> tuple[Relation, list[exp.Expression]]:
        """The relation of FROM items joined in turn (`first`: the first item's node), and
        the conditions that stay filters."""
        aliases = [s.alias for s, _ in sources]
        duplicate = next((a for a in aliases if aliases.count(a) > 1), None)
        if duplicate:
            raise unsupported(f'table name "{duplicate}" specified more than once; give each '
                              "occurrence an alias", position=position_of(first, self.offset))
        relation = base_relation(sources[0][0])
        filters: list[exp.Expression] = []
        pool = list(where)
        pending = sources[1:]
        while pending:
            chosen, conditions = self._next_join(relation, pending, pool)
            source, join = pending.pop(chosen)
            joined = base_relation(source)
            pairs, rest = self._equalities(conditions, relation, joined)
            if not pairs and not conditions and _crossable(source, join):
                relation = self._cross(relation, source)
                continue
            if not pairs and not conditions and _unconditioned(join) and \
                    _lone_public_table(relation):
                # P × R is R × P: the same rows, so the same rule with R first.
                relation = self._cross(joined, relation.sources[0])
                continue
            if not pairs:
                node = join if join is not None else first
                raise unsupported(
                    f"cross join of {source.alias}: no equality of columns links it to the "
                    "tables before it (cross, non-equi and OR joins are refused, but for a "
                    "public table crossed with the rest)",
                    hint=JOIN_HINT, position=position_of(node, self.offset))
            filters += rest
            side = _side_of(join)
            relation = self._join(relation, joined, pairs, side)
            if join is not None and join.args.get("using"):
                relation = replace(relation, merged={
                    **relation.merged, **{c.this.name: _merged_sides(c, side)
                                          for _, _, c in pairs}})
        return relation, filters + pool

    def _cross(self, relation: Relation, source: Source) -> Relation:
        """relation × a public table (sensitivity/cross_joins.py)."""
        assert source.table is not None
        rows = self.resolver.base_frequency(source.table, ROWS, False)
        self.findings.missing |= rows.unmeasured_columns()
        sources = tuple(replace(s, factor=multiply(s.factor, rows)) for s in relation.sources)
        return Relation(cross_stability(relation.stability, rows),
                        (*sources, replace(source, crossed=True)),
                        relation.base_tables | {source.table}, relation.private_tables,
                        relation.merged)

    def _next_join(self, relation: Relation, pending: list[tuple[Source, exp.Join | None]],
                   pool: list[exp.Expression]) -> tuple[int, list[exp.Expression]]:
        """The next item to join, preferring written order, and its join conditions.

        WHERE equalities that link the item to the relation are taken out of `pool`.
        """
        for index, (source, join) in enumerate(pending):
            conditions = self._explicit_conditions(join, relation, source)
            # WHERE filters an outer join's result: it never becomes its join condition.
            linking = [] if _side_of(join) else \
                [c for c in pool if self._links(c, relation, source)]
            if conditions is not None or linking:
                for condition in linking:
                    pool.remove(condition)
                return index, (conditions or []) + linking
        return 0, []

    def _explicit_conditions(self, join: exp.Join | None, relation: Relation,
                             source: Source) -> list[exp.Expression] | None:
        if join is None:
            return None
        if join.args.get("method"):
            raise unsupported(f"{join.args['method']} JOIN is not supported; use JOIN … ON",
                              hint=JOIN_HINT, position=position_of(join, self.offset))
        if join.args.get("using"):
            return [self._using_condition(name.name, relation, source, join)
                    for name in join.args["using"]]
        if join.args.get("on") is not None:
            return conjuncts(join.args["on"])
        return None

    def _using_condition(self, name: str, relation: Relation, source: Source,
                         join: exp.Join) -> exp.Expression:
        merged = relation.merged.get(name, ())
        if len(merged) > 1:
            raise unsupported(f"USING ({name}) here joins on the merged column of a FULL "
                              f"JOIN … USING, COALESCE of both sides' {name}: a join key must "
                              "be a plain column", hint=JOIN_HINT,
                              position=position_of(join, self.offset))
        having = [s for s in relation.sources if s.alias in merged] or \
            [s for s in relation.sources if self.resolver.has_column(s, name)]
        if not having and len(relation.sources) == 1:
            having = list(relation.sources)
        if len(having) != 1:
            raise unsupported(f'USING ({name}) is ambiguous here: write ON with qualified '
                              "columns", position=position_of(join, self.offset))
        return exp.EQ(this=exp.column(name, table=having[0].alias),
                      expression=exp.column(name, table=source.alias))

    def _links(self, condition: exp.Expression, relation: Relation, source: Source) -> bool:
        if not (isinstance(condition, exp.EQ) and isinstance(condition.this, exp.Column)
                and isinstance(condition.expression, exp.Column)):
            return False
        sides = {self._side(condition.this, relation, source),
                 self._side(condition.expression, relation, source)}
        return sides == {"left", "right"}

    def _side(self, column: exp.Column, relation: Relation, source: Source) -> str | None:
        name = column.table or None
        if name is not None:
            if name == source.alias:
                return "right"
            return "left" if any(s.alias == name for s in relation.sources) else None
        in_right = self.resolver.has_column(source, column.name)
        in_left = any(self.resolver.has_column(s, column.name) for s in relation.sources)
        if in_right != in_left:
            return "right" if in_right else "left"
        return None

    def _equalities(self, conditions: list[exp.Expression], left: Relation, right: Relation
                    ) -> tuple[list[tuple[Resolved, Resolved, exp.Expression]],
                               list[exp.Expression]]:
        pairs, rest = [], []
        (source,) = right.sources
        for condition in conditions:
            if self._links(condition, left, source):
                a, b = condition.this, condition.expression
                if self._side(a, left, source) == "right":
                    a, b = b, a
                resolve = self.resolver.resolve
                pairs.append((resolve(a, left), resolve(b, right), condition))
            else:
                rest.append(condition)
        return pairs, rest

    def _join(self, left: Relation, right: Relation,
              pairs: list[tuple[Resolved, Resolved, exp.Expression]], side: str) -> Relation:
        shared = bool(left.base_tables & right.base_tables)
        bounds = []
        for a, b, condition in pairs:
            if a.max_freq is None or b.max_freq is None:
                raise unsupported("a join key must be a plain column with a known frequency, "
                                  "not a computed value", hint=JOIN_HINT,
                                  position=position_of(condition, self.offset))
            self.findings.missing |= a.max_freq.unmeasured_columns() | \
                b.max_freq.unmeasured_columns()
            self.findings.join_columns |= a.bases | b.bases
            bounds.append(join_bound(side, shared, left.stability, right.stability,
                                     a.max_freq, b.max_freq))
        # Each conjunct alone bounds the join (its matches are a superset): the minimum.
        left_factor = minimum(*(bound.left_factor for bound in bounds))
        right_factor = minimum(*(bound.right_factor for bound in bounds))
        sources = tuple(replace(s, factor=multiply(s.factor, left_factor)) for s in left.sources)
        sources += tuple(replace(s, factor=multiply(s.factor, right_factor))
                         for s in right.sources)
        return Relation(minimum(*(bound.stability for bound in bounds)), sources,
                        left.base_tables | right.base_tables,
                        left.private_tables + right.private_tables, left.merged)


def base_relation(source: Source) -> Relation:
    if source.derived is not None:
        return Relation(source.derived.stability, (source,), source.derived.base_tables,
                        source.derived.private_tables)
    stability = Elastic.ONE if source.private else Elastic.ZERO
    return Relation(stability, (source,), frozenset({source.table or ""}),
                    1 if source.private else 0)


def _crossable(source: Source, join: exp.Join | None) -> bool:
    """A public base table joined without any condition (CROSS JOIN, a comma item)."""
    return _public_table(source) and _unconditioned(join)


def _lone_public_table(relation: Relation) -> bool:
    """A relation that is one public base table (so not yet crossed with anything)."""
    return len(relation.sources) == 1 and _public_table(relation.sources[0])


def _public_table(source: Source) -> bool:
    return not source.private and source.derived is None and source.table is not None


def _unconditioned(join: exp.Join | None) -> bool:
    """An inner join without any condition (CROSS JOIN, a comma item)."""
    return not _side_of(join) and (join is None or not any(
        join.args.get(key) for key in ("on", "using", "method")))


def _merged_sides(condition: exp.Expression, side: str) -> tuple[str, ...]:
    """The aliases whose column a USING column's unqualified name reads: PostgreSQL's
    COALESCE(left, right) keeps an inner or LEFT join's left value (they are equal or the
    right one is NULL), a RIGHT join's right one, and a FULL join's first non-NULL one."""
    left, right = condition.this.table, condition.expression.table
    return {"RIGHT": (right,), "FULL": (left, right)}.get(side, (left,))


def _side_of(join: exp.Join | None) -> str:
    """LEFT, RIGHT or FULL for an outer join; "" for an inner join or a FROM list item."""
    return (join.args.get("side") or "").upper() if join is not None else ""



def conjuncts(node: exp.Expression) -> list[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]

