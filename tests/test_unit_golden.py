"""Golden files of unit mode: statement → rewritten SQL and sensitivities.

Each case of tests/golden/unit/*.sql (format: tests/golden_files.py) expects the rewritten
SQL and one `-- part:` line per noisy part (aggregate, L1 and L2 sensitivity per unit, the
Laplace scale at ε = 1 and FLEX's row-level scale beside it), or `-- refused:` with the
message. A title with `[fallback]` uses the demo policy with row_level_fallback = true.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.errors import Refusal
from rewriter.sensitivity.calibrate import calibrate
from rewriter.sensitivity.metrics import Metrics
from tests.golden_files import Case, cases, update_if_asked
from tests.unit_support import demo_policy

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden" / "unit"

# The demo schema and FLEX's reference frequencies (products.product_id 300 …).
METRICS = Metrics(
    max_freq={("public.orders", "order_id"): 1, ("public.orders", "customer_id"): 100,
              ("public.orders", "product_id"): 500, ("public.products", "product_id"): 1,
              ("public.customers", "customer_id"): 1, ("public.customers", "address"): 5,
              ("public.recommendations", "customer_id"): 250,
              ("public.recommendations", "product_id"): 2000,
              ("public.products", "category"): 200},
    columns={"public.orders": ("order_id", "customer_id", "product_id", "quantity",
                               "order_cost", "order_date"),
             "public.customers": ("customer_id", "name", "address"),
             "public.products": ("product_id", "name", "category", "price"),
             "public.recommendations": ("customer_id", "product_id")},
    column_types={("public.orders", "order_cost"): "numeric",
                  ("public.orders", "quantity"): "integer",
                  ("public.orders", "order_date"): "date"})


def policies() -> dict[str, object]:
    unit = demo_policy()
    assert unit.unit is not None
    return {"unit": unit,
            "fallback": dataclasses.replace(
                unit, unit=dataclasses.replace(unit.unit, row_level_fallback=True))}


def expectation(statement: str, policy_name: str) -> str:
    """What the rewriter makes of one statement, as the golden files write it."""
    policy = policies()[policy_name]
    try:
        plan = plan_private_aggregate(parse_query(statement), policy, 0, METRICS)
    except Refusal as refusal:
        return f"-- refused: {refusal.sqlstate} {refusal.message}"
    calibration = calibrate(plan, 1.0, 1e-6)
    lines = [plan.sql + ";"]
    mode = "unit" if plan.unit else f"row-level ({plan.row_level_reason})"
    lines.append(f"-- mode: {mode}")
    for part, calibrated in zip(plan.parts, calibration.parts, strict=True):
        l2 = part.l2 * part.magnitude if part.l2 is not None else calibrated.l2_sensitivity
        lines.append(f"-- part: {part.aggregate} L1={calibrated.elastic_sensitivity:g} "
                     f"L2={l2:g} scale={calibrated.scale:g} flex_scale="
                     f"{calibrated.flex_scale:.6g}")
    if calibration.threshold is not None:
        lines.append(f"-- threshold: {calibration.threshold:.6f} (delta {calibration.delta:g})")
    return "\n".join(lines)


def _expectation(title: str, statement: str) -> str:
    return expectation(statement, "fallback" if "[fallback]" in title else "unit")


update_if_asked(GOLDEN, _expectation)


@pytest.mark.parametrize("case", cases(GOLDEN), ids=lambda case: case.id)
def test_golden(case: Case):
    assert _expectation(case.title, case.statement) == case.expected
