"""Golden files of unit mode: statement → rewritten SQL and sensitivities.

Each tests/golden/unit/*.sql holds cases separated by `-- ----` lines: a `-- title` line,
the analyst's statement, `-- expect:`, then the rewritten SQL and one `-- part:` line per
noisy part (aggregate, L1 and L2 sensitivity per unit, the Laplace scale at ε = 1 and
FLEX's row-level scale beside it), or `-- refused:` with the message. Regenerate after an
intended change with DPGATE_UPDATE_GOLDEN=1 and review the diff like code.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from rewriter.calibrate import calibrate
from rewriter.classify import parse_query
from rewriter.errors import Refusal
from rewriter.metrics import Metrics
from rewriter.private import plan_private_aggregate
from tests.unit_support import demo_policy

GOLDEN = Path(__file__).parent / "golden" / "unit"
SEPARATOR = "-- ----"
EXPECT = "-- expect:"

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


def cases() -> list[tuple[str, str, str, str, str]]:
    """(file, title, policy, statement, expectation) of every golden case."""
    found = []
    for path in sorted(GOLDEN.glob("*.sql")):
        for block in path.read_text().split(SEPARATOR + "\n"):
            if not block.strip():
                continue
            head, _, expected = block.partition(EXPECT + "\n")
            lines = head.strip().splitlines()
            title = lines[0].removeprefix("-- ").strip()
            policy = "fallback" if "[fallback]" in title else "unit"
            found.append((path.name, title, policy, "\n".join(lines[1:]).strip().rstrip(";"),
                          expected.strip()))
    return found


if os.environ.get("DPGATE_UPDATE_GOLDEN"):
    for path in sorted(GOLDEN.glob("*.sql")):
        blocks = []
        for block in path.read_text().split(SEPARATOR + "\n"):
            if not block.strip():
                continue
            head = block.partition(EXPECT + "\n")[0].strip()
            lines = head.splitlines()
            policy = "fallback" if "[fallback]" in lines[0] else "unit"
            statement = "\n".join(lines[1:]).strip().rstrip(";")
            blocks.append(f"{head}\n{EXPECT}\n{expectation(statement, policy)}\n")
        path.write_text((SEPARATOR + "\n").join(blocks))


@pytest.mark.parametrize(("name", "title", "policy", "statement", "expected"), cases(),
                         ids=[f"{c[0]}:{c[1]}" for c in cases()])
def test_golden(name: str, title: str, policy: str, statement: str, expected: str):
    assert expectation(statement, policy) == expected
