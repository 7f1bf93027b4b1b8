"""`dpgate explain`: what the analysis decides for one statement, as plain JSON data."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, assert_never

from mechanisms.accuracy import quantile_rank_bound
from mechanisms.contribution_bound import cell_resolution
from mechanisms.names import Mechanism

from ..aggregate.private import plan_private_aggregate
from ..analysis.classify import classify, parse_query
from ..errors import Refusal
from ..plan import (
    ColumnProbe,
    Composite,
    EmptyStatement,
    NoisyPart,
    OutputColumn,
    OutputKind,
    PrivateAggregate,
    Relay,
    SetDpSetting,
    ShowDpSetting,
)
from ..policy.model import Policy
from ..sensitivity.calibrate import (
    SUM_COUNT_SHARE,
    Calibration,
    PartCalibration,
    branch_budgets,
    calibrate,
    choice_epsilon,
    composed,
)
from ..sensitivity.metrics import Metrics, MissingMetrics
from ..sqlstate import SqlState
from .error_bars import noise_bound
from .propagate import Input, NoInterval, inputs_of, interval_of, projections
from .unit_report import mode_report

OBJECT_NOT_IN_PREREQUISITE_STATE = SqlState.OBJECT_NOT_IN_PREREQUISITE_STATE


# The confidence of the error bars explain reports (the proxy's privacy.confidence).
CONFIDENCE = 0.95


def explain(sql: str, policy: Policy, metrics: Metrics, epsilon: float, delta: float,
            k: int = 0, confidence: float = CONFIDENCE,
            sum_count_share: float = SUM_COUNT_SHARE) -> dict[str, Any]:
    """The analysis of one statement: sensitivities and scales, or why it is refused."""
    try:
        statements = classify(sql, policy, metrics)
        if len(statements) != 1:
            raise Refusal(SqlState.FEATURE_NOT_SUPPORTED, "explain takes one statement")
        match plan := statements[0].plan:
            case Refusal():
                raise plan
            case Relay():
                public = _public_aggregate(plan.text, policy, metrics)
                if public is None:
                    return {"supported": True, "kind": "relay", "rewritten_sql": sql.strip()}
                plan = public
            case SetDpSetting() | ShowDpSetting() | EmptyStatement():
                return {"supported": True, "kind": "session"}
            case ColumnProbe():
                return {"supported": True, "kind": "column probe", "rows": 0,
                        "charged": False}
            case Composite():
                return _composite_report(plan, epsilon, delta, k, 1 - confidence,
                                         sum_count_share)
            case PrivateAggregate():
                pass
            case _:
                assert_never(plan)
        calibration = calibrate(plan, epsilon, delta, k, sum_count_share=sum_count_share)
        return _report(plan, _with_cell_rounding(plan, calibration), 1 - confidence)
    except Refusal as refusal:
        return {"supported": False, "sqlstate": refusal.sqlstate, "error": refusal.message,
                "hint": refusal.hint, "position": refusal.position}
    except MissingMetrics as missing:
        return {"supported": False, "sqlstate": OBJECT_NOT_IN_PREREQUISITE_STATE,
                "error": str(missing), "hint": None, "position": None,
                "missing_metrics": [list(column) for column in missing.columns]}


def _public_aggregate(text: str, policy: Policy, metrics: Metrics) -> PrivateAggregate | None:
    """A query over public tables is relayed; as an aggregate its sensitivity is 0."""
    try:
        return plan_private_aggregate(parse_query(text), policy, 0, metrics)
    except (Refusal, MissingMetrics):
        return None


def _cell_rounding(plan: PrivateAggregate, calibration: Calibration) -> float:
    """Rows a histogram with τ chosen per query adds to its L1 for releasing its
    fractional cells on a grid of 1/Q rows: cells/Q (proxy/engine/chosen_bound.py). A
    domain from a public table has its size only at release: there 0 (at most 1/64)."""
    unit, grouping = plan.unit, plan.grouping
    cells = grouping.domain_size if grouping is not None else None
    if unit is None or unit.counts_cap is None or cells is None or \
            calibration.mechanism == Mechanism.GAUSSIAN:
        return 0.0
    return cells / cell_resolution(cells)


def _with_cell_rounding(plan: PrivateAggregate, calibration: Calibration) -> Calibration:
    """The calibration whose count scale includes the cells' rounding, as released."""
    rounding = _cell_rounding(plan, calibration)
    if not rounding:
        return calibration
    return replace(calibration, parts=tuple(
        replace(part, scale=part.scale + rounding / part.epsilon,
                shift_scale=part.shift_scale + rounding / part.epsilon)
        for part in calibration.parts))


def _report(plan: PrivateAggregate, calibration: Calibration, beta: float
            ) -> dict[str, Any]:
    columns = []
    for output in plan.visible:
        if output.kind == "key":
            columns.append({"name": output.name, "kind": "key", "aggregate": None,
                            "elastic_sensitivity": 0.0})
            continue
        if output.kind == "computed":  # post-processing of the noisy outputs: free
            columns.append({"name": output.name, "kind": "computed", "aggregate": None,
                            "elastic_sensitivity": 0.0,
                            **_computed_error(plan, calibration, len(columns), beta)})
            continue
        parts = [calibration.parts[i] for i in output.parts]
        first = parts[0]
        if output.kind == "choice":
            columns.append(_choice_report(output, plan.parts[output.parts[0]], first, beta))
            continue
        columns.append({
            "name": output.name, "kind": "noisy", "aggregate": output.aggregate,
            "elastic_sensitivity": first.elastic_sensitivity,
            "smooth_sensitivity": first.smooth_sensitivity, "k_star": first.k_star,
            "noise_scale": first.scale, "flex_noise_scale": first.flex_scale,
            **({"unit_sensitivity": first.elastic_sensitivity} if plan.unit else {}),
            "epsilon": sum(p.epsilon for p in parts),
            **({"count_noise_scale": parts[1].scale} if len(parts) > 1 else {}),
            **_error_bar(plan, calibration, output, beta),
            **_presence(plan, calibration, output),
        })
    report: dict[str, Any] = {
        "supported": True, "epsilon": calibration.epsilon, "delta": calibration.delta,
        "pure": calibration.pure, **mode_report(plan), "columns": columns,
        "rewritten_sql": plan.sql,
    }
    if plan.grouping is not None:
        report["histogram"] = (
            {"key_selection": True, "threshold": calibration.threshold}
            if plan.grouping.key_selection else
            {"key_selection": False, "domain_size": plan.grouping.domain_size})
    hidden = [o.name for o in plan.outputs if o.hidden]
    if hidden:
        report["hidden_aggregates"] = hidden  # noised for HAVING / ORDER BY, not sent
    return report


def _composite_report(plan: Composite, epsilon: float, delta: float, k: int, beta: float,
                      sum_count_share: float) -> dict[str, Any]:
    """Several releases under one charge: each branch's report at its share of (ε, δ),
    and `combine`, the SQL run over their released values (free)."""
    plans = tuple(branch.plan for branch in plan.branches)
    calibrations = tuple(
        calibrate(branch, share, part_delta, k, sum_count_share=sum_count_share)
        for branch, (share, part_delta) in zip(plans, branch_budgets(plans, epsilon, delta),
                                               strict=True))
    total = composed(calibrations, epsilon)
    return {"supported": True, "kind": "composite", "epsilon": total.epsilon,
            "delta": total.delta, "pure": total.pure,
            "branches": [{"statement": branch.text,
                          **_report(branch.plan, _with_cell_rounding(branch.plan, calibration),
                                    beta)}
                         for branch, calibration in zip(plan.branches, calibrations,
                                                        strict=True)],
            "combine_sql": plan.combine}


def _error_bar(plan: PrivateAggregate, calibration: Calibration, output: OutputColumn,
               beta: float) -> dict[str, Any]:
    """The column's error at confidence 1 − β before the analyst's shift (which the
    NOTICE's bound also covers, at its widest): a ± for a count or a sum; for an average
    the bounds of its centred sum and its count, each at 1 − β/2, from which the NOTICE
    computes the interval of each released average (error_bars.average_interval)."""
    if not calibration.pure:
        return {"error": "not stated: the noise follows the smooth sensitivity of this "
                "join, which depends on the data"}
    beyond = _beyond_tau(plan)
    if plan.parts[output.parts[0]].edges is not None:
        return {"clamping_bounds": "chosen when answering, inside the declared bounds, from "
                "a noisy histogram of the values (privacy.bounds_share of this column's "
                "epsilon)", "error": "stated with each answer: the noise for the chosen "
                "bounds and the clamping bias (the noisy rows beyond them, each at its "
                "bucket's far edge, with two standard deviations of their noise)" +
                (f"; {beyond}" if beyond else ""), "confidence": 1 - beta}
    if output.aggregate != "avg":
        error = noise_bound(plan, calibration, output.parts[0], 0.0, beta) + \
            (1 if _cell_rounding(plan, calibration) else 0)  # whole rows, as released
        return {"error": error, "confidence": 1 - beta,
                **({"upper_end": beyond} if beyond else {}),
                **({"shape_times_total": SHAPE_TIMES_TOTAL}
                   if plan.unit is not None and plan.unit.spread_keys else {})}
    total, count = (noise_bound(plan, calibration, i, 0.0, beta / 2) for i in output.parts)
    assert output.bounds is not None
    lo, hi = output.bounds
    return {"confidence": 1 - beta, "centred_sum_error": total, "count_error": count,
            "error": f"m + (sum ± {total:.6g}) / (count ± {count:.6g}) with m = "
            f"{(lo + hi) / 2:g}, within [{lo:g}, {hi:g}]"}


def _computed_error(plan: PrivateAggregate, calibration: Calibration, index: int,
                    beta: float) -> dict[str, Any]:
    """A column computed from released values: which noisy values it reads, and how its
    interval is stated with each answer (proxy/engine/computed_errors.py)."""
    if plan.post_sql is None:
        return {}
    if not calibration.pure:
        return {"error": "not stated: the noise follows the smooth sensitivity of this "
                "join, which depends on the data"}
    node = projections(plan.post_sql)[index]
    read: dict[tuple[int, ...], OutputColumn] = {}  # one per noisy value, as first read
    for i in inputs_of(node):
        if plan.outputs[i].kind == OutputKind.NOISY:
            read.setdefault(plan.outputs[i].parts, plan.outputs[i])
    noisy = list(read.values())
    try:  # a trial over placeholder intervals: whether the expression can have one at all
        interval_of(node, lambda i: Input((1.0, 2.0), i))
    except NoInterval as reason:
        return {"reads": [output.name for output in noisy],
                "error": f"not stated: {reason} (the NOTICE says so with each answer)"}
    shares = f"1 − β/{len(noisy)}" if len(noisy) > 1 else "1 − β"
    limits = plan.computed.ranges[index] if plan.computed and plan.computed.ranges else None
    return {"reads": [output.name for output in noisy], "confidence": 1 - beta,
            "error": "stated with each answer: the interval of each noisy value it reads, "
            f"at confidence {shares} each (a union bound), carried through "
            "the expression by interval arithmetic; a divisor whose interval holds 0 leaves "
            "it unbounded" + (f"; cut to [{limits[0]:g}, {limits[1]:g}], what it can take "
                              "whatever the data" if limits else "")}


# A histogram over keys read from the rows (UnitBounds.spread_keys), proxy/engine/chosen_bound.py.
SHAPE_TIMES_TOTAL = (
    "where a τ large enough to leave the cells at least 10 rows of noise each would be "
    "chosen, 3% of the epsilon first asks privately whether many units have that many rows; "
    "if so, or if the τ then chosen is that large, the cells are answered as the units' "
    "shape (each unit weighs 1 row in all, spread over its cells) times the rows up to the "
    "cap, with 0.7 and 0.3 of the rest; this assumes each unit's rows fall in the cells as "
    "all rows do, and the interval, stated with the answer, allows for the noise, not for "
    "units whose rows fall otherwise")


def _beyond_tau(plan: PrivateAggregate) -> str | None:
    """What a τ chosen per query adds to the error bar: the rows beyond τ, released noisy
    with the answer (proxy/engine/chosen_bound.py, weighted_sums.py)."""
    unit = plan.unit
    if unit is None or unit.chosen_limit is None:
        return None
    where, each = ("error", "each anywhere within the declared bounds") \
        if unit.weights_cap is not None else ("error's upper end", "one row each")
    return (f"with τ chosen below its limit, the {where} also allows for the rows beyond "
            "τ: their noisy number, released with the answer, plus its one-sided bound, "
            f"{each} (the noise above is at the limit and the whole ε)")


def _presence(plan: PrivateAggregate, calibration: Calibration, output: OutputColumn
              ) -> dict[str, Any]:
    """A SUM's count of its values, whose released value below 0.5 makes it NULL: its own
    (a share of the SUM's ε, which `epsilon` includes) or another column's (free)."""
    if output.present is None:
        return {}
    own = plan.parts[output.present].presence_of is not None
    counted = calibration.parts[output.present]
    return {"null_when": {"count_of_values_below": 0.5, "own_count": own,
                          "count_epsilon": counted.epsilon if own else 0.0,
                          "count_noise_scale": counted.scale},
            **({"epsilon": calibration.parts[output.parts[0]].epsilon + counted.epsilon}
               if own else {})}


def _choice_report(output: OutputColumn, part: NoisyPart, calibrated: PartCalibration,
                   beta: float) -> dict[str, Any]:
    """A column chosen by the exponential mechanism: Δu, ε and the candidates; a
    quantile's error in rank (one in values would depend on the data)."""
    report: dict[str, Any] = {
        "name": output.name, "kind": "choice", "aggregate": output.aggregate,
        "mechanism": "exponential", "utility_sensitivity": calibrated.smooth_sensitivity,
        "elastic_sensitivity": calibrated.elastic_sensitivity,
        "epsilon": calibrated.epsilon, "utility_scale": calibrated.scale,
    }
    if part.grid is not None and part.level is not None:
        ranks = math.ceil(quantile_rank_bound(choice_epsilon(calibrated.epsilon, part),
                                              part.level, part.grid, beta))
        report.update(level=float(part.level), grid_low=float(part.grid.lo),
                      grid_step=float(part.grid.step), grid_points=part.grid.points,
                      rank_error=ranks, confidence=1 - beta,
                      error=f"in rank: give or take half a grid step, the value released "
                      f"has p·n ± {ranks} of the n rows below it (rows equal to it counted "
                      "either way); no interval in values is stated, as it would depend on "
                      "how far apart the values near that rank lie")
    return report
