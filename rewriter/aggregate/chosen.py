"""Plans answered by the exponential mechanism: MIN, MAX, percentiles and mode (every
output a choice among one set of candidates), and the most frequent group of a
histogram (`GROUP BY k ORDER BY count(*) DESC LIMIT 1`, issue 4)."""

from __future__ import annotations

from sqlglot import exp

from mechanisms.exponential import QUANTILE_GRID_BITS, quantile_grid

from ..errors import policy_refusal, unsupported
from ..plan import NoisyPart, OutputColumn, OutputKind, PostProcess, PrivateAggregate
from .groups import cells_sql
from .keys import KeyPlan
from .record import plan_record
from .released import Released
from .rewrite import KeySpec, mode_sql, quantile_sql
from .scope import domain_hint, domain_reason
from .unit_mode import UnitMode


def choice_plan(released: Released, mode: UnitMode, post: PostProcess) -> PrivateAggregate:
    """MIN/MAX/percentiles or mode: every output a choice among one set of candidates."""
    scope = released.scope
    spec, resolved = released.choices[0]
    position = scope.position(spec.column)
    mode = mode.settled(False)
    if released.parts or len(released.keys):
        written = f"{spec.name}({spec.column.sql(dialect='postgres')})"
        raise unsupported(
            f"{written} is chosen by the exponential mechanism (a value picked by its "
            "rank, not a number plus noise) and cannot share a statement with "
            f"{'GROUP BY' if len(released.keys) else 'count, sum or avg'}",
            hint=f"Ask SELECT {written} FROM … in a statement of its own (filter with "
            "WHERE for one group), and the other aggregates in another.",
            position=position)
    for other, where in released.choices[1:]:
        if other.kind != spec.kind or where.origin != resolved.origin or \
                where.source.alias != resolved.source.alias:
            raise unsupported(
                "the choices of one query must all be quantiles (MIN, MAX, median, "
                "percentiles) of one column, or modes of one column",
                hint="Ask the others in separate statements.",
                position=scope.position(other.column))
    if mode.unit is None and scope.relation.stability.depends_on_k:
        # The smooth sensitivity calibrates additive noise; for the exponential mechanism
        # a data-dependent Δu would need propose-test-release, which is not implemented.
        raise unsupported(
            f"{spec.aggregate} over a join of private tables is not supported: the "
            "exponential mechanism needs a global sensitivity, and a join of private "
            "tables has only a data-dependent (smooth) one",
            hint="Join with public tables only, or ask counts (a histogram) instead.",
            position=position)
    cells = None
    if spec.kind == "mode":
        domain = scope.domain(resolved)
        if domain is None:
            raise policy_refusal(
                f"mode of {spec.column.sql(dialect='postgres')} needs a declared public "
                "domain: every value of the domain is a candidate, so the answer never "
                "reveals a value of the data", hint=domain_hint(resolved),
                position=position, reason=domain_reason(resolved))
        cells = cells_sql(scope, [domain], spec.column)
        sql, keys, grid = mode_sql(scope.tree, scope.policy, KeySpec(spec.column, domain),
                                   mode.bounding()), 1, None
    else:
        bounds = released.bounds.of_column(spec.column, spec.aggregate, position)
        if not bounds[0] < bounds[1]:
            raise policy_refusal(f"{spec.aggregate} needs declared bounds with lo < hi",
                                 position=position)
        grid = quantile_grid(*bounds)
        sql, keys = quantile_sql(scope.tree, scope.policy, spec.column, bounds,
                                 2**QUANTILE_GRID_BITS, mode.bounding()), 2
    parts = tuple(NoisyPart(s.kind, mode.choice_sensitivity(s.kind, scope.relation),
                            level=s.level, grid=grid, row_elastic=mode.row_elastic(scope.relation))
                  for s, _ in released.choices)
    return plan_record(scope, mode, sql, keys, parts, post, tuple(released.outputs), cells,
                       grouped_bounding=spec.kind == "mode")


def most_frequent_group(released: Released, mode: UnitMode, post: PostProcess) -> bool:
    """`SELECT k … GROUP BY k ORDER BY count(*) DESC LIMIT 1` over a declared domain:
    the exponential mechanism answers it better than a noisy histogram (issue 4)."""
    keys, parts, outputs = released.keys, released.parts, released.outputs
    if len(keys) != 1 or len(parts) != 1 or post.having is not None or \
            post.limit != 1 or post.offset or len(post.order) != 1:
        return False
    visible = [o for o in outputs if not o.hidden]
    index, descending = post.order[0]
    ordered = outputs[index]
    return (descending and len(visible) == 1 and visible[0].kind == "key" and
            ordered.hidden and ordered.aggregate == "count" and
            isinstance(parts[0].node.this, exp.Star) and
            released.scope.domain(keys.keys[0][0]) is not None and
            (mode.unit is not None or not released.scope.relation.stability.depends_on_k))


def most_frequent_plan(released: Released, mode: UnitMode
                       ) -> tuple[PrivateAggregate, KeyPlan]:
    """The plan, and its key as the rewrite took it (a computed key's check)."""
    scope = released.scope
    mode = mode.settled(False)
    resolved, column = released.keys.keys[0]
    domain = scope.domain(resolved)
    cells = cells_sql(scope, [domain] if domain else [], column)
    key = next(o for o in released.outputs if not o.hidden)
    key_plan = released.keys.plan(0, domain)
    part = NoisyPart("mode", mode.choice_sensitivity("mode", scope.relation),
                     row_elastic=mode.row_elastic(scope.relation))
    plan = plan_record(scope, mode, mode_sql(scope.tree, scope.policy, key_plan.spec,
                                             mode.bounding()), 1, (part,), PostProcess(),
                       (OutputColumn(key.name, OutputKind.CHOICE, "mode", (0,)),), cells,
                       grouped_bounding=True)
    return plan, key_plan
