"""Plans for aggregates over private tables: the steps, in order.

The relations (FROM, joins, WHERE) are analysed first (analysis/relations.py), then, each
step a module of this package: the privacy unit (unit_mode), the GROUP BY keys (keys),
the released columns and their noisy parts (released, with bounds), HAVING, ORDER BY and
LIMIT (post, or computed_sql over released values), which groups are released (groups),
plans of the exponential mechanism (chosen), the SQL the backend runs (rewrite) and the
record (record). HAVING, ORDER BY and LIMIT are applied by the proxy after noise.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from ..analysis.constants import Constant, as_expressions, extract_constants
from ..analysis.relations import Analyzer
from ..analysis.semi_joins import rewrite_semi_joins
from ..analysis.totality import refuse_unsafe_nodes
from ..errors import unsupported
from ..plan import Grouping, OutputColumn, OutputKind, PrivateAggregate
from ..policy.model import Policy
from ..release.computed import probe
from ..release.outer import split_outer
from ..sensitivity.metrics import Metrics
from ..sql.nodes import name_of
from ..sql.positions import position_of
from .bounds import ValueBounds
from .chosen import choice_plan, most_frequent_group, most_frequent_plan
from .computed_sql import clauses
from .groups import grouping
from .keys import group_keys, mark_buckets
from .record import fingerprint, plan_record
from .released import Released
from .rewrite import rewrite
from .scope import Scope
from .unit_mode import chosen_count, unit_mode


def plan_private_aggregate(tree: exp.Expression, policy: Policy, offset: int,
                           metrics: Metrics | None = None, occupied: bool = False
                           ) -> PrivateAggregate:
    """Validate a query that reads private tables and rewrite it for the backend.

    `occupied`: a histogram over declared domains releases only the keys whose noisy
    count is above 0 (for a query over its groups). Raises Refusal for what is not
    answered, MissingMetrics when a join column has not been measured yet.
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
    rewrite_semi_joins(tree, policy, offset)
    split = split_outer(tree)
    if split is not None:
        inner, outer, alias = split
        pristine = inner.copy()  # planning writes placeholders into the tree it reads
        plan = plan_private_aggregate(inner, policy, offset, metrics)
        # PostgreSQL aggregates the groups that exist; the inner answer holds every key of
        # the domain (empty ones too) or those above the key-selection threshold, so
        # count(*) over it would silently differ (1,000 or 0 where PostgreSQL says 4).
        # Such a query is analysed below instead, as an aggregate over a grouped derived
        # table (FLEX: stability doubled), which computes what PostgreSQL does, with noise.
        # In unit mode, whose derived tables must pass one unit per row, the outer query
        # runs instead over the domain's keys whose released count is above 0 (Metabase's
        # count of a question's groups; docs/privacy-unit.md).
        if plan.unit is not None and plan.grouping is not None and \
                not plan.grouping.key_selection and _aggregates_groups(tree, plan.grouping):
            inner = pristine
            plan = plan_private_aggregate(inner, policy, offset, metrics, occupied=True)
        if plan.occupied_by is not None or plan.grouping is None or \
                not _aggregates_groups(tree, plan.grouping):
            if plan.outer_sql is not None or not plan.postgres_sql:
                raise unsupported("a query over an aggregate subquery is answered for one "
                                  "level of standard SQL aggregates",
                                  position=position_of(tree, offset))
            return replace(plan, outer_sql=outer, outer_alias=alias,
                           inner_sql=inner.sql(dialect="postgres"),
                           fingerprint_text=fingerprint(tree, plan.unit))
    constants = extract_constants(tree, policy, offset)
    analyzer = Analyzer(policy, metrics or Metrics(), offset)
    relation, _ = analyzer.select_relation(tree, {})
    planned = _plan(Scope(analyzer, tree, offset, relation), constants, occupied)
    plan = planned.plan
    # The last net, after the analysis's own messages, over what runs on private rows;
    # computed group keys run on the public domain only (buckets.py).
    checked = planned.probe or tree
    mark_buckets(checked, planned.computed_keys)
    refuse_unsafe_nodes(checked, offset)
    constants += planned.bucket_checks
    # The probe is described before the constants are computed: their placeholders would
    # be a syntax error there (issue 23's XX000).
    probe_sql = None if plan.probe_sql is None else as_expressions(plan.probe_sql, constants)
    return replace(plan, constants=constants, probe_sql=probe_sql,
                   scans=tuple(sorted(analyzer.findings.scans.elements())),
                   join_keys=analyzer.findings.join_keys())


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


@dataclass(frozen=True)
class _Planned:
    """A plan, and what the last checks read of it: the statement over released values
    to describe (`probe`), the computed keys to mark and their mappings' constants."""
    plan: PrivateAggregate
    probe: exp.Select | None = None
    computed_keys: tuple[exp.Expression | None, ...] = ()
    bucket_checks: tuple[Constant, ...] = ()


def _plan(scope: Scope, constants: tuple[Constant, ...], occupied: bool) -> _Planned:
    """The steps in order; `occupied` as plan_private_aggregate's."""
    tree = scope.tree
    mode = unit_mode(scope)
    keys = group_keys(scope, constants)
    released = Released(scope, keys, ValueBounds(scope), mode.unit is not None)
    computed = []
    for index, projection in enumerate(tree.expressions):
        output = released.output(projection, index)
        if output is None:
            computed.append(index)
            output = OutputColumn(name_of(projection), OutputKind.COMPUTED, None, ())
        released.outputs.append(output)
    post, computed_post = clauses(released, bool(computed))
    scope.findings.refuse_missing()
    if released.choices:
        if computed_post:
            raise unsupported("MIN, MAX, percentiles and mode cannot be combined with "
                              "expressions over released values",
                              hint="Ask them in a statement of their own.")
        return _Planned(choice_plan(released, mode, post), None, keys.expressions)
    if most_frequent_group(released, mode, post):
        plan, key = most_frequent_plan(released, mode)
        return _Planned(plan, None, keys.expressions, (key.check,) if key.check else ())
    groups, domains, cells = grouping(released, mode.unit is not None)
    mode = mode.settled(groups is not None and groups.key_selection)
    occupied_by = _occupied_by(released, groups, occupied)
    histogram = len(keys) > 0
    noisy_parts = tuple(mode.noisy_part(part, scope.relation, histogram)
                        for part in released.parts)
    key_plans = [keys.plan(index, domain) for index, domain in enumerate(domains)]
    key_specs = [key.spec for key in key_plans]
    checks = tuple(key.check for key in key_plans if key.check is not None)
    plan = plan_record(scope, mode, rewrite(tree, scope.policy, key_specs, released.parts,
                                            groups, mode.bounding()),
                       len(keys), noisy_parts, post, tuple(released.outputs), cells, groups,
                       grouped_bounding=histogram)
    plan = replace(plan, occupied_by=occupied_by,
                   domain_unnarrowed=any(key.unnarrowed for key in key_plans))
    if computed_post is None:
        return _Planned(chosen_count(scope, mode, released.parts, plan, key_specs), None,
                        keys.expressions, checks)
    over_released = probe(tree, [released.source(i, o) for i, o in enumerate(released.outputs)],
                          [e or column for (_, column), e in
                           zip(keys.keys, keys.expressions, strict=True)])
    return _Planned(replace(plan, post_sql=computed_post,
                            probe_sql=over_released.sql(dialect="postgres")),
                    over_released, keys.expressions, checks)


def _occupied_by(released: Released, groups: Grouping | None, always: bool) -> int | None:
    """Over a whole declared domain, the output holding COUNT(*) when the statement
    orders or limits its groups (or `always`): PostgreSQL ranks the groups that exist,
    so a group whose released count is ≤ 0 is dropped first (post-processing of
    released values only). Under LIMIT or OFFSET (which keys come back depends on it)
    a statement that selects no COUNT(*) gets a hidden one, which takes its share of
    ε. Without ORDER BY or LIMIT the whole domain is listed, as documented."""
    if groups is None or groups.key_selection:
        return None
    tree = released.scope.tree
    limited = any(tree.args.get(clause) is not None for clause in ("limit", "offset"))
    counted = next((index for index, output in enumerate(released.outputs)
                    if output.aggregate == "count" and
                    _is_count_star(released.parts[output.parts[0]].node)), None)
    if counted is not None and (always or limited or tree.args.get("order")):
        return counted
    return released.hidden_aggregate(exp.Count(this=exp.Star())) \
        if always or limited else None


def _is_count_star(node: exp.Expression) -> bool:
    return isinstance(node, exp.Count) and isinstance(node.this, exp.Star)


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
