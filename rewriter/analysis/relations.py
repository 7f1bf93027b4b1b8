"""FLEX analysis of the relations a query reads: stability S(k) and max frequencies mf_k.

Each FROM item becomes a Source; joins multiply the frequencies of one side's columns by
the other side's join-key frequency (FLEX). Derived tables and CTEs are analysed
recursively; a GROUP BY or DISTINCT inside them doubles the stability, because one changed
row can make one group vanish and another appear.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from sqlglot import exp

from ..errors import DUPLICATE_ALIAS, Refusal, policy_refusal, unsupported
from ..policy.model import Policy
from ..sensitivity.elastic import Elastic, constant, multiply
from ..sensitivity.metrics import Metrics
from ..sensitivity.set_operations import set_frequency, set_stability
from ..sql.positions import position_of
from .aliases import alias_columns, column_map, renamed, renamed_base
from .findings import Findings
from .joins import Joiner, conjuncts
from .resolver import Resolver
from .row_checks import RowChecker
from .sources import (
    Columns,
    CteDefinition,
    Ctes,
    DerivedColumn,
    Relation,
    Resolved,
    Source,
)


@dataclass
class Analyzer:
    """Walks one statement; collects missing metrics instead of failing at the first."""

    policy: Policy
    metrics: Metrics
    offset: int
    # The names each query's WITH makes visible, by node: a query has one lexical scope.
    _scopes: dict[int, Ctes] = field(default_factory=dict)
    findings: Findings = field(default_factory=Findings)
    # Whether the scans of base tables read now count (see Findings.scans), and the CTE
    # bodies counted already.
    _counting: bool = True
    _counted_ctes: set[int] = field(default_factory=set)
    resolver: Resolver = field(init=False)
    rows: RowChecker = field(init=False)
    joiner: Joiner = field(init=False)
    # The FROM relation of each derived SELECT, by node: unit mode reads whose its rows are.
    derived_relations: dict[int, Relation] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.resolver = Resolver(self.policy, self.metrics, self.offset)
        self.rows = RowChecker(self.resolver, self.offset)
        self.joiner = Joiner(self.resolver, self.findings, self.offset)

    def resolve(self, column: exp.Column, relation: Relation) -> Resolved:
        return self.resolver.resolve(column, relation)

    def check_row_expression(self, node: exp.Expression, relation: Relation,
                             allow_aggregates: bool = False) -> None:
        self.rows.check(node, relation, allow_aggregates)

    # -- relations -------------------------------------------------------------------

    def select_relation(self, select: exp.Select, ctes: Ctes
                        ) -> tuple[Relation, list[exp.Expression]]:
        """The relation of FROM/JOIN/WHERE, and the WHERE conjuncts that stay filters."""
        ctes = self.with_scope(select, ctes)
        source_node = select.args.get("from_") or select.args.get("from")
        if source_node is None:
            raise unsupported("a private aggregate needs a FROM clause",
                              position=position_of(select, self.offset))
        items = [(source_node.this, None)] + [(j.this, j) for j in select.args.get("joins") or []]
        where = select.args.get("where")
        where_conjuncts = conjuncts(where.this) if where is not None else []
        sources = [(self._source(node, ctes), join) for node, join in items]
        relation, filters = self.joiner.join_all(sources, items[0][0], where_conjuncts)
        for condition in filters:
            self.check_row_expression(condition, relation)
        return relation, filters

    def with_scope(self, query: exp.Expression, outer: Ctes) -> Ctes:
        """The CTE names visible in `query`: its own WITH items over the outer ones."""
        with_ = query.args.get("with_") or query.args.get("with")
        if with_ is None:
            return outer
        if id(query) in self._scopes:
            return self._scopes[id(query)]
        if with_.args.get("recursive"):
            raise unsupported("WITH RECURSIVE over private tables is not supported",
                              position=position_of(with_, self.offset))
        scope = dict(outer)
        names = [cte.alias_or_name for cte in with_.expressions]
        for index, cte in enumerate(with_.expressions):
            if names[index] in names[:index]:
                raise Refusal(DUPLICATE_ALIAS,
                              f'WITH query name "{names[index]}" specified more than once',
                              position=position_of(cte, self.offset))
        for name, cte in zip(names, with_.expressions, strict=True):
            definition = CteDefinition(cte.this, alias_columns(cte), dict(scope))
            # Every CTE is checked, even one the query never reads: its text still runs.
            # Its scans count only where it is read (see `scans`).
            counting, self._counting = self._counting, False
            try:
                self.derived_relation(definition.body, definition.scope)
            finally:
                self._counting = counting
            scope[name] = definition
        self._scopes[id(query)] = scope
        return scope

    def _source(self, node: exp.Expression, ctes: Ctes) -> Source:
        alias = node.alias_or_name or ""
        aliases = alias_columns(node)
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            if node.args.get("joins") or node.args.get("pivots"):
                raise unsupported("nested joins in FROM are not supported",
                                  position=position_of(node, self.offset))
            if not node.db and node.name in ctes:
                definition = ctes[node.name]
                counting = self._counting
                if id(definition.body) in self._counted_ctes:
                    self._counting = False  # materialized once by PostgreSQL
                elif counting:
                    self._counted_ctes.add(id(definition.body))
                try:
                    relation, columns, star = self.derived_relation(definition.body,
                                                                    definition.scope)
                finally:
                    self._counting = counting
                position = position_of(node, self.offset)
                columns = renamed(columns, definition.columns, star, node.name, position)
                return _derived_source(relation, alias,
                                       renamed(columns, aliases, star, alias, position), star)
            schema, name = self.policy.resolve(node.db, node.name)
            if self.policy.is_catalog(node.db, node.name):
                raise policy_refusal(f"catalog table {schema}.{name} cannot be joined with "
                                     "private data", position=position_of(node, self.offset))
            table = f"{schema}.{name}"
            private = self.policy.is_private(schema, name)
            if private and self._counting:
                self.findings.scans[table] += 1
            return Source(alias or name, table=table, private=private,
                          renamed=self._renamed_base(table, aliases, alias, node))
        if isinstance(node, exp.Subquery):
            relation, columns, star = self.derived_relation(node.this, ctes)
            return _derived_source(relation, alias, renamed(
                columns, aliases, star, alias, position_of(node, self.offset)), star)
        raise unsupported(f"{node.key.upper()} in FROM is not supported over private tables",
                          position=position_of(node, self.offset))

    def _renamed_base(self, table: str, names: tuple[str, ...], alias: str,
                      node: exp.Expression) -> Mapping[str, str | None] | None:
        if not names:
            return None
        visible, positional = renamed_base(self.metrics.columns.get(table), table, names,
                                           alias, position_of(node, self.offset))
        self.findings.renamed.append((table, alias, positional))
        return visible

    def derived_relation(self, query: exp.Expression, ctes: Ctes
                         ) -> tuple[Relation, Columns, bool]:
        """A subquery in FROM (or a CTE): its relation and its output columns in order."""
        if isinstance(query, exp.SetOperation):
            return self._set_operation(query, self.with_scope(query, ctes))
        if not isinstance(query, exp.Select):
            raise unsupported(f"{query.key.upper()} as a derived table is not supported",
                              position=position_of(query, self.offset))
        for key in ("windows", "qualify", "locks"):
            if query.args.get(key):
                raise unsupported(f"{key.upper()} inside a derived table is not supported",
                                  position=position_of(query, self.offset))
        relation, _ = self.select_relation(query, ctes)
        self.derived_relations[id(query)] = relation
        grouped = bool(query.args.get("group")) or bool(query.args.get("distinct"))
        aggregated = grouped or any(p.find(exp.AggFunc) for p in query.expressions)
        group_keys = self._group_keys(query)
        columns: list[tuple[str, DerivedColumn]] = []
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
            columns.append((projection.alias_or_name, self._derived_column(
                inner, relation, aggregated, group_keys)))
            if grouped:
                self.findings.group_columns |= columns[-1][1].bases
        for group_key in group_keys:
            if isinstance(group_key, exp.Column) and not isinstance(group_key.this, exp.Star):
                try:
                    self.findings.group_columns |= self.resolve(group_key, relation).bases
                except Refusal:
                    pass  # an output column's alias: its projection is counted above
        if query.args.get("having") is not None:
            self.check_row_expression(query.args["having"].this, relation,
                                      allow_aggregates=True)
        distinct = query.args.get("distinct")
        for key in distinct.args.get("on") or [] if distinct is not None else []:
            self.check_row_expression(key, relation)
        for clause in ("order", "group", "limit", "offset"):
            if query.args.get(clause) is not None:
                self.check_row_expression(query.args[clause], relation,
                                          allow_aggregates=aggregated)
        # One changed input row moves out of one group and into another; under LIMIT or
        # OFFSET one row leaves the window and another enters it.
        limited = query.args.get("limit") is not None or query.args.get("offset") is not None
        if grouped or limited:
            relation = replace(relation, stability=multiply(constant(2), relation.stability))
        return relation, tuple(columns), star

    def _group_keys(self, query: exp.Select) -> list[exp.Expression]:
        group = query.args.get("group")
        keys = list(group.expressions) if group is not None else []
        if query.args.get("distinct"):
            keys += [p.this if isinstance(p, exp.Alias) else p for p in query.expressions]
        return keys

    def _derived_column(self, inner: exp.Expression, relation: Relation, aggregated: bool,
                        group_keys: list[exp.Expression]) -> DerivedColumn:
        if not isinstance(inner, exp.Column):
            self.check_row_expression(inner, relation, allow_aggregates=aggregated)
            return DerivedColumn(None, None)
        resolved = self.resolve(inner, relation)
        if not aggregated:
            return DerivedColumn(resolved.max_freq, resolved.origin, resolved.branches)
        # A group key: one output row per group, so a lone key is unique; with several
        # keys, a value recurs at most as often as it did among the input rows.
        unique = len(group_keys) == 1
        return DerivedColumn(Elastic.ONE if unique else resolved.max_freq, resolved.origin,
                             resolved.branches)

    def _set_operation(self, operation: exp.SetOperation, ctes: Ctes
                       ) -> tuple[Relation, Columns, bool]:
        what = f"{operation.key.upper()}{'' if operation.args.get('distinct') else ' ALL'}"
        left, left_columns, left_star = self.derived_relation(operation.this, ctes)
        right, right_columns, right_star = self.derived_relation(operation.expression, ctes)
        if left_star or right_star or len(left_columns) != len(right_columns):
            raise unsupported(f"{what} needs the same named columns on both sides",
                              position=position_of(operation, self.offset))
        if operation.args.get("order") or operation.args.get("limit") or \
                operation.args.get("offset"):
            raise unsupported(f"ORDER BY, LIMIT or OFFSET on a {what} inside a private "
                              "query is not supported",
                              position=position_of(operation, self.offset))
        columns = []
        for (name, a), (_, b) in zip(left_columns, right_columns, strict=True):
            frequency = set_frequency(operation, a.max_freq, b.max_freq)
            if isinstance(operation, exp.Except):  # its values are the left side's only
                column = DerivedColumn(frequency, a.origin, a.branches)
            else:
                same = a.origin == b.origin
                column = DerivedColumn(frequency, a.origin if same else None,
                                       frozenset() if same else a.bases | b.bases)
            columns.append((name, column))
            if operation.args.get("distinct"):  # PostgreSQL groups on every column
                self.findings.group_columns |= a.bases | b.bases
        relation = Relation(set_stability(left.stability, right.stability), (),
                            left.base_tables | right.base_tables,
                            left.private_tables + right.private_tables)
        return relation, tuple(columns), False



def _derived_source(relation: Relation, alias: str, columns: Columns, star: bool) -> Source:
    return Source(alias, derived=relation, columns=column_map(columns), star=star)
