"""Golden files of the SQL the rewriter writes, for the tests that once checked it by
substring (buckets, constants, group keys, FILTER, the exponential mechanism's SQL …).

Each case of tests/golden/rewritten/*.sql (format: tests/golden_files.py) ends its title
with the policy it is planned under: `[row]` the demo policy without its privacy unit,
`[unit]` the demo policy, `[reference]` FLEX's reference policy
(tests/data/reference_policy.toml), all with the demo schema's metrics; `[reference typed]`
the reference policy with the column types of tests/test_name_resolution.py, `[clinic]`
the clinic of tests/test_estimators.py, and `[unit …]` the demo policy with the unit
settings of a test of tests/test_unit_mode.py (see SETTINGS). It expects the rewritten
SQL, then one `-- constant:` line per value PostgreSQL computes first, `-- post:` /
`-- outer:` for the SQL over released values, or `-- refused:` with the SQLSTATE and
message. The file a case is in
says which test module's subject it is; the property the old assert checked is its title.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.config import load_policy_file
from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.errors import Refusal
from tests.golden_files import Case, cases, released_sql, update_if_asked
from tests.test_estimators import CLINIC, CLINIC_METRICS
from tests.test_name_resolution import TYPED
from tests.test_unit_golden import METRICS
from tests.test_unit_mode import ALIAS_CHAIN, CHAIN, FIXED_TAU
from tests.unit_support import demo_policy

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden" / "rewritten"
REFERENCE = load_policy_file(Path(__file__).parent / "data" / "reference_policy.toml")
# The bracketed end of a case's title → the policy and metrics it is planned with.
SETTINGS = {
    "row": (demo_policy(unit=False), METRICS),
    "unit": (demo_policy(unit=True), METRICS),
    "reference": (REFERENCE, METRICS),
    "reference typed": (REFERENCE, TYPED),
    "clinic": (CLINIC, CLINIC_METRICS),
    "unit chain": (CHAIN, METRICS),
    "unit alias chain": (ALIAS_CHAIN, METRICS),
    "unit fixed tau": (FIXED_TAU, METRICS),
}


def expectation(title: str, statement: str) -> str:
    """The rewritten SQL of one statement under the policy its title names."""
    policy, metrics = SETTINGS[title.rsplit("[", 1)[1].rstrip("]")]
    try:
        plan = plan_private_aggregate(parse_query(statement), policy, 0, metrics)
    except Refusal as refusal:
        return f"-- refused: {refusal.sqlstate} {refusal.message}"
    constants = [f"-- constant: {c.token} = {c.sql}" for c in plan.constants]
    return "\n".join([plan.sql + ";", *constants,
                      *released_sql(plan.post_sql, plan.outer and plan.outer.sql)])


update_if_asked(GOLDEN, expectation)


@pytest.mark.parametrize("case", cases(GOLDEN), ids=lambda case: case.id)
def test_rewritten_sql(case: Case):
    assert expectation(case.title, case.statement) == case.expected
