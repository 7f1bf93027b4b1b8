"""Plans for aggregates over private tables: validate, compute sensitivity, rewrite.

The relations (FROM, joins, WHERE) are analysed in relations.py; this module handles the
released columns: noisy aggregates (COUNT, COUNT(DISTINCT), SUM and AVG of bounded
columns), choices of the exponential mechanism (mode, the most frequent group, MIN/MAX
and percentiles, see choice.py), group keys (released over a declared domain or by key
selection) and HAVING, ORDER BY and LIMIT, which the proxy applies after noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import cast

from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from mechanisms.approx_bounds import bucket_edges
from mechanisms.exponential import QUANTILE_GRID_BITS, quantile_grid

from ..analysis.arithmetic import TOTAL, TooCostly, refuse_long_numbers
from ..analysis.buckets import bucket_failure, mark_domain_only
from ..analysis.constants import Constant, as_expressions, extract_constants, placeholder_token
from ..analysis.relations import Analyzer, Relation, Resolved, refuse_missing
from ..analysis.row_cost import COSTLY_HINT
from ..analysis.totality import refuse_unsafe_nodes
from ..analysis.unit import NotOneUnit, UnitOfRows, unit_of_rows
from ..checks.plan_joins import JoinKeys
from ..errors import (
    INVALID_COLUMN_REFERENCE,
    PROGRAM_LIMIT_EXCEEDED,
    UNDEFINED_COLUMN,
    Refusal,
    missing_setting,
    policy_refusal,
    unsupported,
)
from ..plan import (
    Comparison,
    Condition,
    Grouping,
    NoisyPart,
    OutputColumn,
    OutputKind,
    PostProcess,
    PrivateAggregate,
    UnitBounds,
)
from ..policy.model import ColumnDomain, Domain, Policy, RangeDomain, ValuesDomain
from ..release.computed import placeholder, post_sql, probe, substitute
from ..release.outer import split_outer
from ..sensitivity.elastic import Elastic, constant, multiply
from ..sensitivity.metrics import Metrics, quote_identifier
from ..sql.functions import RESERVED_PREFIX
from ..sql.positions import position_of
from .aggregate_args import NoBounds, interval, mark_total, with_clamped_columns
from .bounding import Bounding, window_count
from .choice import ChoiceSpec, choice_spec
from .rewrite import KeySpec, PartSpec, mode_sql, quantile_sql, rewrite, rewrite_chosen_count

# As arithmetic.py's MAX_DIGITS allows: four numeric values multiplied, not five.
MAX_PRODUCTS = 3
ONLY_AGGREGATES = "only aggregates of private tables are answered"
NO_AGGREGATE_REASON = "rows of a private table asked without an aggregate"
# Column types a domain value may be cast to, to compare it with a WHERE condition as the
# column's own values compare.
_CASTABLE_TYPES = frozenset({
    "smallint", "integer", "bigint", "numeric", "real", "double precision", "boolean", "date",
    "text", "character varying", "timestamp without time zone", "timestamp with time zone"})
_COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


def plan_private_aggregate(tree: exp.Expression, policy: Policy, offset: int,
                           metrics: Metrics | None = None) -> PrivateAggregate:
    """Validate a query that reads private tables and rewrite it for the backend.

    Raises Refusal for what is not answered, MissingMetrics when a join column has not
    been measured yet.
    """
    if not isinstance(tree, exp.Select):
        raise unsupported(f"{tree.key.upper()} over private tables is not supported",
                          hint="Ask one SELECT of aggregates at a time.",
                          position=position_of(tree, offset))
    _distinct_as_group_by(tree)
    for key, what in (("distinct", "SELECT DISTINCT"), ("windows", "WINDOW"),
                      ("qualify", "QUALIFY")):
        if tree.args.get(key):
            raise unsupported(f"{what} is not supported over private aggregates",
                              position=position_of(tree, offset))
    # Names as PostgreSQL reads them: unquoted folded to lower case, quoted kept.
    normalize_identifiers(tree, dialect="postgres")
    _name_derived_tables(tree)
    split = split_outer(tree)
    if split is not None:
        inner, outer, alias = split
        plan = plan_private_aggregate(inner, policy, offset, metrics)
        # PostgreSQL aggregates the groups that exist; the inner answer holds every key of
        # the domain (empty ones too) or those above the key-selection threshold, so
        # count(*) over it would silently differ (1,000 or 0 where PostgreSQL says 4).
        # Such a query is analysed below instead, as an aggregate over a grouped derived
        # table (FLEX: stability doubled), which computes what PostgreSQL does, with noise.
        if plan.grouping is None or not _aggregates_groups(tree, plan.grouping):
            if plan.outer_sql is not None or not plan.postgres_sql:
                raise unsupported("a query over an aggregate subquery is answered for one "
                                  "level of standard SQL aggregates",
                                  position=position_of(tree, offset))
            return replace(plan, outer_sql=outer, outer_alias=alias,
                           inner_sql=inner.sql(dialect="postgres"),
                           fingerprint_text=_fingerprint(tree, plan.unit))
    constants = extract_constants(tree, policy, offset)
    analyzer = Analyzer(policy, metrics or Metrics(), offset)
    planner = _Planner(analyzer, tree, offset)
    plan = planner.plan()
    # The last net, after the analysis's own messages, over what runs on private rows;
    # computed group keys run on the public domain only (buckets.py).
    checked = planner.probe or tree
    planner.mark_buckets(checked)
    refuse_unsafe_nodes(checked, offset)
    join_keys = JoinKeys(frozenset(analyzer.join_columns), tuple(analyzer.renamed),
                         frozenset(analyzer.domain_joins), frozenset(analyzer.group_columns))
    constants += tuple(planner.bucket_checks.values())
    # The probe is described before the constants are computed: their placeholders would
    # be a syntax error there (issue 23's XX000).
    probe_sql = None if plan.probe_sql is None else as_expressions(plan.probe_sql, constants)
    return replace(plan, constants=constants, probe_sql=probe_sql,
                   scans=tuple(sorted(analyzer.scans.elements())), join_keys=join_keys)


def _name_derived_tables(tree: exp.Select) -> None:
    """Give each derived table written without an alias (PostgreSQL 16 allows it) a name,
    so that the rewritten SQL, and the unit column read through it, can refer to it. No
    column of the statement can name it (it had no name), so the answer is unchanged."""
    unnamed = [node for node in tree.find_all(exp.Subquery)
               if isinstance(node.parent, (exp.From, exp.Join)) and not node.alias]
    for number, node in enumerate(unnamed, 1):
        node.set("alias", exp.TableAlias(this=exp.to_identifier(f"_dp_derived{number}")))


def _aggregates_groups(outer: exp.Select, grouping: Grouping) -> bool:
    """Whether the query around a GROUP BY aggregates its groups in a way that depends on
    which groups exist. Over a whole declared domain, sum() and max() of the released
    values are what PostgreSQL computes (an empty key adds a noisy 0); anything else, or
    any aggregate over groups chosen by key selection, is not."""
    aggregates = [node for projection in outer.expressions
                  for node in projection.find_all(exp.AggFunc)]
    for clause in ("where", "having", "order"):
        if outer.args.get(clause) is not None:
            aggregates += list(outer.args[clause].find_all(exp.AggFunc))
    if grouping.selection_part is not None:
        return bool(aggregates)
    return any(not isinstance(node, (exp.Sum, exp.Max)) for node in aggregates)


@dataclass
class _Planner:
    analyzer: Analyzer
    tree: exp.Select
    offset: int
    relation: Relation = field(init=False)
    keys: list[tuple[Resolved, exp.Column]] = field(default_factory=list)
    parts: list[PartSpec] = field(default_factory=list)
    outputs: list[OutputColumn] = field(default_factory=list)
    choices: list[tuple[ChoiceSpec, Resolved]] = field(default_factory=list)
    probe: exp.Select | None = None  # with expressions over released values
    # Per hidden aggregate output: the aggregate as written (a SUM sharing an AVG's part
    # has the SUM's type, not the AVG's).
    hidden_sources: dict[int, exp.Expression] = field(default_factory=dict)
    # Per key: the GROUP BY expression of its column (a bucket), or None for the column.
    key_expressions: list[exp.Expression | None] = field(default_factory=list)
    # Per computed key: the constant that evaluates its mapping before the query.
    bucket_checks: dict[int, Constant] = field(default_factory=dict)
    # Counts a histogram's cells when a public table supplies a domain (_check_cells).
    cells_sql: str | None = None
    # Unit mode: the unit of every row; or why a unit policy fell back to rows.
    unit: UnitOfRows | None = None
    row_level_reason: str | None = None
    # A condition on a key alone left the domain whole (a computed constant in it).
    unnarrowed: bool = False

    @property
    def policy(self) -> Policy:
        return self.analyzer.policy

    def plan(self) -> PrivateAggregate:
        self.relation, _ = self.analyzer.select_relation(self.tree, {})
        self._unit_mode()
        self._group_keys()
        computed = []
        for index, projection in enumerate(self.tree.expressions):
            output = self._output(projection, index)
            if output is None:
                computed.append(index)
                output = OutputColumn(_name_of(projection), OutputKind.COMPUTED, None, ())
            self.outputs.append(output)
        post, computed_post = self._post_or_none(bool(computed))
        refuse_missing(self.analyzer)
        if self.choices:
            if computed_post:
                raise unsupported("MIN, MAX, percentiles and mode cannot be combined with "
                                  "expressions over released values",
                                  hint="Ask them in a statement of their own.")
            return self._choice_plan(post)
        if self._most_frequent_group(post):
            return self._most_frequent_plan()
        grouping, domains = self._grouping()
        self._settle_groups(grouping is not None and grouping.key_selection)
        noisy_parts = tuple(self._noisy_part(part) for part in self.parts)
        key_specs = [self._key_spec(index, domain) for index, domain in enumerate(domains)]
        plan = self._plan_of(rewrite(self.tree, self.policy, key_specs, self.parts, grouping,
                                     self._bounding()),
                             len(self.keys), noisy_parts, post, grouping,
                             grouped_bounding=bool(self.keys))
        plan = replace(plan, occupied_by=self._occupied_by(grouping),
                       domain_unnarrowed=self.unnarrowed)
        if computed_post is None:
            return self._chosen_count(plan, key_specs)
        self.probe = probe(self.tree, [self._source(i, o) for i, o in enumerate(self.outputs)],
                           [e or column for (_, column), e in
                            zip(self.keys, self.key_expressions, strict=True)])
        return replace(plan, post_sql=computed_post,
                       probe_sql=self.probe.sql(dialect="postgres"))

    def _occupied_by(self, grouping: Grouping | None) -> int | None:
        """Over a whole declared domain, the statement's COUNT(*) when it orders or limits
        its groups: PostgreSQL ranks the groups that exist, so a group whose released
        count is ≤ 0 is dropped first (post-processing of released values only). Without
        ORDER BY or LIMIT the whole domain is listed, as documented."""
        if grouping is None or grouping.key_selection or not any(
                self.tree.args.get(clause) is not None for clause in ("order", "limit")):
            return None
        return next((index for index, projection in enumerate(self.tree.expressions)
                     if _is_count_star(_unalias(projection))), None)

    # -- the privacy unit ----------------------------------------------------

    def _unit_mode(self) -> None:
        """Unit mode when the policy names a unit and every row belongs to one unit; else
        row-level FLEX when the policy allows it (row_level_fallback), else a refusal."""
        unit = self.policy.unit
        if unit is None or not any(s.private or (s.derived and s.derived.private_tables)
                                   for s in self.relation.sources):
            return
        try:
            self.unit = unit_of_rows(self.tree, self.analyzer, self.relation)
        except NotOneUnit as refusal:
            if not unit.row_level_fallback:
                raise policy_refusal(
                    f"{refusal.reason}, so dpgate cannot protect each {unit.label} here "
                    "(policy setting privacy_unit; row_level_fallback = false)",
                    hint=refusal.hint or None, position=position_of(self.tree, self.offset),
                    reason="rows of no single privacy unit: policy setting "
                    f"{refusal.setting or 'privacy_unit (row_level_fallback = false)'}"
                ) from None
            self.row_level_reason = refusal.reason

    def _settle_groups(self, key_selection: bool) -> None:
        """κ as it applies to this statement: where κ·τ_g ≥ τ a group bound would not
        lower a histogram's L1 (min(τ, κ·τ_g) = τ) and would only drop rows, so κ = τ
        (no bound) then, except for key selection, whose threshold counts κ' groups."""
        if self.unit is None or key_selection:
            return
        bounds = self.unit.bounds
        if bounds.max_groups * bounds.max_group_contributions >= bounds.max_contributions:
            self.unit = replace(self.unit, bounds=replace(
                bounds, max_groups=bounds.max_contributions))

    def _chosen_count(self, plan: PrivateAggregate, keys: list[KeySpec]) -> PrivateAggregate:
        """A count(*) alone, or a histogram of it over declared domains, is bounded in unit
        mode by aggregation, not a sort: the backend returns per-unit row counts, from
        which the proxy answers at τ, after choosing τ per query, privately
        (docs/privacy-unit.md, proxy/engine/chosen_bound.py). A lone count at the
        session's fixed τ uses them too. A histogram's cells then take no κ or τ_g
        bound: their L1 is τ. Other shapes keep row_number()."""
        unit, declared = self.unit, self.policy.unit
        if unit is None or declared is None or unit.columns is None or \
                len(self.parts) != 1 or self.parts[0].aggregate != "count" or \
                not isinstance(self.parts[0].node.this, exp.Star) or \
                (plan.grouping is not None and plan.grouping.key_selection):
            return plan
        limit = declared.contributions_limit if declared.choose_contributions else None
        if keys and limit is None:
            # At a fixed τ a unit's kept rows stay a uniform sample (row_number()): the
            # proportional ⌊m·τ/n⌋ would drop a heavy unit's thin cells altogether.
            return plan
        tau = unit.bounds.max_contributions
        if keys:  # a histogram's L1 is at most κ·τ_g (the policy's), so τ is too
            groups = declared.max_groups * declared.max_group_contributions
            limit, tau = min(limit or groups, groups), min(tau, groups)
        bounding = self._bounding()
        assert bounding is not None
        cap = max(tau, limit or 0)
        self.analyzer.group_columns |= unit.columns  # the units' counts group on them
        bounds = replace(unit.bounds, max_groups=tau, max_group_contributions=tau,
                         counts_cap=cap, chosen_limit=limit)
        fingerprint = plan.fingerprint_text + (f" /* tau chosen <= {limit} */" if limit else "")
        return replace(plan, sql=rewrite_chosen_count(self.tree, self.policy, keys, bounding,
                                                      cap),
                       parts=(replace(plan.parts[0], elastic=constant(cap), l2=float(cap)),),
                       unit=bounds, windows=0, fingerprint_text=fingerprint)

    def _bounding(self) -> Bounding | None:
        if self.unit is None:
            return None
        bounds = self.unit.bounds
        return Bounding(self.unit.expression, bounds.max_contributions, bounds.max_groups,
                        bounds.max_group_contributions, self.unit.tables,
                        self.unit.conditions)

    # -- expressions over released values (computed.py) ------------------------------

    def _post_or_none(self, computed: bool) -> tuple[PostProcess, str | None]:
        """HAVING, ORDER BY and LIMIT applied by the proxy, or (when an output or one of
        them is an expression over released values) the SQL that computes the answer."""
        if not computed:
            outputs, parts = len(self.outputs), len(self.parts)
            try:
                return self._post_process(), None
            except Refusal:  # an expression: computed below, or refused there
                del self.outputs[outputs:], self.parts[parts:]
        visible = self.outputs[:len(self.tree.expressions)]
        projections = [exp.alias_(self._substitute(_unalias(p)) if o.kind == "computed"
                                  else placeholder(i), o.name, quoted=True)
                       for i, (p, o) in enumerate(zip(self.tree.expressions, visible,
                                                      strict=True))]
        having = self.tree.args.get("having")
        order = self.tree.args.get("order")
        for clause in ("limit", "offset"):
            self._refuse_row_reads(self.tree.args.get(clause), clause.upper())
        sql = post_sql(self.tree, projections,
                       self._substitute(having.this) if having is not None else None,
                       [self._post_order(item) for item in order.expressions] if order else [])
        if not self.parts and not self.keys:
            raise policy_refusal(f"{ONLY_AGGREGATES}: this statement has no aggregate and "
                                 "would return one row per private row",
                                 hint="Ask for an aggregate such as count(*).",
                                 position=position_of(self.tree, self.offset),
                                 reason=NO_AGGREGATE_REASON)
        return PostProcess(), sql

    def _refuse_row_reads(self, node: exp.Expression | None, clause: str) -> None:
        """LIMIT and OFFSET are copied into the SQL over the released values, which runs
        on the reader connection: a subquery there would read private rows unnoised (its
        value would be the number of rows returned)."""
        if node is None:
            return
        found = node.find(exp.Subquery, exp.Select, exp.Table, exp.Column, exp.AggFunc,
                          exp.Window)
        if found is not None:
            raise unsupported(f"{clause} takes a constant or a parameter over private "
                              "aggregates", hint=f"Write the number of rows: {clause} 10.",
                              position=position_of(found, self.offset))

    def _substitute(self, node: exp.Expression) -> exp.Expr:
        expanded = node.copy().transform(
            lambda n: _variance(n, self._centre(n)) if isinstance(n, _VARIANCES) else n)
        return substitute(expanded, self._hidden_aggregate, self._hidden_key, self.offset,
                          self._hidden_bucket)

    def _hidden_bucket(self, node: exp.Expression) -> int | None:
        if self._key_expression_index(node) is None:
            return None
        return self._hidden_key(node)

    def _hidden_aggregate(self, node: exp.Expression) -> int:
        self.outputs.append(self._aggregate(node, _default_name(node), True,
                                            position_of(node, self.offset)))
        self.hidden_sources[len(self.outputs) - 1] = node
        return len(self.outputs) - 1

    def _hidden_key(self, column: exp.Expression) -> int:
        output = self._output(column, len(self.outputs), hidden=True)
        assert output is not None
        self.outputs.append(output)
        return len(self.outputs) - 1

    def _post_order(self, item: exp.Ordered) -> exp.Ordered:
        """An ORDER BY item over the released rows: a position, an output's name (which
        PostgreSQL looks up before input columns) as its position, or an expression."""
        ordered = item.copy()
        node = item.this
        if isinstance(node, exp.Column) and not node.table:
            named = [i for i, o in enumerate(self.outputs[:len(self.tree.expressions)])
                     if o.name == node.name]
            if named:
                ordered.set("this", exp.Literal.number(named[0] + 1))
                return ordered
        if not (isinstance(node, exp.Literal) and not node.is_string):
            ordered.set("this", self._substitute(node))
        return ordered

    def _source(self, index: int, output: OutputColumn) -> exp.Expression:
        """An output as the statement asks for it, for PostgreSQL's type of it: the
        aggregate as written, not the part it shares (an AVG's sum is numeric, a SUM of
        integers bigint)."""
        if output.kind == "key":
            return self.key_expressions[output.parts[0]] or self.keys[output.parts[0]][1]
        if output.kind == "computed":
            return exp.cast(exp.Null(), "text")
        if index < len(self.tree.expressions):
            return _unalias(self.tree.expressions[index])
        return self.hidden_sources.get(index) or self.parts[output.parts[0]].node

    # -- group keys ------------------------------------------------------------------

    def _group_keys(self) -> None:
        group = self.tree.args.get("group")
        if group is None:
            return
        for item in group.expressions:
            target = self._key_column(item)
            column = target if isinstance(target, exp.Column) else self._bucketed(target, item)
            resolved = self.analyzer.resolve(column, self.relation)
            self.analyzer.group_columns |= resolved.bases  # plan_joins.py
            self.keys.append((resolved, column))
            self.key_expressions.append(None if target is column else target)
            if target is not column:
                failure = bucket_failure(target)
                if failure is not None:
                    raise unsupported(failure, hint="Group by a column with a declared domain, "
                                      "or by arithmetic, casts, date_trunc, extract, to_char, "
                                      "floor or CASE of one.",
                                      position=position_of(item, self.offset))
            if target is not column and self._domain(resolved) is None:
                raise policy_refusal(
                    f"GROUP BY {target.sql(dialect='postgres')} needs a declared domain for "
                    f"{column.sql(dialect='postgres')}: its groups are the image of the domain",
                    hint=self._domain_hint(resolved), position=position_of(item, self.offset),
                    reason=self._domain_reason(resolved))

    def _key_spec(self, index: int, domain: Domain | None) -> KeySpec:
        """Key `index` as the rewriter takes it; a computed key gets the column's type and
        the constant that computes its mapping first (buckets.py)."""
        resolved, column = self.keys[index]
        expression = self.key_expressions[index]
        restriction, restriction_type = self._restriction(resolved, column)
        enum_type = self._enum_type(resolved)
        if expression is None:
            return KeySpec(column, domain, None, restriction, restriction_type,
                           enum_type=enum_type)
        kind = self.analyzer.metrics.column_types.get(resolved.origin) \
            if resolved.origin else None
        name = f"{RESERVED_PREFIX}bucket_{index}"
        spec = KeySpec(column, domain or self._domain(resolved), expression, restriction,
                       restriction_type, kind if kind in _CASTABLE_TYPES else None, name,
                       enum_type)
        self.bucket_checks[index] = Constant(placeholder_token(name), spec.check_sql())
        return spec

    def mark_buckets(self, tree: exp.Expression) -> None:
        """Mark every occurrence of a computed key in `tree` as evaluated on the domain
        only: the rewritten SQL reads its value from the mapping, never from a row."""
        texts = {e.sql(dialect="postgres", normalize=True)
                 for e in self.key_expressions if e is not None}
        def mark(node: exp.Expression) -> None:
            # Never inside an aggregate (its argument is read on every row) or a subquery.
            if isinstance(node, (exp.AggFunc, exp.Window, exp.Subquery, exp.Select)):
                return
            if node.sql(dialect="postgres", normalize=True) in texts:
                mark_domain_only(node)
                return
            for child in node.iter_expressions():
                mark(child)
        if not texts:
            return
        for clause in ("expressions", "group", "having", "order"):
            value = tree.args.get(clause)
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, exp.Expression):
                    mark(item)

    def _enum_type(self, key: Resolved) -> str | None:
        return self.analyzer.metrics.enum_types.get(key.origin) if key.origin else None

    def _restriction(self, key: Resolved, column: exp.Column
                     ) -> tuple[tuple[exp.Expr, ...], str | None]:
        """The WHERE conjuncts that read the key's column and nothing else (PostgreSQL would
        never list a key they reject, so neither does the filled histogram), and the
        column's type, which the domain's value is cast to when they are applied to it.

        Read as the column's own type, the domain's value compares with a literal as the
        column does, and PostgreSQL deduces the same type for a parameter ($1: bound by the
        client, or a literal lifted into one) in both places; so a literal or a parameter
        gives the same keys. Without a known type nothing is restricted. Conjuncts with
        subqueries, aggregates, windows, random draws or computed constants (each is
        placed once, in the data's WHERE) are left out."""
        where = self.tree.args.get("where")
        if where is None:
            return (), None
        condition = where.this
        conjuncts = condition.flatten() if isinstance(condition, exp.And) else [condition]
        kind = self.analyzer.metrics.column_types.get(key.origin) if key.origin else None
        enum = self._enum_type(key) is not None
        if kind not in _CASTABLE_TYPES and not enum:
            return (), None
        kept: list[exp.Expr] = []
        for conjunct in conjuncts:
            columns = list(conjunct.find_all(exp.Column))
            if not columns or conjunct.find(exp.Subquery, exp.Select, exp.AggFunc, exp.Window,
                                            exp.Rand, exp.Anonymous, exp.Placeholder):
                if conjunct.find(exp.Placeholder) and \
                        all(self._same_column(c, key, column) for c in columns):
                    self.unnarrowed = True  # the NOTICE says so (answer_notice)
                continue
            if all(self._same_column(c, key, column) for c in columns):
                kept.append(conjunct)
        # An enum's domain values are read as the column's type already (enum_type).
        return tuple(kept), kind if kept and not enum else None

    def _same_column(self, column: exp.Column, key: Resolved, key_column: exp.Column) -> bool:
        if column.name != key_column.name:
            return False
        try:
            return self.analyzer.resolve(column, self.relation).source is key.source
        except Refusal:
            return False

    def _bucketed(self, target: exp.Expression, item: exp.Expression) -> exp.Column:
        """The one column a computed GROUP BY key is a function of (a time bucket, a CASE
        bucket): the key's groups are the image of that column's domain."""
        columns = {c.sql(dialect="postgres") for c in target.find_all(exp.Column)}
        if len(columns) != 1 or target.find(exp.AggFunc, exp.Subquery, exp.Select, exp.Window):
            raise unsupported(
                "GROUP BY a computed expression is supported only as a function of one "
                "column with a declared domain",
                hint="Group by such a column, or by date_trunc(…)/extract(…)/CASE of it.",
                position=position_of(item, self.offset))
        return next(target.find_all(exp.Column))

    def _key_column(self, item: exp.Expression) -> exp.Expression:
        """A GROUP BY item as a column: by position, as written or by output alias.

        As in PostgreSQL, a bare name is an input column when the FROM clause has one of
        that name, and an output alias only otherwise.
        """
        target = item
        if isinstance(item, exp.Literal) and not item.is_string:
            index = int(item.this) - 1
            if not 0 <= index < len(self.tree.expressions):
                raise Refusal(INVALID_COLUMN_REFERENCE,
                              f"GROUP BY position {item.this} is not in select list",
                              position=position_of(item, self.offset))
            target = _unalias(self.tree.expressions[index])
        elif isinstance(item, exp.Column) and not item.table and \
                not self._is_input_column(item):
            aliased = [p.this for p in self.tree.expressions if isinstance(p, exp.Alias)
                       and p.alias.lower() == item.name.lower()]
            target = aliased[0] if aliased else item
        return target

    def _is_input_column(self, column: exp.Column) -> bool:
        try:
            self.analyzer.resolve(column, self.relation)
        except Refusal as refusal:
            if refusal.sqlstate == UNDEFINED_COLUMN:
                return False
            raise
        return True

    def _key_index(self, column: exp.Column) -> int | None:
        resolved = self.analyzer.resolve(column, self.relation)
        for index, (key, _) in enumerate(self.keys):
            if self.key_expressions[index] is None and \
                    key.source.alias == resolved.source.alias and \
                    key.origin == resolved.origin and _same_name(column, self.keys[index][1]):
                return index
        return None

    def _key_expression_index(self, node: exp.Expression) -> int | None:
        """The computed GROUP BY key written exactly as `node`, if any."""
        text = node.sql(dialect="postgres", normalize=True)
        return next((i for i, e in enumerate(self.key_expressions) if e is not None and
                     e.sql(dialect="postgres", normalize=True) == text), None)

    # -- released columns ------------------------------------------------------------

    def _output(self, projection: exp.Expression, index: int, hidden: bool = False
                ) -> OutputColumn | None:
        """The output of a bare key, aggregate or choice; None for an expression that is
        computed from released values (a visible one only)."""
        inner = _unalias(projection)
        position = position_of(projection, self.offset)
        name = projection.alias if isinstance(projection, exp.Alias) else _default_name(inner)
        bucket = self._key_expression_index(inner)
        if bucket is not None:
            return OutputColumn(name, OutputKind.KEY, None, (bucket,), hidden)
        if isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star):
            key = self._key_index(inner)
            if key is None:
                raise policy_refusal(
                    f"{ONLY_AGGREGATES}: output column {index + 1} "
                    f"({projection.sql(dialect='postgres')}) would reveal rows",
                    hint="Group by it (GROUP BY a column with a declared domain) or wrap it "
                    "in an aggregate such as count(…).", position=position,
                    reason=NO_AGGREGATE_REASON)
            return OutputColumn(name, OutputKind.KEY, None, (key,), hidden)
        if isinstance(inner, exp.Window):
            raise unsupported("window functions are not supported over private tables",
                              position=position)
        if isinstance(inner, (exp.Count, exp.Sum, exp.Avg)) or (
                isinstance(inner, exp.Filter) and
                isinstance(inner.this, (exp.Count, exp.Sum, exp.Avg))):
            return self._aggregate(inner, name, hidden, position)
        spec = choice_spec(inner, self.offset)
        if spec is not None:
            resolved = self.analyzer.resolve(spec.column, self.relation)
            self.analyzer.group_columns |= resolved.bases  # its candidates are grouped
            self.choices.append((spec, resolved))
            return OutputColumn(name, OutputKind.CHOICE, spec.aggregate, (len(self.choices) - 1,),
                                hidden)
        if isinstance(inner, _VARIANCES) and not hidden:
            return None  # from released COUNT, SUM and SUM of squares: see _variance
        if isinstance(inner, exp.AggFunc):
            raise unsupported(
                f"{inner.sql_name()} is not supported: dpgate answers COUNT, "
                "COUNT(DISTINCT), SUM, AVG, MIN, MAX, median, percentile_cont, "
                "percentile_disc and mode", position=position)
        if not hidden:
            return None  # computed from released values: see _computed
        if inner.find(exp.AggFunc):
            raise unsupported(
                "arithmetic on a released aggregate is not supported here",
                hint="Select the aggregates themselves and compute with them in the client: "
                "it costs no privacy.", position=position)
        raise policy_refusal(
            f"{ONLY_AGGREGATES}: output column {index + 1} "
            f"({projection.sql(dialect='postgres')}) is not an aggregate",
            hint="Ask for an aggregate such as SELECT count(*) FROM … WHERE ….",
            position=position, reason=NO_AGGREGATE_REASON)

    def _aggregate(self, node: exp.Expression, name: str, hidden: bool, position: int | None
                   ) -> OutputColumn:
        node = _without_filter(node, position)
        argument = node.this
        expression = isinstance(node, (exp.Sum, exp.Avg)) and _bounded_expression(argument)
        if expression:
            # Total by construction: its columns are clamped to their bounds and the value
            # is computed in NUMERIC within the interval derived (aggregate_args.py); the
            # check below still reads its CASE conditions, which run as written. Its
            # numbers keep row_cost.py's bound: a long one would cost time on chosen rows.
            try:
                refuse_long_numbers(argument)
                if len(list(argument.find_all(exp.Mul))) > MAX_PRODUCTS:
                    raise TooCostly(f"at most {MAX_PRODUCTS + 1} factors are multiplied "
                                    "inside an aggregate: a product's digits grow with "
                                    "those of the values a row holds")
            except TooCostly as error:
                raise Refusal(PROGRAM_LIMIT_EXCEEDED, str(error), COSTLY_HINT,
                              position_of(argument, self.offset)) from None
            mark_total(argument)
        if not isinstance(argument, (exp.Star, exp.Distinct)):
            # The analysis's checks by type (arrays, a numeric meeting a float) besides
            # totality.py's walk, which knows no types; arithmetic is rewritten on this copy.
            self.analyzer.check_row_expression(argument, self.relation)
        if isinstance(node, exp.Count):
            if isinstance(argument, exp.Distinct):
                if len(argument.expressions) != 1 or \
                        not isinstance(argument.expressions[0], exp.Column):
                    raise unsupported("COUNT(DISTINCT …) takes one column", position=position)
                self.analyzer.resolve(argument.expressions[0], self.relation)
                part = self._part("count", node, 1.0, None)
                return OutputColumn(name, OutputKind.NOISY, "count_distinct", (part,), hidden)
            # Whatever it counts, one row changes a count by at most one.
            if argument.find(exp.AggFunc, exp.Subquery, exp.Select, exp.Window):
                raise unsupported("COUNT takes *, a column, an expression of columns or "
                                  "DISTINCT column", position=position)
            for column in argument.find_all(exp.Column):
                self.analyzer.resolve(column, self.relation)
            part = self._part("count", node, 1.0, None)
            return OutputColumn(name, OutputKind.NOISY, "count", (part,), hidden)
        bounds = self._bounds(node, position)
        if expression:
            argument = with_clamped_columns(argument, self._bounds_of(node.key.upper(),
                                                                      position))
            node = node.copy()  # summed with each column clamped first (aggregate_args.py)
            node.set("this", argument)
        lo, hi = bounds
        edges = self._edges(argument, bounds)
        if isinstance(node, exp.Sum):
            total = self._part("sum", node, max(abs(lo), abs(hi)), bounds, edges)
            return OutputColumn(name, OutputKind.NOISY, "sum", (total,), hidden, bounds)
        # AVG: the sum of x − m, m the bounds' midpoint, has sensitivity (hi − lo)/2 per
        # row instead of max(|lo|, |hi|); release.py adds m back after the division. With
        # bounds chosen at release, m is theirs and release.py centres the sum.
        centre = (lo + hi) / 2
        if edges is not None:
            total = self._part("sum", exp.Sum(this=argument.copy()), (hi - lo) / 2, bounds,
                               edges, centred=True)
        else:
            total = self._part("sum", exp.Sum(this=_centred(argument, centre)), (hi - lo) / 2,
                               (lo - centre, hi - centre))
        count = self._part("count", exp.Count(this=argument.copy()), 1.0, None)
        return OutputColumn(name, OutputKind.NOISY, "avg", (total, count), hidden, bounds)

    def _edges(self, argument: exp.Expression, bounds: tuple[float, float]
               ) -> tuple[Fraction, ...] | None:
        """The buckets of a sum whose clamping bounds are chosen from the data at release
        (mechanisms/approx_bounds.py): a plain column's, where the sensitivity does not
        depend on the data (unit mode, or no join of private tables)."""
        if not isinstance(argument, exp.Column) or \
                (self.unit is None and self.relation.stability.depends_on_k):
            return None
        edges = bucket_edges(*bounds)
        return edges if len(edges) > 2 else None

    def _centre(self, node: exp.Expression) -> float:
        """The midpoint of the declared bounds of a variance's column (see _variance)."""
        if not isinstance(node.this, exp.Column):
            return 0.0  # refused by _variance
        assert isinstance(node, exp.Func)
        lo, hi = self._column_bounds(node.this, node.sql_name(), None)
        return (lo + hi) / 2

    def _bounds(self, node: exp.Expression, position: int | None) -> tuple[float, float]:
        assert isinstance(node, exp.Func)  # an aggregate call
        if isinstance(node.this, exp.Distinct):
            raise unsupported(f"{node.sql_name()}(DISTINCT …) is not supported",
                              position=position)
        return self._value_bounds(node.this, node.sql_name(), position)

    def _value_bounds(self, argument: exp.Expression, what: str, position: int | None
                      ) -> tuple[float, float]:
        centred = _centred_value(argument)
        if centred is not None:  # x − m that dpgate wrote: x's bounds, shifted
            value, centre = centred
            lo, hi = self._value_bounds(value, what, position)
            return lo - centre, hi - centre
        if isinstance(argument, exp.Case) and _plain_case(argument):
            return self._case_bounds(argument, what, position)
        square = _squared_value(argument)
        if square is not None:  # the sum of squares of a variance
            lo, hi = self._value_bounds(square, what, position)
            low = 0.0 if lo <= 0 <= hi else min(lo * lo, hi * hi)
            return low, max(lo * lo, hi * hi)
        if not isinstance(argument, exp.Column):
            return self._expression_bounds(argument, what, position)
        return self._column_bounds(argument, what, position)

    def _expression_bounds(self, argument: exp.Expression, what: str, position: int | None
                           ) -> tuple[float, float]:
        """An expression of columns with declared bounds: by interval arithmetic
        (aggregate_args.py), which the rewrite then clamps its columns for."""
        try:
            return interval(argument, self._bounds_of(what, position))
        except NoBounds as missing:
            raise unsupported(f"{what} takes a column with declared bounds, or +, -, *, "
                              "a division by a decimal constant, casts to numbers, CASE, "
                              f"COALESCE, LEAST, GREATEST or abs of them: {missing}",
                              position=position) from None

    def _bounds_of(self, what: str, position: int | None
                   ) -> Callable[[exp.Column], tuple[float, float]]:
        return lambda column: self._column_bounds(column, what, position)

    def _case_bounds(self, case: exp.Case, what: str, position: int | None
                     ) -> tuple[float, float]:
        """sum(CASE WHEN … THEN 1 ELSE 0 END): the bounds span the branches' values, each
        a constant or a column with declared bounds (a NULL branch adds nothing)."""
        spans = []
        branches = [i.args.get("true") for i in case.args.get("ifs", [])] + \
            [case.args.get("default")]
        for branch in (_unparen(b) for b in branches if b is not None):
            if isinstance(branch, exp.Null):
                continue
            if isinstance(branch, exp.Column):
                spans.append(self._column_bounds(branch, what, position))
                continue
            number = _number(branch)
            if number is None:
                raise unsupported(f"{what}(CASE …) takes constants or columns with declared "
                                  "bounds in its branches", position=position)
            spans.append((number, number))
        if not spans:
            raise unsupported(f"{what}(CASE …) has no value to sum", position=position)
        return min(lo for lo, _ in spans), max(hi for _, hi in spans)

    def _column_bounds(self, argument: exp.Column, what: str, position: int | None
                       ) -> tuple[float, float]:
        origin = self.analyzer.resolve(argument, self.relation).origin
        rule = self.policy.column(*origin) if origin else None
        bounds = (rule.bounds or _domain_bounds(rule.domain)) if rule else None
        if bounds is None:
            column = f"{origin[0]}.{origin[1]}" if origin else "the column"
            raise policy_refusal(
                f"{what}({argument.sql(dialect='postgres')}) needs declared bounds for the "
                "column", hint=f"count(…) needs no bounds; for {what}, ask the data owner for "
                f"bounds of {column}.", position=position,
                reason=missing_setting(*origin, "bounds") if origin else "no bounds")
        return bounds

    def _part(self, aggregate: str, node: exp.Expression, magnitude: float,
              bounds: tuple[float, float] | None,
              edges: tuple[Fraction, ...] | None = None, centred: bool = False) -> int:
        # The same aggregate asked twice (the SUM of a column in a statement and in its
        # ORDER BY) is noised once.
        spec = PartSpec(aggregate, node.copy(), magnitude, bounds, edges, centred)
        text = _part_text(spec)
        for index, existing in enumerate(self.parts):
            if _part_text(existing) == text:
                return index
        self.parts.append(spec)
        return len(self.parts) - 1

    def _noisy_part(self, part: PartSpec) -> NoisyPart:
        stability = self.relation.stability
        if self.keys:  # a histogram: one changed row leaves one bin and enters another
            stability = multiply(constant(2), stability)
        if self.unit is None:
            return NoisyPart(part.aggregate, stability, part.magnitude, edges=part.edges,
                             centred=part.centred)
        l1, l2 = unit_sensitivities(self.unit.bounds, bool(self.keys))
        return NoisyPart(part.aggregate, constant(l1), part.magnitude, row_elastic=stability,
                         l2=l2, edges=part.edges, centred=part.centred)

    # -- choices of the exponential mechanism ----------------------------------------

    def _choice_plan(self, post: PostProcess) -> PrivateAggregate:
        """MIN/MAX/percentiles or mode: every output a choice among one set of candidates."""
        spec, resolved = self.choices[0]
        position = position_of(spec.column, self.offset)
        self._settle_groups(False)
        if self.parts or self.keys:
            raise unsupported(
                f"{spec.aggregate} is answered by the exponential mechanism and cannot be "
                "combined with GROUP BY or with noisy aggregates in one query",
                hint="Ask it in a statement of its own (filter with WHERE for one group).",
                position=position)
        for other, where in self.choices[1:]:
            if other.kind != spec.kind or where.origin != resolved.origin or \
                    where.source.alias != resolved.source.alias:
                raise unsupported(
                    "the choices of one query must all be quantiles (MIN, MAX, median, "
                    "percentiles) of one column, or modes of one column",
                    hint="Ask the others in separate statements.",
                    position=position_of(other.column, self.offset))
        if self.unit is None:
            self._refuse_private_joins(spec.aggregate, position)
        if spec.kind == "mode":
            domain = self._domain(resolved)
            if domain is None:
                raise policy_refusal(
                    f"mode of {spec.column.sql(dialect='postgres')} needs a declared public "
                    "domain: every value of the domain is a candidate, so the answer never "
                    "reveals a value of the data", hint=self._domain_hint(resolved),
                    position=position, reason=self._domain_reason(resolved))
            self._check_cells([domain], spec.column)
            sql, keys, grid = mode_sql(self.tree, self.policy, KeySpec(spec.column, domain),
                                       self._bounding()), 1, None
        else:
            bounds = self._column_bounds(spec.column, spec.aggregate, position)
            if not bounds[0] < bounds[1]:
                raise policy_refusal(f"{spec.aggregate} needs declared bounds with lo < hi",
                                     position=position)
            cells = 2**QUANTILE_GRID_BITS
            grid = quantile_grid(*bounds)
            sql, keys = quantile_sql(self.tree, self.policy, spec.column, bounds, cells,
                                     self._bounding()), 2
        parts = tuple(NoisyPart(s.kind, self._choice_sensitivity(s.kind), level=s.level,
                                grid=grid, row_elastic=self._row_elastic())
                      for s, _ in self.choices)
        return self._plan_of(sql, keys, parts, post, grouped_bounding=spec.kind == "mode")

    def _most_frequent_group(self, post: PostProcess) -> bool:
        """`SELECT k … GROUP BY k ORDER BY count(*) DESC LIMIT 1` over a declared domain:
        the exponential mechanism answers it better than a noisy histogram (issue 4)."""
        if len(self.keys) != 1 or len(self.parts) != 1 or post.having is not None or \
                post.limit != 1 or post.offset or len(post.order) != 1:
            return False
        visible = [o for o in self.outputs if not o.hidden]
        index, descending = post.order[0]
        ordered = self.outputs[index]
        return (descending and len(visible) == 1 and visible[0].kind == "key" and
                ordered.hidden and ordered.aggregate == "count" and
                isinstance(self.parts[0].node.this, exp.Star) and
                self._domain(self.keys[0][0]) is not None and
                (self.unit is not None or not self.relation.stability.depends_on_k))

    def _most_frequent_plan(self) -> PrivateAggregate:
        self._settle_groups(False)
        resolved, column = self.keys[0]
        domain = self._domain(resolved)
        self._check_cells([domain] if domain else [], column)
        key = next(o for o in self.outputs if not o.hidden)
        return self._plan_of(mode_sql(self.tree, self.policy, self._key_spec(0, domain),
                                      self._bounding()), 1,
                             (NoisyPart("mode", self._choice_sensitivity("mode"),
                                        row_elastic=self._row_elastic()),), PostProcess(),
                             grouped_bounding=True,
                             outputs=(OutputColumn(key.name, OutputKind.CHOICE, "mode", (0,)),))

    def _plan_of(self, sql: str, keys: int, parts: tuple[NoisyPart, ...], post: PostProcess,
                 grouping: Grouping | None = None,
                 outputs: tuple[OutputColumn, ...] | None = None,
                 grouped_bounding: bool = False) -> PrivateAggregate:
        bounding = self._bounding()
        return PrivateAggregate(
            sql=sql, keys=keys, parts=parts,
            outputs=tuple(self.outputs) if outputs is None else outputs, grouping=grouping,
            post=post, private_tables=self.relation.private_tables,
            fingerprint_text=_fingerprint(self.tree, self.unit.bounds if self.unit else None),
            tables=tuple(sorted(self.relation.base_tables)),
            postgres_sql=self.tree.find(exp.Median) is None, cells_sql=self.cells_sql,
            unit=self.unit.bounds if self.unit is not None else None,
            row_level_reason=self.row_level_reason,
            windows=0 if bounding is None or not parts else
            window_count(bounding, grouped_bounding))

    def _choice_sensitivity(self, kind: str) -> Elastic:
        """Δu of the exponential mechanism: one row's (FLEX), or one unit's: a unit moves
        a mode candidate's count by at most min(τ, τ_g), a quantile's ranks by τ."""
        if self.unit is None:
            return self.relation.stability
        bounds = self.unit.bounds
        return constant(bounds.group_rows if kind == "mode" else bounds.max_contributions)

    def _row_elastic(self) -> Elastic | None:
        return self.relation.stability if self.unit is not None else None

    def _refuse_private_joins(self, what: str, position: int | None) -> None:
        # The smooth sensitivity calibrates additive noise; for the exponential mechanism a
        # data-dependent Δu would need propose-test-release, which is not implemented.
        if self.relation.stability.depends_on_k:
            raise unsupported(
                f"{what} over a join of private tables is not supported: the exponential "
                "mechanism needs a global sensitivity, and a join of private tables has "
                "only a data-dependent (smooth) one",
                hint="Join with public tables only, or ask counts (a histogram) instead.",
                position=position)

    def _domain_hint(self, resolved: Resolved) -> str:
        if resolved.origin is None:
            return "Use a column of a table, not a computed one."
        table, column = resolved.origin
        return ("Use a column with a declared domain (SHOW dp.policy lists them), or ask the "
                f"data owner for a domain of {table}.{column}.")

    @staticmethod
    def _domain_reason(resolved: Resolved) -> str:
        return missing_setting(*resolved.origin, "domain") if resolved.origin else \
            "a computed column has no domain"

    def _check_cells(self, domains: list[Domain], node: exp.Expression) -> None:
        """Refuse a histogram of more than max_cells; when a public table supplies a domain,
        its size is known only to the database: `cells_sql` has the proxy count it first,
        before any charge (proxy/engine/plan_check.py runs it)."""
        sizes = [domain.size for domain in domains]
        if all(size is not None for size in sizes):
            cells = math.prod(size for size in sizes if size is not None)
            if cells > self.policy.max_cells:
                raise policy_refusal(too_many_cells(cells, self.policy.max_cells),
                                     hint=CELLS_HINT, position=position_of(node, self.offset),
                                     reason="histogram larger than policy setting max_cells")
            return
        if all(size is not None or isinstance(d, ColumnDomain) for d, size in
               zip(domains, sizes, strict=True)):
            factors = [str(size) if size is not None else
                       _distinct_count(cast(ColumnDomain, d), self.policy)
                       for d, size in zip(domains, sizes, strict=True)]
            self.cells_sql = f"SELECT {' * '.join(factors)}"

    # -- which groups are released ---------------------------------------------------

    def _grouping(self) -> tuple[Grouping | None, list[Domain | None]]:
        if not self.keys:
            return None, []
        domains = [self._domain(resolved) for resolved, _ in self.keys]
        declared = [domain for domain in domains if domain is not None]
        if len(declared) == len(domains):
            size: int | None = 1
            for known in declared:
                size = None if size is None or known.size is None else size * known.size
            self._check_cells(declared, self.tree.args["group"])
            return Grouping(len(self.keys), key_selection=False, domain_size=size), domains
        for (resolved, column), domain in zip(self.keys, domains, strict=True):
            origin = resolved.origin
            if origin is None:
                raise unsupported(
                    f"GROUP BY {column.sql(dialect='postgres')}: a computed column has no "
                    "public domain", hint="Group by a column with a declared domain.",
                    position=position_of(column, self.offset))
            if domain is None and not self.policy.column(*origin).key_selection:
                raise policy_refusal(
                    f"GROUP BY {column.sql(dialect='postgres')} would reveal which groups "
                    f"exist: {origin[0]}.{origin[1]} has no declared public domain (policy "
                    "setting domain, or key_selection)",
                    hint="Group by a column with a declared domain (SHOW dp.policy lists them), "
                    f"or ask the data owner for a domain or key selection on {origin[0]}."
                    f"{origin[1]}.", position=position_of(column, self.offset),
                    reason=missing_setting(*origin, "domain") + " (or key_selection)")
        if self.relation.stability.depends_on_k and self.unit is None:
            raise unsupported("key selection over joins of private tables is not supported",
                              hint="Declare a domain for the grouped column.",
                              position=position_of(self.tree.args["group"], self.offset))
        return Grouping(len(self.keys), key_selection=True,
                        selection_part=self._selection_part()), [None] * len(self.keys)

    def _domain(self, resolved: Resolved) -> Domain | None:
        if resolved.origin is None:
            return None
        table, column = resolved.origin
        if not self.policy.is_private(*table.split(".", 1)):
            domain: Domain | None = ColumnDomain(table, column)  # public values are public
        else:
            domain = self.policy.column(table, column).domain
        if isinstance(domain, ColumnDomain):
            # The rewritten SQL joins the key to the DISTINCT domain (at most one match per
            # row): PostgreSQL's plan may show it as a join of these two columns.
            self.analyzer.domain_joins.add((resolved.origin, (domain.table, domain.column)))
        return domain

    def _selection_part(self) -> int:
        """The noisy COUNT(*) that decides which groups pass the threshold."""
        for output in self.outputs:
            if output.aggregate == "count" and isinstance(
                    self.parts[output.parts[0]].node.this, exp.Star):
                return output.parts[0]
        self.outputs.append(self._aggregate(exp.Count(this=exp.Star()), "count", True, None))
        return self.outputs[-1].parts[0]

    # -- HAVING, ORDER BY, LIMIT: on noisy values, in the proxy ----------------------

    def _post_process(self) -> PostProcess:
        having = self.tree.args.get("having")
        order = self.tree.args.get("order")
        return PostProcess(
            having=self._condition(having.this) if having is not None else None,
            order=tuple(self._order_item(item) for item in order.expressions) if order else (),
            limit=self._count_clause("limit"),
            offset=self._count_clause("offset") or 0,
        )

    def _count_clause(self, key: str) -> int | None:
        node = self.tree.args.get(key)
        if node is None:
            return None
        value = node.expression if isinstance(node, (exp.Limit, exp.Offset)) else node
        if not (isinstance(value, exp.Literal) and not value.is_string and
                value.this.isdigit()):
            raise unsupported(f"{key.upper()} takes a constant number here",
                              position=position_of(node, self.offset))
        return int(value.this)

    def _order_item(self, item: exp.Ordered) -> tuple[int, bool]:
        return self._output_index(item.this), bool(item.args.get("desc"))

    def _output_index(self, node: exp.Expression, having: bool = False) -> int:
        """The output a HAVING/ORDER BY operand refers to, adding a hidden one if needed.

        As in PostgreSQL, a bare name in ORDER BY is an output column's name first; HAVING
        sees input columns only.
        """
        node = _unparen(node)
        if isinstance(node, exp.Literal) and not node.is_string:
            index = int(node.this) - 1
            if 0 <= index < len(self.tree.expressions):
                return index
            raise unsupported(f"ORDER BY position {node.this} is not in the select list",
                              position=position_of(node, self.offset))
        if isinstance(node, exp.Column) and not node.table and not having:
            for index, output in enumerate(self.outputs):
                if not output.hidden and output.name.lower() == node.name.lower():
                    return index
        text = node.sql(dialect="postgres", normalize=True)
        for index, projection in enumerate(self.tree.expressions):
            if _unalias(projection).sql(dialect="postgres", normalize=True) == text:
                return index
        hidden = self._output(node, len(self.outputs), hidden=True)
        assert hidden is not None  # only a visible expression is computed
        self.outputs.append(hidden)
        return len(self.outputs) - 1

    def _condition(self, node: exp.Expression) -> Condition | Comparison:
        node = _unparen(node)
        if isinstance(node, (exp.And, exp.Or)):
            return Condition("and" if isinstance(node, exp.And) else "or",
                             (self._condition(node.this), self._condition(node.expression)))
        if isinstance(node, exp.Not):
            return Condition("not", (self._condition(node.this),))
        op = _COMPARISONS.get(type(node))
        if op is None:
            raise unsupported("HAVING supports comparisons of aggregates with constants, "
                              "joined by AND, OR and NOT",
                              position=position_of(node, self.offset))
        left, left_is_column = self._operand(node.this)
        right, right_is_column = self._operand(node.expression)
        return Comparison(op, left, right, left_is_column, right_is_column)

    def _operand(self, node: exp.Expression) -> tuple[int | float | str, bool]:
        node = _unparen(node)
        if isinstance(node, exp.Literal):
            return (node.this, False) if node.is_string else (float(node.this), False)
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
            return -float(node.this.this), False
        return self._output_index(node, having=True), True


def _fingerprint(tree: exp.Expression, unit: UnitBounds | None) -> str:
    """The normalized statement; in unit mode with its bounds, since another τ or κ
    makes another question (SET dp.max_contributions)."""
    text = tree.sql(dialect="postgres", normalize=True)
    if unit is None:
        return text
    return (f"{text} /* unit {unit.max_contributions} {unit.max_groups} "
            f"{unit.max_group_contributions} */")


def _distinct_as_group_by(tree: exp.Select) -> None:
    """SELECT DISTINCT a, b without aggregates is GROUP BY a, b, as PostgreSQL computes it
    (the keys of declared domains, then, cost nothing)."""
    distinct = tree.args.get("distinct")
    if distinct is None or distinct.args.get("on") or tree.args.get("group") or \
            any(p.find(exp.AggFunc) for p in tree.expressions):
        return
    tree.set("distinct", None)
    tree.set("group", exp.Group(expressions=[
        exp.Literal.number(i + 1) for i in range(len(tree.expressions))]))


_VARIANCES = (exp.Variance, exp.VariancePop, exp.Stddev, exp.StddevSamp, exp.StddevPop)


def _variance(node: exp.Expression, centre: float) -> exp.Expr:
    """var_samp, var_pop, stddev… of x from released n = count(x), and with d = x − m (m
    the bounds' midpoint) s = sum(d) and q = sum(d·d), post-processing of released values:
    (q − s²/n) / (n − 1) or / n, clamped at 0, NULL for too few rows as in PostgreSQL; the
    square root for a standard deviation. The formula does not depend on m; centred, s
    and q have sensitivities (hi − lo)/2 and ((hi − lo)/2)², not max(|lo|, |hi|) and its
    square."""
    x = node.this
    assert isinstance(node, exp.Func)  # one of _VARIANCES
    if not isinstance(x, exp.Column):
        raise unsupported(f"{node.sql_name()} takes a plain column with declared bounds")
    value = _centred(x, centre)
    n = exp.Count(this=x.copy())
    total = exp.Sum(this=value)
    square = exp.Mul(this=value.copy(), expression=value.copy())
    square.meta[TOTAL] = True  # numeric × numeric of a bounded column cannot fail
    squares = exp.Sum(this=square)
    # typed: PostgreSQL's own division, not a float one sqlglot would emulate.
    spread = exp.func("GREATEST", exp.Sub(this=squares, expression=exp.Div(
        this=exp.Mul(this=total, expression=total.copy()), expression=n.copy(), typed=True)),
        exp.Literal.number(0))
    population = isinstance(node, (exp.VariancePop, exp.StddevPop))
    divisor = n.copy() if population else exp.Sub(this=n.copy(), expression=exp.Literal.number(1))
    variance = exp.Case(ifs=[exp.If(
        this=exp.GT(this=n.copy(), expression=exp.Literal.number(0 if population else 1)),
        true=exp.Div(this=spread, expression=exp.Paren(this=divisor), typed=True))])
    if isinstance(node, (exp.Stddev, exp.StddevSamp, exp.StddevPop)):
        return exp.func("SQRT", variance)
    return variance


def _domain_bounds(domain: Domain | None) -> tuple[float, float] | None:
    """A numeric declared domain bounds its column too (MIN/MAX over it)."""
    if isinstance(domain, RangeDomain) and isinstance(domain.low, int):
        return float(domain.low), float(domain.high)  # type: ignore[arg-type]
    if isinstance(domain, ValuesDomain) and domain.values and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in domain.values):
        numbers = [float(v) for v in domain.values]  # type: ignore[arg-type]
        return min(numbers), max(numbers)
    return None


# Marks the x − m that dpgate writes to centre a sum (_centred).
CENTRED = "dpgate_centred"


def _centred(value: exp.Expression, centre: float) -> exp.Paren:
    """(CAST(value AS numeric) − centre): exact, and clamping it to [lo − m, hi − m] is
    clamping value to [lo, hi], then subtracting m (rewrite.py clamps the argument)."""
    difference = exp.Sub(this=exp.cast(value.copy(), "numeric"),
                         expression=exp.Literal.number(repr(centre)))
    difference.meta[CENTRED] = True
    difference.meta[TOTAL] = True  # numeric − a constant cannot fail
    return exp.Paren(this=difference)


def _centred_value(node: exp.Expression) -> tuple[exp.Expression, float] | None:
    """(value, m) of a (CAST(value AS numeric) − m) that _centred wrote."""
    node = _unparen(node)
    if not (isinstance(node, exp.Sub) and node.meta.get(CENTRED)):
        return None
    cast_value, centre = node.this, node.expression
    assert isinstance(cast_value, exp.Cast) and isinstance(centre, exp.Literal)
    return cast_value.this, float(centre.this)


def _squared_value(node: exp.Expression) -> exp.Expression | None:
    """v in v * v, v a centred value (_centred) or a column (CAST(x AS numeric) * …)."""
    if not isinstance(node, exp.Mul):
        return None
    factors = [_unparen(f) for f in (node.this, node.expression)]
    if all(f.meta.get(CENTRED) for f in factors):
        return factors[0] if factors[0] == factors[1] else None
    factors = [f.this if isinstance(f, exp.Cast) else f for f in factors]
    if all(isinstance(f, exp.Column) for f in factors) and factors[0] == factors[1]:
        return factors[0]
    return None


def _without_filter(node: exp.Expression, position: int | None) -> exp.Expression:
    """agg(x) FILTER (WHERE c) as agg(CASE WHEN c THEN x END), which PostgreSQL computes
    alike: a row the filter leaves out contributes NULL, which the aggregate skips."""
    if not isinstance(node, exp.Filter):
        return node
    aggregate = node.this.copy()
    argument = aggregate.this
    if isinstance(argument, exp.Distinct):
        raise unsupported("an aggregate of DISTINCT values with FILTER is not supported",
                          position=position)
    value = exp.Literal.number(1) if isinstance(argument, exp.Star) else argument
    aggregate.set("this", exp.Case(ifs=[exp.If(this=node.expression.this.copy(),
                                               true=value)]))
    return aggregate


def _number(node: exp.Expression) -> float | None:
    if isinstance(node, exp.Neg):
        inner = _number(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.this)
    return None


def _part_text(part: PartSpec) -> str:
    argument = part.node.this
    centred = "centred " if part.centred else ""
    return f"{part.aggregate}:{centred}{argument.sql(dialect='postgres', normalize=True)}"


def _bounded_expression(argument: exp.Expression) -> bool:
    """A SUM/AVG argument bounded by interval arithmetic (aggregate_args.py): not a plain
    column, nor a CASE of columns and constants, nor the centred values and squares dpgate
    writes itself for averages and variances."""
    return not isinstance(argument, (exp.Column, exp.Star, exp.Distinct)) and \
        _squared_value(argument) is None and _centred_value(argument) is None and \
        not (isinstance(argument, exp.Case) and _plain_case(argument))


def _plain_case(case: exp.Case) -> bool:
    """A CASE whose branches are columns, constants or NULL (bounded as a whole)."""
    branches = [i.args.get("true") for i in case.args.get("ifs", [])] + \
        [case.args.get("default")]
    return all(isinstance(b, (exp.Column, exp.Null)) or _number(b) is not None
               for b in (_unparen(b) for b in branches if b is not None))


def _is_count_star(node: exp.Expression) -> bool:
    return isinstance(node, exp.Count) and isinstance(node.this, exp.Star)


def _unalias(node: exp.Expression) -> exp.Expression:
    return node.this if isinstance(node, exp.Alias) else node


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _same_name(a: exp.Column, b: exp.Column) -> bool:
    return a.name.lower() == b.name.lower()


def _name_of(projection: exp.Expression) -> str:
    if isinstance(projection, exp.Alias):
        return projection.alias
    return _default_name(projection)


def _default_name(node: exp.Expression) -> str:
    """The column name PostgreSQL gives an unaliased output."""
    if isinstance(node, exp.WithinGroup):  # mode() WITHIN GROUP (…) is named "mode"
        node = node.this
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return "?column?"


CELLS_HINT = ("Group by fewer columns, or keep fewer keys with WHERE (IN (…), BETWEEN); the "
              "limit is the data owner's (max_cells).")


def too_many_cells(cells: int, limit: int) -> str:
    return f"the histogram would have {cells} cells, more than the {limit} the policy allows"


def _distinct_count(domain: ColumnDomain, policy: Policy) -> str:
    """How many keys a public column supplies, counted up to one past max_cells."""
    schema, table = (quote_identifier(p) for p in domain.table.split(".", 1))
    column = quote_identifier(domain.column)
    return (f"(SELECT count(*) FROM (SELECT DISTINCT {column} FROM {schema}.{table} "
            f"WHERE {column} IS NOT NULL LIMIT {policy.max_cells + 1}) AS d)")


def unit_sensitivities(bounds: UnitBounds, histogram: bool) -> tuple[int, float]:
    """L1 and L2 sensitivity of one unit's rows, in units of one row's value.

    Without GROUP BY a unit adds at most τ rows: L1 = L2 = τ. In a histogram it adds at most
    τ_g' = min(τ_g, τ) rows to each of at most κ groups, τ in all: L1 = min(τ, κ·τ_g'),
    L2 = min(√κ·τ_g', √(τ·τ_g')) (Σx² ≤ max x · Σx).
    """
    tau = bounds.max_contributions
    if not histogram:
        return tau, float(tau)
    per_group = bounds.group_rows
    l1 = min(tau, bounds.max_groups * per_group)
    return l1, min(math.sqrt(bounds.max_groups) * per_group, math.sqrt(tau * per_group))
