"""FLEX analysis of the relations a query reads: stability S(k) and max frequencies mf_k.

Each FROM item becomes a Source; joins multiply the frequencies of one side's columns by
the other side's join-key frequency (SPEC.md §1). Derived tables and CTEs are analysed
recursively; a GROUP BY or DISTINCT inside them doubles the stability, because one changed
row can make one group vanish and another appear.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from sqlglot import exp

from .elastic import (
    Elastic,
    add,
    constant,
    maximum,
    minimum,
    multiply,
    plus_k,
    unmeasured,
)
from .errors import AMBIGUOUS_COLUMN, UNDEFINED_COLUMN, Refusal, policy_refusal, unsupported
from .functions import ROW_SAFE_NODES, function_name, row_failure
from .metrics import ColumnKey, Metrics, MissingMetrics
from .policy import Policy
from .positions import position_of

JOIN_HINT = ("Join private tables with equalities of plain columns: "
             "JOIN t ON a.x = t.y, USING (x), or FROM a, t WHERE a.x = t.y.")


@dataclass(frozen=True)
class DerivedColumn:
    """A column of a derived relation: its frequency there, and the base column it is."""

    max_freq: Elastic | None  # None: computed, frequency unbounded (∞)
    origin: ColumnKey | None


@dataclass(frozen=True)
class Source:
    """One name in a FROM scope. `factor` multiplies its frequencies after joins."""

    alias: str
    factor: Elastic = Elastic.ONE
    table: str | None = None  # "schema.name" of a base table
    private: bool = False
    derived: Relation | None = None
    columns: Mapping[str, DerivedColumn] | None = None  # a derived relation's output
    star: bool = False  # a derived `SELECT *`: any column of `derived`


@dataclass(frozen=True)
class Relation:
    stability: Elastic
    sources: tuple[Source, ...]
    base_tables: frozenset[str]
    private_tables: int  # D: private base tables in the tree, the degree bound of ES(k)
    # Columns merged by JOIN … USING: an unqualified name means the left side's column.
    merged: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Resolved:
    """A column reference resolved in a relation."""

    max_freq: Elastic | None
    origin: ColumnKey | None
    source: Source


@dataclass
class Analyzer:
    """Walks one statement; collects missing metrics instead of failing at the first."""

    policy: Policy
    metrics: Metrics
    offset: int
    missing: set[ColumnKey] = field(default_factory=set)

    # -- relations -------------------------------------------------------------------

    def select_relation(self, select: exp.Select, ctes: Mapping[str, exp.Expression]
                        ) -> tuple[Relation, list[exp.Expression]]:
        """The relation of FROM/JOIN/WHERE, and the WHERE conjuncts that stay filters."""
        ctes = {**ctes, **self._ctes_of(select, ctes)}
        source_node = select.args.get("from_") or select.args.get("from")
        if source_node is None:
            raise unsupported("a private aggregate needs a FROM clause",
                              position=position_of(select, self.offset))
        items = [(source_node.this, None)] + [(j.this, j) for j in select.args.get("joins") or []]
        where = select.args.get("where")
        conjuncts = _conjuncts(where.this) if where is not None else []
        relation, filters = self._join_all(items, conjuncts, ctes)
        for condition in filters:
            self.check_row_expression(condition, relation, ctes)
        return relation, filters

    def _ctes_of(self, select: exp.Select, outer: Mapping[str, exp.Expression]
                 ) -> dict[str, exp.Expression]:
        with_ = select.args.get("with_") or select.args.get("with")
        if with_ is None:
            return {}
        if with_.args.get("recursive"):
            raise unsupported("WITH RECURSIVE over private tables is not supported",
                              position=position_of(with_, self.offset))
        defined = {cte.alias_or_name.lower(): cte.this for cte in with_.expressions}
        # Every CTE is checked, even one the query never reads: its text still runs.
        for name, body in defined.items():
            self.derived_relation(body, {**outer, **{k: v for k, v in defined.items()
                                                     if k != name}})
        return defined

    def _source(self, node: exp.Expression, ctes: Mapping[str, exp.Expression]) -> Source:
        alias = node.alias_or_name.lower() if node.alias_or_name else ""
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            if node.args.get("joins") or node.args.get("pivots"):
                raise unsupported("nested joins in FROM are not supported",
                                  position=position_of(node, self.offset))
            if not node.db and node.name.lower() in ctes:
                inner = ctes[node.name.lower()]
                return self._derived_source(inner, alias, {k: v for k, v in ctes.items()
                                                           if k != node.name.lower()})
            schema, name = self.policy.resolve(node.db, node.name)
            if self.policy.is_catalog(node.db, node.name):
                raise policy_refusal(f"catalog table {schema}.{name} cannot be joined with "
                                     "private data", position=position_of(node, self.offset))
            return Source(alias or name, table=f"{schema}.{name}",
                          private=self.policy.is_private(schema, name))
        if isinstance(node, exp.Subquery):
            return self._derived_source(node.this, alias, ctes)
        raise unsupported(f"{node.key.upper()} in FROM is not supported over private tables",
                          position=position_of(node, self.offset))

    def _derived_source(self, query: exp.Expression, alias: str,
                        ctes: Mapping[str, exp.Expression]) -> Source:
        relation, columns, star = self.derived_relation(query, ctes)
        return Source(alias, derived=relation, columns=columns, star=star)

    def derived_relation(self, query: exp.Expression, ctes: Mapping[str, exp.Expression]
                         ) -> tuple[Relation, dict[str, DerivedColumn], bool]:
        """A subquery in FROM (or a CTE): its relation and its output columns."""
        if isinstance(query, exp.Union):
            return self._union(query, ctes)
        if not isinstance(query, exp.Select):
            raise unsupported(f"{query.key.upper()} as a derived table is not supported",
                              position=position_of(query, self.offset))
        for key in ("windows", "qualify", "locks"):
            if query.args.get(key):
                raise unsupported(f"{key.upper()} inside a derived table is not supported",
                                  position=position_of(query, self.offset))
        relation, _ = self.select_relation(query, ctes)
        grouped = bool(query.args.get("group")) or bool(query.args.get("distinct"))
        aggregated = grouped or any(p.find(exp.AggFunc) for p in query.expressions)
        group_keys = self._group_keys(query)
        columns: dict[str, DerivedColumn] = {}
        star = False
        for projection in query.expressions:
            inner = projection.this if isinstance(projection, exp.Alias) else projection
            if isinstance(inner, exp.Star):
                if aggregated:
                    raise unsupported("SELECT * with GROUP BY is not supported",
                                      position=position_of(projection, self.offset))
                star = True
                continue
            if isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star):
                raise unsupported("table.* in a derived table is not supported; name the "
                                  "columns", position=position_of(projection, self.offset))
            columns[projection.alias_or_name.lower()] = self._derived_column(
                inner, relation, ctes, aggregated, group_keys)
        if query.args.get("having") is not None:
            self.check_row_expression(query.args["having"].this, relation, ctes,
                                      allow_aggregates=True)
        for clause in ("order", "group", "limit", "offset"):
            if query.args.get(clause) is not None:
                self.check_row_expression(query.args[clause], relation, ctes,
                                          allow_aggregates=aggregated)
        if aggregated:
            # One changed input row moves out of one group and into another.
            factor = constant(2) if grouped else Elastic.ONE
            relation = replace(relation, stability=multiply(factor, relation.stability))
        return relation, columns, star

    def _group_keys(self, query: exp.Select) -> list[exp.Expression]:
        group = query.args.get("group")
        keys = list(group.expressions) if group is not None else []
        if query.args.get("distinct"):
            keys += [p.this if isinstance(p, exp.Alias) else p for p in query.expressions]
        return keys

    def _derived_column(self, inner: exp.Expression, relation: Relation,
                        ctes: Mapping[str, exp.Expression], aggregated: bool,
                        group_keys: list[exp.Expression]) -> DerivedColumn:
        if not isinstance(inner, exp.Column):
            self.check_row_expression(inner, relation, ctes, allow_aggregates=aggregated)
            return DerivedColumn(None, None)
        resolved = self.resolve(inner, relation)
        if not aggregated:
            return DerivedColumn(resolved.max_freq, resolved.origin)
        # A group key: one output row per group, so a lone key is unique; with several
        # keys, a value recurs at most as often as it did among the input rows.
        unique = len(group_keys) == 1
        return DerivedColumn(Elastic.ONE if unique else resolved.max_freq, resolved.origin)

    def _union(self, union: exp.Union, ctes: Mapping[str, exp.Expression]
               ) -> tuple[Relation, dict[str, DerivedColumn], bool]:
        if union.args.get("distinct") or not isinstance(union, exp.Union) or \
                type(union) is not exp.Union:
            raise unsupported("only UNION ALL is supported over private tables",
                              position=position_of(union, self.offset))
        left, left_columns, left_star = self.derived_relation(union.this, ctes)
        right, right_columns, right_star = self.derived_relation(union.expression, ctes)
        if left_star or right_star or len(left_columns) != len(right_columns):
            raise unsupported("UNION ALL needs the same named columns on both sides",
                              position=position_of(union, self.offset))
        columns = {}
        for (name, a), b in zip(left_columns.items(), right_columns.values(), strict=True):
            frequency = None if a.max_freq is None or b.max_freq is None else \
                add(a.max_freq, b.max_freq)
            columns[name] = DerivedColumn(frequency, a.origin if a.origin == b.origin else None)
        # A changed row may sit on both sides (FLEX's max is unsound here).
        relation = Relation(add(left.stability, right.stability), (),
                            left.base_tables | right.base_tables,
                            left.private_tables + right.private_tables)
        return relation, columns, False

    def _base_relation(self, source: Source) -> Relation:
        if source.derived is not None:
            return Relation(source.derived.stability, (source,), source.derived.base_tables,
                            source.derived.private_tables)
        stability = Elastic.ONE if source.private else Elastic.ZERO
        return Relation(stability, (source,), frozenset({source.table or ""}),
                        1 if source.private else 0)

    # -- joins -----------------------------------------------------------------------

    def _join_all(self, items: list[tuple[exp.Expression, exp.Join | None]],
                  where: list[exp.Expression], ctes: Mapping[str, exp.Expression]
                  ) -> tuple[Relation, list[exp.Expression]]:
        sources = [(self._source(node, ctes), join) for node, join in items]
        aliases = [s.alias for s, _ in sources]
        duplicate = next((a for a in aliases if aliases.count(a) > 1), None)
        if duplicate:
            raise unsupported(f'table name "{duplicate}" specified more than once; give each '
                              "occurrence an alias", position=position_of(items[0][0],
                                                                           self.offset))
        relation = self._base_relation(sources[0][0])
        filters: list[exp.Expression] = []
        pool = list(where)
        pending = sources[1:]
        while pending:
            chosen, conditions = self._next_join(relation, pending, pool)
            source, join = pending.pop(chosen)
            joined = self._base_relation(source)
            pairs, rest = self._equalities(conditions, relation, joined)
            if not pairs:
                node = join if join is not None else items[0][0]
                raise unsupported(
                    f"cross join of {source.alias}: no equality of columns links it to the "
                    "tables before it (cross, non-equi and OR joins are refused)",
                    hint=JOIN_HINT, position=position_of(node, self.offset))
            filters += rest
            relation = self._join(relation, joined, pairs)
            if join is not None and join.args.get("using"):
                relation = replace(relation, merged={
                    **relation.merged, **{c.this.name.lower(): c.this.table.lower()
                                          for _, _, c in pairs}})
        return relation, filters + pool

    def _next_join(self, relation: Relation, pending: list[tuple[Source, exp.Join | None]],
                   pool: list[exp.Expression]) -> tuple[int, list[exp.Expression]]:
        """The next item to join, preferring written order, and its join conditions.

        WHERE equalities that link the item to the relation are taken out of `pool`.
        """
        for index, (source, join) in enumerate(pending):
            conditions = self._explicit_conditions(join, relation, source)
            linking = [c for c in pool if self._links(c, relation, source)]
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
        side = join.args.get("side")
        if side:
            raise unsupported(f"{side} OUTER JOIN is not supported over private tables",
                              hint="Use an inner JOIN: outer joins have no sound sensitivity "
                              "rule here.", position=position_of(join, self.offset))
        if join.args.get("using"):
            return [self._using_condition(name.name.lower(), relation, source, join)
                    for name in join.args["using"]]
        if join.args.get("on") is not None:
            return _conjuncts(join.args["on"])
        return None

    def _using_condition(self, name: str, relation: Relation, source: Source,
                         join: exp.Join) -> exp.Expression:
        having = [s for s in relation.sources if self._has_column(s, name)]
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
        name = column.table.lower() if column.table else None
        if name is not None:
            if name == source.alias:
                return "right"
            return "left" if any(s.alias == name for s in relation.sources) else None
        in_right = self._has_column(source, column.name.lower())
        in_left = any(self._has_column(s, column.name.lower()) for s in relation.sources)
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
                pairs.append((self.resolve(a, left), self.resolve(b, right), condition))
            else:
                rest.append(condition)
        return pairs, rest

    def _join(self, left: Relation, right: Relation,
              pairs: list[tuple[Resolved, Resolved, exp.Expression]]) -> Relation:
        shared = bool(left.base_tables & right.base_tables)
        s1, s2 = left.stability, right.stability
        stabilities, left_factors, right_factors = [], [], []
        for a, b, condition in pairs:
            if a.max_freq is None or b.max_freq is None:
                raise unsupported("a join key must be a plain column with a known frequency, "
                                  "not a computed value", hint=JOIN_HINT,
                                  position=position_of(condition, self.offset))
            self.missing |= a.max_freq.unmeasured_columns() | b.max_freq.unmeasured_columns()
            if shared:  # self-join: one row can sit on both sides
                stabilities.append(add(multiply(a.max_freq, s2), multiply(b.max_freq, s1),
                                       multiply(s1, s2)))
            else:
                stabilities.append(maximum(multiply(b.max_freq, s1),
                                           multiply(a.max_freq, s2)))
            left_factors.append(b.max_freq)
            right_factors.append(a.max_freq)
        left_factor, right_factor = minimum(*left_factors), minimum(*right_factors)
        sources = tuple(replace(s, factor=multiply(s.factor, left_factor)) for s in left.sources)
        sources += tuple(replace(s, factor=multiply(s.factor, right_factor))
                         for s in right.sources)
        return Relation(minimum(*stabilities), sources, left.base_tables | right.base_tables,
                        left.private_tables + right.private_tables, left.merged)

    # -- columns ---------------------------------------------------------------------

    def _has_column(self, source: Source, name: str) -> bool | None:
        """Whether a source has a column; None when nobody knows (no catalog entry)."""
        if source.columns is not None and name in source.columns:
            return True
        if source.derived is not None:
            if source.star:
                return any(self._has_column(s, name) for s in source.derived.sources)
            return False
        known = self.metrics.columns.get(source.table or "")
        return None if known is None else name in known

    def resolve(self, column: exp.Column, relation: Relation) -> Resolved:
        """The frequency and origin of a column reference; refuses unknown or ambiguous."""
        name = column.name.lower()
        qualifier = column.table.lower() if column.table else relation.merged.get(name)
        if qualifier is not None:
            candidates = [s for s in relation.sources if s.alias == qualifier]
            if not candidates:
                raise unsupported(f'missing FROM-clause entry for table "{qualifier}"',
                                  position=position_of(column, self.offset))
        else:
            known = [s for s in relation.sources if self._has_column(s, name)]
            unknown = [s for s in relation.sources if self._has_column(s, name) is None]
            candidates = known or (unknown if len(relation.sources) == 1 else [])
            position = position_of(column, self.offset)
            if len(known) > 1:
                raise Refusal(AMBIGUOUS_COLUMN, f'column reference "{name}" is ambiguous',
                              position=position)
            if not known and not unknown:
                raise Refusal(UNDEFINED_COLUMN, f'column "{name}" does not exist',
                              position=position)
            if len(candidates) != 1:
                raise unsupported(f'column reference "{name}" cannot be resolved here: '
                                  "qualify it with its table", position=position)
        source = candidates[0]
        frequency, origin = self._source_column(source, name, column)
        return Resolved(None if frequency is None else multiply(frequency, source.factor),
                        origin, source)

    def _source_column(self, source: Source, name: str, column: exp.Column
                       ) -> tuple[Elastic | None, ColumnKey | None]:
        if source.derived is not None:
            if source.columns and name in source.columns:
                derived = source.columns[name]
                return derived.max_freq, derived.origin
            if source.star:
                inner = self.resolve(exp.column(name), source.derived)
                return inner.max_freq, inner.origin
            raise unsupported(f'column {source.alias}.{name} does not exist',
                              position=position_of(column, self.offset))
        table = source.table or ""
        return self._base_frequency(table, name, source.private), (table, name)

    def _base_frequency(self, table: str, column: str, private: bool) -> Elastic:
        declared = self.policy.column(table, column).max_freq
        measured = self.metrics.max_freq.get((table, column))
        value = declared if declared is not None else measured
        if value is None:
            return unmeasured(table, column)
        return plus_k(value) if private else constant(value)

    # -- row expressions -------------------------------------------------------------

    def check_row_expression(self, node: exp.Expression, relation: Relation,
                             ctes: Mapping[str, exp.Expression],
                             allow_aggregates: bool = False) -> None:
        """Refuse anything evaluated on private rows that could fail on some rows only.

        Every allowed node is total on its inputs, so an error cannot tell anything about a
        row. Constant expressions are fine (`current_date - interval '30 days'`); a cast or
        arithmetic on a column could fail on some values only.
        Subqueries are allowed only when they read public tables and are not correlated.
        """
        if isinstance(node, (exp.Subquery, exp.Select, exp.Exists, exp.Union)):
            self._check_public_subquery(node, ctes)
            if isinstance(node, exp.Subquery) and not isinstance(node.parent, exp.In):
                # PostgreSQL runs a scalar subquery only when a row reaches it, so its
                # "more than one row" error would tell whether some private row did.
                raise unsupported("scalar subqueries are not supported on private rows",
                                  hint="Use IN (SELECT …) or a join.",
                                  position=position_of(node, self.offset))
            return
        if node.find(exp.Column, exp.Subquery, exp.Select, exp.Exists) is None:
            return  # a constant: if it fails, it fails whatever the rows hold
        if isinstance(node, exp.Column):
            if not isinstance(node.this, exp.Star):
                self.resolve(node, relation)
            return
        if allow_aggregates and isinstance(node, (exp.Count, exp.Sum, exp.Avg, exp.Min,
                                                  exp.Max, exp.Distinct)):
            pass
        elif not isinstance(node, ROW_SAFE_NODES):
            raise unsupported(
                f"{function_name(node) or node.key.upper()} is not allowed on private rows",
                hint="Use comparisons, AND/OR/NOT, IN, BETWEEN, LIKE, IS NULL, CASE and "
                "simple functions (lower, upper, length, trim, extract, coalesce).",
                position=position_of(node, self.offset))
        elif (failure := row_failure(node)) is not None:
            raise unsupported(failure, position=position_of(node, self.offset))
        for child in node.iter_expressions():
            self.check_row_expression(child, relation, ctes, allow_aggregates)

    def _check_public_subquery(self, node: exp.Expression,
                               ctes: Mapping[str, exp.Expression]) -> None:
        refusal = unsupported(
            "subqueries over private tables are not supported in a condition",
            hint="Join the table instead: FROM a JOIN b ON a.x = b.y.",
            position=position_of(node, self.offset))
        query = node.this if isinstance(node, (exp.Subquery, exp.Exists)) else node
        for table in query.find_all(exp.Table):
            if not table.db and table.name.lower() in ctes:
                raise refusal
            if self.policy.is_private(table.db, table.name):
                raise refusal
        inner_names = {t.alias_or_name.lower() for t in query.find_all(exp.Table)}
        for column in query.find_all(exp.Column):
            if column.table and column.table.lower() not in inner_names:
                raise unsupported("correlated subqueries are not supported",
                                  hint="Join the table instead.",
                                  position=position_of(column, self.offset))


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def refuse_missing(analyzer: Analyzer) -> None:
    """Raise MissingMetrics if the analysis met a column nobody measured."""
    if analyzer.missing:
        raise MissingMetrics(tuple(sorted(analyzer.missing)))
