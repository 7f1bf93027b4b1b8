"""Plans for aggregates over private tables: the statement prepared, its constants and
relations (FROM, joins, WHERE: analysis/relations.py), then pipeline.PASSES, then the
last nets over what runs on private rows and what PostgreSQL's plan may show.

HAVING, ORDER BY and LIMIT are applied by the proxy after noise; a query over one
aggregate subquery runs over the aggregate's released rows (release/outer.py).
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from ..analysis.constants import as_expressions, extract_constants
from ..analysis.relations import Analyzer
from ..analysis.semi_joins import rewrite_semi_joins
from ..analysis.totality import refuse_unsafe_nodes
from ..errors import unsupported
from ..plan import Grouping, Outer, PrivateAggregate
from ..policy.model import Policy
from ..release.outer import split_outer
from ..sensitivity.metrics import Metrics
from ..sql.positions import position_of
from .keys import mark_buckets
from .pipeline import plan_statement
from .record import fingerprint
from .scope import Scope


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
        if plan.grouping is None or plan.grouping.occupied_by is not None or \
                not _aggregates_groups(tree, plan.grouping):
            if plan.outer is not None or not plan.postgres_sql:
                raise unsupported("a query over an aggregate subquery is answered for one "
                                  "level of standard SQL aggregates",
                                  position=position_of(tree, offset))
            return replace(plan, outer=Outer(outer, alias, inner.sql(dialect="postgres")),
                           fingerprint_text=fingerprint(tree, plan.unit))
    constants = extract_constants(tree, policy, offset)
    analyzer = Analyzer(policy, metrics or Metrics(), offset)
    relation, _ = analyzer.select_relation(tree, {})
    planned = plan_statement(Scope(analyzer, tree, offset, relation, constants, occupied))
    assert planned.plan is not None
    plan = planned.plan
    # The last net, after the analysis's own messages, over what runs on private rows;
    # computed group keys run on the public domain only (buckets.py).
    checked = planned.probe or tree
    mark_buckets(checked, planned.keys.expressions)
    refuse_unsafe_nodes(checked, offset)
    constants += planned.checks
    # The probe is described before the constants are computed: their placeholders would
    # be a syntax error there (issue 23's XX000).
    computed = None if plan.computed is None else \
        replace(plan.computed, probe_sql=as_expressions(plan.computed.probe_sql, constants))
    return replace(plan, constants=constants, computed=computed, checks=replace(
        plan.checks, scans=tuple(sorted(analyzer.findings.scans.elements())),
        join_keys=analyzer.findings.join_keys()))


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
