"""The passes that plan a private aggregate, in order: PASSES, one visible list (as
sqlglot's optimizer RULES). Each takes the Draft and returns it with its own part; the
pass that answers the statement marks the draft final, and the passes after it do not
run (a choice of the exponential mechanism, the most frequent group, or a histogram).

Every pass is a few lines here; its work is in the module named beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from sqlglot import exp

from ..analysis.constants import Constant
from ..errors import unsupported
from ..plan import Computed, Grouping, OutputColumn, OutputKind, PostProcess, PrivateAggregate
from ..policy.model import Domain
from ..release.computed import probe
from ..sql.nodes import name_of, unalias
from .bounds import ValueBounds
from .chosen import choice_plan, most_frequent_group, most_frequent_plan
from .computed_sql import clauses, variance_range
from .groups import grouping, occupied_by
from .keys import GroupKeys, KeyPlan, group_keys
from .record import plan_record
from .released import Released
from .rewrite import rewrite
from .scope import Scope
from .unit_mode import UnitMode, chosen_count, unit_mode
from .weighted import weighted_plan


@dataclass(frozen=True)
class Draft:
    """A plan as the passes build it. `released` accumulates the outputs and noisy parts
    (HAVING, ORDER BY and key selection add hidden ones while their passes run)."""
    scope: Scope
    mode: UnitMode
    keys: GroupKeys
    released: Released
    computed: bool = False  # an output is an expression over released values
    post: PostProcess = PostProcess()
    computed_post: str | None = None  # the SQL over released values that answers
    grouping: Grouping | None = None
    domains: tuple[Domain | None, ...] = ()
    cells_sql: str | None = None
    key_plans: tuple[KeyPlan, ...] = ()
    plan: PrivateAggregate | None = None
    probe: exp.Select | None = None  # the statement over released values, described
    weighted: bool = False  # bounded by weights per unit (weighted.py), not a sort
    final: bool = False

    @property
    def checks(self) -> tuple[Constant, ...]:
        """The constants that compute computed keys' mappings before the query."""
        return tuple(key.check for key in self.key_plans if key.check is not None)


def plan_statement(scope: Scope) -> Draft:
    keys = GroupKeys(scope, (), ())
    draft = Draft(scope, UnitMode(), keys, Released(scope, keys, ValueBounds(scope), False))
    for step in PASSES:
        draft = step(draft)
        if draft.final:
            break
    assert draft.final and draft.plan is not None  # _over_released always answers
    return draft


def _unit_mode(draft: Draft) -> Draft:
    return replace(draft, mode=unit_mode(draft.scope))


def _keys(draft: Draft) -> Draft:
    return replace(draft, keys=group_keys(draft.scope))


def _released(draft: Draft) -> Draft:
    scope = draft.scope
    released = Released(scope, draft.keys, ValueBounds(scope), draft.mode.unit is not None)
    computed = False
    for index, projection in enumerate(scope.tree.expressions):
        output = released.output(projection, index)
        if output is None:
            computed = True
            output = OutputColumn(name_of(projection), OutputKind.COMPUTED, None, ())
        released.outputs.append(output)
    return replace(draft, released=released, computed=computed)


def _clauses(draft: Draft) -> Draft:
    post, computed_post = clauses(draft.released, draft.computed)
    return replace(draft, post=post, computed_post=computed_post)


def _metrics_known(draft: Draft) -> Draft:
    draft.scope.findings.refuse_missing()
    return draft


def _choices(draft: Draft) -> Draft:
    if not draft.released.choices:
        return draft
    if draft.computed_post:
        raise unsupported("MIN, MAX, percentiles and mode cannot be combined with "
                          "expressions over released values",
                          hint="Ask them in a statement of their own.")
    return replace(draft, plan=choice_plan(draft.released, draft.mode, draft.post),
                   final=True)


def _most_frequent(draft: Draft) -> Draft:
    if not most_frequent_group(draft.released, draft.mode, draft.post):
        return draft
    plan, key = most_frequent_plan(draft.released, draft.mode)
    return replace(draft, plan=plan, key_plans=(key,), final=True)


def _presence(draft: Draft) -> Draft:
    draft.released.presence()
    return draft


def _groups(draft: Draft) -> Draft:
    groups, domains, cells = grouping(draft.released, draft.mode.unit is not None)
    return replace(draft, grouping=groups, domains=tuple(domains), cells_sql=cells,
                   mode=draft.mode.settled(groups is not None and groups.key_selection))


def _occupied(draft: Draft) -> Draft:
    if draft.grouping is None:
        return draft
    return replace(draft, grouping=replace(draft.grouping, occupied_by=occupied_by(
        draft.released, draft.grouping, draft.scope.occupied)))


def _histogram(draft: Draft) -> Draft:
    scope, mode, keys, released = draft.scope, draft.mode, draft.keys, draft.released
    histogram = len(keys) > 0
    parts = tuple(mode.noisy_part(part, scope.relation, histogram) for part in released.parts)
    key_plans = tuple(keys.plan(index, domain) for index, domain in enumerate(draft.domains))
    groups = draft.grouping if draft.grouping is None else replace(
        draft.grouping, domain_unnarrowed=any(key.unnarrowed for key in key_plans))
    sql = rewrite(scope.tree, scope.policy, [key.spec for key in key_plans], released.parts,
                  groups, mode.bounding())
    plan = plan_record(scope, mode, sql, len(keys), parts, draft.post,
                       tuple(released.outputs), draft.cells_sql, groups,
                       grouped_bounding=histogram)
    return replace(draft, grouping=groups, plan=plan, key_plans=key_plans)


def _weighted(draft: Draft) -> Draft:
    """SUM, AVG and the variance family in unit mode, bounded by weights per unit, or the
    draft as it is for the shapes that keep the sort."""
    unit, declared, bounding = draft.mode.unit, draft.scope.policy.unit, draft.mode.bounding()
    if unit is None or declared is None or unit.columns is None or bounding is None:
        return draft
    assert draft.plan is not None
    weighted = weighted_plan(draft.plan, draft.scope.tree, draft.scope.policy,
                             [key.spec for key in draft.key_plans], draft.released.parts,
                             bounding, unit.bounds, declared)
    if weighted is None:
        return draft
    draft.scope.findings.group_columns |= unit.columns  # the units' sizes group on them
    return replace(draft, plan=weighted, weighted=True)


def _chosen_count(draft: Draft) -> Draft:
    if draft.weighted:
        return draft
    assert draft.plan is not None
    plan = chosen_count(draft.scope, draft.mode, draft.released.parts, draft.plan,
                        [key.spec for key in draft.key_plans])
    # A count inside the statement's expressions (count(*) * 2) still needs them.
    return replace(draft, plan=plan, final=draft.computed_post is None)


def _over_released(draft: Draft) -> Draft:
    keys, released, tree = draft.keys, draft.released, draft.scope.tree
    assert draft.plan is not None
    over = probe(tree, [released.source(i, o) for i, o in enumerate(released.outputs)],
                 [e or column for (_, column), e in zip(keys.keys, keys.expressions,
                                                        strict=True)])
    ranges = tuple(variance_range(unalias(p), released.bounds) for p in tree.expressions) \
        if draft.computed_post else ()
    computed = Computed(over.sql(dialect="postgres"), draft.computed_post, ranges)
    return replace(draft, plan=replace(draft.plan, computed=computed),
                   probe=over, final=True)


PASSES: tuple[Callable[[Draft], Draft], ...] = (
    _unit_mode,  # unit_mode.py: whose rows are bounded, a unit's or one row's (FLEX)
    _keys,  # keys.py: the GROUP BY keys, resolved
    _released,  # released.py: the released columns and the noisy parts they share
    _clauses,  # post.py, computed_sql.py: HAVING, ORDER BY, LIMIT; or SQL over released
    _metrics_known,  # analysis/findings.py: every join column's max frequency measured
    _choices,  # chosen.py: MIN, MAX, percentiles, mode (exponential mechanism): final
    _most_frequent,  # chosen.py: GROUP BY k ORDER BY count(*) DESC LIMIT 1: final
    _presence,  # released.py: the count whose released value makes a SUM NULL
    _groups,  # groups.py: declared domains (at most max_cells) or key selection
    _occupied,  # groups.py: the COUNT(*) whose released value ≤ 0 drops its key
    _histogram,  # unit_mode.py, keys.py, rewrite.py, record.py: parts, SQL, the record
    _weighted,  # weighted.py: SUM/AVG in unit mode, bounded by weights per unit
    _chosen_count,  # unit_mode.py: a count bounded by aggregation, τ chosen: final
    _over_released,  # release/computed.py: the statement over released values: final
)
