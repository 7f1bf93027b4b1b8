"""`dpgate explain`: what the analysis decides for one statement, as plain JSON data."""

from __future__ import annotations

from typing import Any

from .calibrate import Calibration, PartCalibration, calibrate
from .classify import classify, parse_query
from .errors import Refusal
from .metrics import Metrics, MissingMetrics
from .plan import NoisyPart, OutputColumn, PrivateAggregate, Relay
from .policy import Policy
from .private import plan_private_aggregate
from .sqlstate import SqlState
from .unit_report import mode_report

OBJECT_NOT_IN_PREREQUISITE_STATE = SqlState.OBJECT_NOT_IN_PREREQUISITE_STATE


def explain(sql: str, policy: Policy, metrics: Metrics, epsilon: float, delta: float,
            k: int = 0) -> dict[str, Any]:
    """The analysis of one statement: sensitivities and scales, or why it is refused."""
    try:
        statements = classify(sql, policy, metrics)
        if len(statements) != 1:
            raise Refusal(SqlState.FEATURE_NOT_SUPPORTED, "explain takes one statement")
        plan = statements[0].plan
        if isinstance(plan, Refusal):
            raise plan
        if isinstance(plan, Relay):
            public = _public_aggregate(plan.text, policy, metrics)
            if public is None:
                return {"supported": True, "kind": "relay", "rewritten_sql": sql.strip()}
            plan = public
        if not isinstance(plan, PrivateAggregate):
            return {"supported": True, "kind": "session"}
        return _report(plan, calibrate(plan, epsilon, delta, k))
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


def _report(plan: PrivateAggregate, calibration: Calibration) -> dict[str, Any]:
    columns = []
    for output in plan.visible:
        if output.kind == "key":
            columns.append({"name": output.name, "kind": "key", "aggregate": None,
                            "elastic_sensitivity": 0.0})
            continue
        if output.kind == "computed":  # post-processing of the noisy outputs: free
            columns.append({"name": output.name, "kind": "computed", "aggregate": None,
                            "elastic_sensitivity": 0.0})
            continue
        parts = [calibration.parts[i] for i in output.parts]
        first = parts[0]
        if output.kind == "choice":
            columns.append(_choice_report(output, plan.parts[output.parts[0]], first))
            continue
        columns.append({
            "name": output.name, "kind": "noisy", "aggregate": output.aggregate,
            "elastic_sensitivity": first.elastic_sensitivity,
            "smooth_sensitivity": first.smooth_sensitivity, "k_star": first.k_star,
            "noise_scale": first.scale, "flex_noise_scale": first.flex_scale,
            **({"unit_sensitivity": first.elastic_sensitivity} if plan.unit else {}),
            "epsilon": sum(p.epsilon for p in parts),
            **({"count_noise_scale": parts[1].scale} if len(parts) > 1 else {}),
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


def _choice_report(output: OutputColumn, part: NoisyPart, calibrated: PartCalibration
                   ) -> dict[str, Any]:
    """A column chosen by the exponential mechanism: Δu, ε and the candidates."""
    report: dict[str, Any] = {
        "name": output.name, "kind": "choice", "aggregate": output.aggregate,
        "mechanism": "exponential", "utility_sensitivity": calibrated.smooth_sensitivity,
        "elastic_sensitivity": calibrated.elastic_sensitivity,
        "epsilon": calibrated.epsilon, "utility_scale": calibrated.scale,
    }
    if part.grid is not None and part.level is not None:
        report.update(level=float(part.level), grid_low=float(part.grid.lo),
                      grid_step=float(part.grid.step), grid_points=part.grid.points)
    return report
