"""FLEX analysis of the relations a query reads: stability S(k) and max frequencies mf_k.

Each FROM item becomes a Source; joins multiply the frequencies of one side's columns by
the other side's join-key frequency (FLEX). Derived tables and CTEs are analysed
recursively; a GROUP BY or DISTINCT inside them doubles the stability, because one changed
row can make one group vanish and another appear.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from sqlglot import exp

from ..errors import (
    AMBIGUOUS_COLUMN,
    DUPLICATE_ALIAS,
    INVALID_COLUMN_REFERENCE,
    PROGRAM_LIMIT_EXCEEDED,
    UNDEFINED_COLUMN,
    Refusal,
    policy_refusal,
    unsupported,
)
from ..policy.model import Policy
from ..sensitivity.elastic import (
    Elastic,
    constant,
    minimum,
    multiply,
    plus_k,
    unmeasured,
)
from ..sensitivity.metrics import ColumnKey, Metrics, MissingMetrics
from ..sensitivity.outer_joins import join_bound
from ..sensitivity.set_operations import set_frequency, set_stability
from ..sql.functions import (
    function_name,
    is_literal_constant,
    may_be_array,
    node_failure,
    row_failure,
)
from ..sql.positions import position_of
from .arithmetic import (
    ARITHMETIC,
    NUMBER_TYPES,
    TOTAL,
    TRUNCATIONS,
    NotTotal,
    TooCostly,
    mixes_numeric_and_float,
    total_form,
    total_trunc,
)
from .row_cost import COSTLY_HINT

EXACT_NUMBER_TYPES = NUMBER_TYPES - {"real", "double precision"}
DATETIME_TYPES = frozenset({"date", "timestamp without time zone", "timestamp with time zone"})
JOIN_HINT = ("Join private tables with equalities of plain columns: "
             "JOIN t ON a.x = t.y, USING (x), or FROM a, t WHERE a.x = t.y.")


@dataclass(frozen=True)
class DerivedColumn:
    """A column of a derived relation: its frequency there, and the base column it is."""

    max_freq: Elastic | None  # None: computed, frequency unbounded (∞)
    origin: ColumnKey | None
    # A UNION ALL column whose branches read different base columns: all of them (its
    # origin is then None). plan_joins.py sees a join on it as a join on each.
    branches: frozenset[ColumnKey] = frozenset()

    @property
    def bases(self) -> frozenset[ColumnKey]:
        return frozenset({self.origin}) if self.origin is not None else self.branches


# A derived relation's output columns in order: PostgreSQL renames them by position.
Columns = tuple[tuple[str, DerivedColumn], ...]
# Two output columns of one name: referring to it is ambiguous, as in PostgreSQL.
_AMBIGUOUS = DerivedColumn(None, None)


@dataclass(frozen=True)
class CteDefinition:
    """One WITH item: its body, its column alias list and the names its body may see.

    A non-recursive CTE sees the CTEs of outer queries and the siblings written *before*
    it, never later ones nor itself: a name it uses is resolved where it is defined, not
    where it is read.
    """

    body: exp.Expression
    columns: tuple[str, ...]
    scope: Mapping[str, CteDefinition]


Ctes = Mapping[str, CteDefinition]


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
    # A base table renamed by a column alias list: visible name -> the table's column
    # (None: two columns go by that name, so naming it is ambiguous).
    renamed: Mapping[str, str | None] | None = None


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
    branches: frozenset[ColumnKey] = frozenset()  # as DerivedColumn.branches

    @property
    def bases(self) -> frozenset[ColumnKey]:
        return frozenset({self.origin}) if self.origin is not None else self.branches


@dataclass
class Analyzer:
    """Walks one statement; collects missing metrics instead of failing at the first."""

    policy: Policy
    metrics: Metrics
    offset: int
    missing: set[ColumnKey] = field(default_factory=set)
    # The names each query's WITH makes visible, by node: a query has one lexical scope.
    _scopes: dict[int, Ctes] = field(default_factory=dict)
    # Private base tables PostgreSQL will read (plan_check compares its plan with these).
    # A CTE body counts once, when first read from the statement: PostgreSQL drops a CTE
    # nobody reads and materializes one read twice, so counting every definition or every
    # reference would let an unused CTE over a private table hide a scan the analysis
    # resolved to something else.
    scans: Counter[str] = field(default_factory=Counter)
    _counting: bool = True
    _counted_ctes: set[int] = field(default_factory=set)
    # Base columns whose max frequency entered a join's sensitivity, and the column alias
    # lists read on base tables: plan_joins.py checks PostgreSQL's join columns with them.
    join_columns: set[ColumnKey] = field(default_factory=set)
    renamed: list[tuple[str, str, tuple[tuple[str, str], ...]]] = field(
        default_factory=list)
    # (key column, public domain column): dpgate's own histogram joins (rewrite.py).
    domain_joins: set[tuple[ColumnKey, ColumnKey]] = field(default_factory=set)
    # Base columns grouped on: the statement's keys and choices, derived tables' GROUP BY
    # and DISTINCT columns (PostgreSQL's Group Keys may name these only).
    group_columns: set[ColumnKey] = field(default_factory=set)

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
        conjuncts = _conjuncts(where.this) if where is not None else []
        relation, filters = self._join_all(items, conjuncts, ctes)
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
            definition = CteDefinition(cte.this, _alias_columns(cte), dict(scope))
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
        aliases = _alias_columns(node)
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
                columns = self._renamed(columns, definition.columns, star, node.name, node)
                return self._derived_source(relation, alias,
                                            self._renamed(columns, aliases, star, alias, node),
                                            star)
            schema, name = self.policy.resolve(node.db, node.name)
            if self.policy.is_catalog(node.db, node.name):
                raise policy_refusal(f"catalog table {schema}.{name} cannot be joined with "
                                     "private data", position=position_of(node, self.offset))
            table = f"{schema}.{name}"
            private = self.policy.is_private(schema, name)
            if private and self._counting:
                self.scans[table] += 1
            return Source(alias or name, table=table, private=private,
                          renamed=self._renamed_base(table, aliases, alias, node))
        if isinstance(node, exp.Subquery):
            relation, columns, star = self.derived_relation(node.this, ctes)
            return self._derived_source(relation, alias,
                                        self._renamed(columns, aliases, star, alias, node), star)
        raise unsupported(f"{node.key.upper()} in FROM is not supported over private tables",
                          position=position_of(node, self.offset))

    @staticmethod
    def _derived_source(relation: Relation, alias: str, columns: Columns, star: bool
                        ) -> Source:
        return Source(alias, derived=relation, columns=_column_map(columns), star=star)

    def _renamed(self, columns: Columns, names: tuple[str, ...], star: bool, alias: str,
                 node: exp.Expression) -> Columns:
        """Columns renamed by a column alias list, by position as PostgreSQL does."""
        if not names:
            return columns
        if star:
            raise unsupported("a column alias list over SELECT * is not supported",
                              hint="Name the columns in the inner SELECT.",
                              position=position_of(node, self.offset))
        _check_alias_count(alias, len(columns), len(names), position_of(node, self.offset))
        return tuple((new, column) for new, (_, column) in zip(names, columns, strict=False)
                     ) + columns[len(names):]

    def _renamed_base(self, table: str, names: tuple[str, ...], alias: str,
                      node: exp.Expression) -> Mapping[str, str | None] | None:
        if not names:
            return None
        known = self.metrics.columns.get(table)
        if known is None:
            raise unsupported(f"a column alias list on {table} needs its columns, which "
                              "dpgate does not know", position=position_of(node, self.offset))
        _check_alias_count(alias, len(known), len(names), position_of(node, self.offset))
        renamed: dict[str, str | None] = {}
        positional = tuple(zip([*names, *known[len(names):]], known, strict=True))
        for visible, real in positional:
            renamed[visible] = None if visible in renamed else real  # None: ambiguous
        self.renamed.append((table, alias, positional))
        return renamed

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
                self.group_columns |= columns[-1][1].bases
        for group_key in group_keys:
            if isinstance(group_key, exp.Column) and not isinstance(group_key.this, exp.Star):
                try:
                    self.group_columns |= self.resolve(group_key, relation).bases
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
                self.group_columns |= a.bases | b.bases
        relation = Relation(set_stability(left.stability, right.stability), (),
                            left.base_tables | right.base_tables,
                            left.private_tables + right.private_tables)
        return relation, tuple(columns), False

    def _base_relation(self, source: Source) -> Relation:
        if source.derived is not None:
            return Relation(source.derived.stability, (source,), source.derived.base_tables,
                            source.derived.private_tables)
        stability = Elastic.ONE if source.private else Elastic.ZERO
        return Relation(stability, (source,), frozenset({source.table or ""}),
                        1 if source.private else 0)

    # -- joins -----------------------------------------------------------------------

    def _join_all(self, items: list[tuple[exp.Expression, exp.Join | None]],
                  where: list[exp.Expression], ctes: Ctes
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
            side = _side_of(join)
            relation = self._join(relation, joined, pairs, side)
            if join is not None and join.args.get("using"):
                # The merged column is the preserved side's value (PostgreSQL's COALESCE).
                relation = replace(relation, merged={
                    **relation.merged, **{c.this.name: (c.expression if side == "RIGHT"
                                                        else c.this).table
                                          for _, _, c in pairs}})
        return relation, filters + pool

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
        if _side_of(join) == "FULL" and join.args.get("using"):
            raise unsupported("FULL JOIN … USING over private tables is not supported: its "
                              "merged column is computed from both sides",
                              hint="Write FULL JOIN … ON with qualified columns.",
                              position=position_of(join.this, self.offset))
        if join.args.get("using"):
            return [self._using_condition(name.name, relation, source, join)
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
        name = column.table or None
        if name is not None:
            if name == source.alias:
                return "right"
            return "left" if any(s.alias == name for s in relation.sources) else None
        in_right = self._has_column(source, column.name)
        in_left = any(self._has_column(s, column.name) for s in relation.sources)
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
              pairs: list[tuple[Resolved, Resolved, exp.Expression]], side: str) -> Relation:
        shared = bool(left.base_tables & right.base_tables)
        bounds = []
        for a, b, condition in pairs:
            if a.max_freq is None or b.max_freq is None:
                raise unsupported("a join key must be a plain column with a known frequency, "
                                  "not a computed value", hint=JOIN_HINT,
                                  position=position_of(condition, self.offset))
            self.missing |= a.max_freq.unmeasured_columns() | b.max_freq.unmeasured_columns()
            self.join_columns |= a.bases | b.bases
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

    # -- columns ---------------------------------------------------------------------

    def _has_column(self, source: Source, name: str) -> bool | None:
        """Whether a source has a column; None when nobody knows (no catalog entry)."""
        if source.columns is not None and name in source.columns:
            return True
        if source.derived is not None:
            if source.star:
                return any(self._has_column(s, name) for s in source.derived.sources)
            return False
        if source.renamed is not None:
            return name in source.renamed
        known = self.metrics.columns.get(source.table or "")
        return None if known is None else name in known

    def resolve(self, column: exp.Column, relation: Relation) -> Resolved:
        """The frequency and origin of a column reference; refuses unknown or ambiguous."""
        name = column.name
        qualifier = column.table or relation.merged.get(name)
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
        frequency, origin, branches = self._source_column(source, name, column)
        return Resolved(None if frequency is None else multiply(frequency, source.factor),
                        origin, source, branches)

    def _source_column(self, source: Source, name: str, column: exp.Column
                       ) -> tuple[Elastic | None, ColumnKey | None, frozenset[ColumnKey]]:
        if source.derived is not None:
            if source.columns and name in source.columns:
                derived = source.columns[name]
                if derived is _AMBIGUOUS:
                    raise Refusal(AMBIGUOUS_COLUMN, f'column reference "{name}" is ambiguous',
                                  position=position_of(column, self.offset))
                return derived.max_freq, derived.origin, derived.branches
            if source.star:
                inner = self.resolve(exp.column(name), source.derived)
                return inner.max_freq, inner.origin, inner.branches
            raise unsupported(f'column {source.alias}.{name} does not exist',
                              position=position_of(column, self.offset))
        table = source.table or ""
        if source.renamed is not None:
            if name not in source.renamed:
                raise Refusal(UNDEFINED_COLUMN, f'column {source.alias}.{name} does not exist',
                              position=position_of(column, self.offset))
            real = source.renamed[name]
            if real is None:
                raise Refusal(AMBIGUOUS_COLUMN, f'column reference "{name}" is ambiguous',
                              position=position_of(column, self.offset))
            name = real
        return self._base_frequency(table, name, source.private), (table, name), frozenset()

    def _check_operand_types(self, node: exp.Expression, relation: Relation) -> None:
        """Nodes total for some argument types only: extract and date_trunc on dates and
        times (an interval or a time rejects some units, row by row), SUM and AVG on
        integers and numerics (an interval, money or float sum overflows), || and ARRAY[]
        on anything but arrays (arrays of different dimensions do not concatenate),
        comparisons and choices of a numeric with a float (the numeric is cast, and fails
        beyond the float's range). A column of unknown type passes: the proxy always
        knows the types, `dpgate explain --policy` may not."""
        if mixes_numeric_and_float(node, lambda column: self._type_of(column, relation)):
            raise unsupported("a numeric value read from a row meets a real or double "
                              "precision one: PostgreSQL casts it to the float, which fails "
                              "beyond the float's range", hint="Cast the float side to "
                              "numeric (d::numeric).", position=position_of(node, self.offset))
        if isinstance(node, (exp.Extract, exp.TimestampTrunc, exp.DateTrunc)):
            argument = node.expression if isinstance(node, exp.Extract) else node.this
            wanted, what = DATETIME_TYPES, f"{function_name(node)} on private rows"
        elif isinstance(node, (exp.Sum, exp.Avg)):
            # a float sum overflows ("value out of range: overflow"), a numeric one cannot
            argument, wanted, what = node.this, EXACT_NUMBER_TYPES, f"{node.sql_name()}()"
        elif isinstance(node, (exp.DPipe, exp.Array)):
            operands = node.expressions if isinstance(node, exp.Array) else \
                [node.this, node.expression]
            if any(may_be_array(operand, lambda column: self._type_of(column, relation)
                                == "ARRAY") for operand in operands):
                raise unsupported("arrays of arrays and || of arrays can fail on some rows "
                                  "only (their dimensions differ)",
                                  position=position_of(node, self.offset))
            return
        else:
            return
        if isinstance(argument, exp.Column):
            kind = self._type_of(argument, relation)
            if kind is not None and kind not in wanted:
                raise unsupported(f"{what} takes {' or '.join(sorted(wanted))} columns here, "
                                  f"not {kind}: it could fail on some rows only",
                                  position=position_of(node, self.offset))

    def _type_of(self, column: exp.Column, relation: Relation) -> str | None:
        origin = self.resolve(column, relation).origin
        return self.metrics.column_types.get(origin) if origin is not None else None

    def _base_frequency(self, table: str, column: str, private: bool) -> Elastic:
        declared = self.policy.column(table, column).max_freq
        measured = self.metrics.max_freq.get((table, column))
        value = declared if declared is not None else measured
        if value is None:
            return unmeasured(table, column)
        return plus_k(value) if private else constant(value)

    # -- row expressions -------------------------------------------------------------

    def check_row_expression(self, node: exp.Expression, relation: Relation,
                             allow_aggregates: bool = False) -> None:
        """Refuse anything evaluated on private rows that could fail on some rows only.

        Every allowed node is total on its inputs, so an error cannot tell anything about a
        row (functions.node_failure); a cast or arithmetic is allowed on literals only.
        """
        if isinstance(node, (exp.Subquery, exp.Select, exp.Exists, exp.Union)):
            # Those in WHERE, ON and select lists were computed first (constants.py); one
            # here would run only when a row reaches it.
            raise unsupported("a subquery is allowed here only in WHERE, ON or the select "
                              "list of a derived table", position=position_of(node, self.offset))
        if isinstance(node, exp.Column):
            if not isinstance(node.this, exp.Star):
                self.resolve(node, relation)
            return
        if node.meta.get(TOTAL):  # built total by dpgate (a variance's sum of squares)
            return
        if isinstance(node, ARITHMETIC) and not is_literal_constant(node):
            try:
                total = total_form(node, lambda column: self._type_of(column, relation))
            except TooCostly as error:
                raise Refusal(PROGRAM_LIMIT_EXCEEDED, str(error), COSTLY_HINT,
                              position_of(node, self.offset)) from None
            except NotTotal as error:
                raise unsupported(str(error), position=position_of(node, self.offset)
                                  ) from None
            node.replace(total)
            if isinstance(total, exp.Cast):  # to text: what it casts is checked like any other
                self.check_row_expression(total.this, relation, allow_aggregates)
            return
        if isinstance(node, TRUNCATIONS):
            if (failure := row_failure(node)) is not None:
                raise unsupported(failure, position=position_of(node, self.offset))
            self._check_operand_types(node, relation)
            for argument in node.iter_expressions():
                self.check_row_expression(argument, relation, allow_aggregates)
            node.replace(total_trunc(node))
            return
        if allow_aggregates and isinstance(node, (exp.Count, exp.Sum, exp.Avg, exp.Min,
                                                  exp.Max, exp.Distinct)):
            pass
        elif (failure := node_failure(node)) is not None:
            raise unsupported(
                failure,
                hint="Use comparisons, AND/OR/NOT, IN, BETWEEN, LIKE, IS NULL, CASE and "
                "simple functions (lower, upper, length, trim, extract, coalesce).",
                position=position_of(node, self.offset))
        self._check_operand_types(node, relation)
        for child in node.iter_expressions():
            self.check_row_expression(child, relation, allow_aggregates)


def _side_of(join: exp.Join | None) -> str:
    """LEFT, RIGHT or FULL for an outer join; "" for an inner join or a FROM list item."""
    return (join.args.get("side") or "").upper() if join is not None else ""


def _alias_columns(node: exp.Expression) -> tuple[str, ...]:
    """The column alias list of a FROM item or a WITH item: `AS o(a, b)`, `w(a, b) AS`."""
    alias = node.args.get("alias")
    if not isinstance(alias, exp.TableAlias):
        return ()
    return tuple(column.name for column in alias.columns)


def _column_map(columns: Columns) -> dict[str, DerivedColumn]:
    mapped: dict[str, DerivedColumn] = {}
    for name, column in columns:
        mapped[name] = _AMBIGUOUS if name in mapped else column
    return mapped


def _check_alias_count(alias: str, available: int, specified: int,
                       position: int | None) -> None:
    if specified > available:
        raise Refusal(INVALID_COLUMN_REFERENCE, f'table "{alias}" has {available} columns '
                      f"available but {specified} columns specified", position=position)


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
