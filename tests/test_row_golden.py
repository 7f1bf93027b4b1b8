"""Golden files of row-level (FLEX) mode: statement → rewritten SQL and sensitivities.

Each case of tests/golden/row/*.sql (format: tests/golden_files.py) is planned with the
FLEX reference policy (tests/data/reference_policy.toml: no privacy unit, declared
maxFreq such as orders.customer_id 100, recommendations.customer_id 250) at ε = 0.1,
δ = 1e-8, the reference point of the FLEX paper's worked examples (Johnson, Near & Song,
VLDB 2018). It expects the rewritten SQL, then:

- one `-- part:` line per noisy part: the aggregate, ES(k) as a polynomial in k times the
  part's magnitude (max(|lo|, |hi|) of a clamped SUM), the smooth sensitivity S* and its
  k*, the Laplace scale dpgate uses and FLEX's 2S*/ε beside it;
- `-- privacy:` the scale's path (a global sensitivity when ES does not depend on k, else
  the smooth sensitivity) and the δ charged (the smooth path's, or key selection's);
- `-- groups:` a whole declared domain (its size) or key selection with its threshold;
- `-- after noise:` HAVING / ORDER BY / LIMIT, and `-- post:` / `-- outer:` the SQL that
  runs over the released values only (post-processing);

or `-- refused:` with the SQLSTATE and message.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.config import load_policy_file
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.errors import Refusal
from rewriter.plan import PostProcess
from rewriter.sensitivity.calibrate import calibrate
from tests.golden_files import Case, cases, released_sql, update_if_asked
from tests.test_unit_golden import METRICS

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden" / "row"
POLICY = load_policy_file(Path(__file__).parent / "data" / "reference_policy.toml")
EPSILON, DELTA = 0.1, 1e-8


def expectation(title: str, statement: str) -> str:
    """What the rewriter makes of one statement at row level, as the files write it."""
    try:
        plan = plan_private_aggregate(parse_query(statement), POLICY, 0, METRICS)
        calibration = calibrate(plan, EPSILON, DELTA)
    except Refusal as refusal:
        return f"-- refused: {refusal.sqlstate} {refusal.message}"
    assert plan.unit is None
    lines = [plan.sql + ";"]
    for part, calibrated in zip(plan.parts, calibration.parts, strict=True):
        elastic = str(part.elastic)
        if part.magnitude != 1:
            elastic = (f"({elastic})" if "+" in elastic else elastic) + f" × {part.magnitude:g}"
        lines.append(f"-- part: {part.aggregate} ES(k)={elastic} "
                     f"S*={calibrated.smooth_sensitivity:.10g} k*={calibrated.k_star} "
                     f"scale={calibrated.scale:.10g} flex_scale={calibrated.flex_scale:.10g}")
    if plan.parts:
        path = "global sensitivity (ES/ε)" if calibration.pure else "smooth sensitivity (2S*/ε)"
        lines.append(f"-- privacy: {path}, delta {calibration.delta:g}")
    else:
        lines.append("-- privacy: nothing charged (public values only)")
    if plan.grouping is not None:
        if calibration.threshold is not None:
            lines.append(f"-- groups: key selection, threshold {calibration.threshold:.6f}")
        else:
            size = plan.grouping.domain_size
            lines.append(f"-- groups: the whole declared domain "
                         f"({'from a public table' if size is None else f'{size} keys'})")
    hidden = [i for i, output in enumerate(plan.outputs) if output.hidden]
    if hidden:
        lines.append(f"-- hidden outputs (for HAVING / ORDER BY only): {hidden}")
    if plan.post != PostProcess():
        lines.append(f"-- after noise: {plan.post}")
    return "\n".join(lines + released_sql(plan.post_sql, plan.outer and plan.outer.sql))


update_if_asked(GOLDEN, expectation)


@pytest.mark.parametrize("case", cases(GOLDEN), ids=lambda case: case.id)
def test_golden(case: Case):
    assert expectation(case.title, case.statement) == case.expected
