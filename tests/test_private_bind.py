"""A private statement with the client's parameters runs in one round trip (Parse, Bind,
Execute, Sync): what PostgreSQL refuses before BindComplete is its own error and free,
what fails once rows are read is charged. The plan check holds for every value: it is
made on PostgreSQL's generic plan (proxy/engine/generic_plan.py)."""

from __future__ import annotations

import pytest

from proxy.engine.errors import StatementError
from proxy.engine.generic_plan import generic_explain, has_generic_plans
from proxy.pgwire.backend import BackendConnection, BackendPool, Endpoint, Parameters
from tests.test_private_connections import Setup, error_fields, setup  # noqa: F401

pytestmark = pytest.mark.end_to_end

COUNT = "SELECT count(*) FROM orders WHERE product_id = $1 AND quantity >= $2"
INT4 = 23


@pytest.mark.unit
def test_generic_explain_types_each_placeholder_and_leaves_strings_alone():
    sql = "SELECT count(*) FROM t WHERE x = $1 AND y = '$2' AND z >= $10"
    names = ["integer"] * 9 + ["numeric"]
    assert generic_explain(sql, names) == (
        "EXPLAIN (GENERIC_PLAN, VERBOSE, FORMAT JSON) SELECT count(*) FROM t WHERE "
        "x = ($1::integer) AND y = '$2' AND z >= ($10::numeric)")
    with pytest.raises(ValueError):
        generic_explain("SELECT $3", ["integer"])


@pytest.mark.unit
@pytest.mark.parametrize("version, generic", [("16.2", True), ("17beta1", True),
                                              ("17.0 (Debian 17.0-1)", True),
                                              ("15.6", False), ("", False)])
def test_generic_plans_from_the_server_version(version, generic):
    backend = BackendConnection.__new__(BackendConnection)
    backend.parameters = {"server_version": version}
    assert has_generic_plans(backend) == generic


def test_a_bad_value_after_a_checked_plan_is_free_and_postgresqls(setup: Setup):  # noqa: F811
    async def scenario() -> None:
        engine = setup.engine("bea")
        (statement,) = await engine.statements(COUNT)
        good = Parameters((INT4, INT4), (0, 0), (b"3", b"2"))
        answer = await engine.execute(COUNT, statement.plan, good)
        assert int(answer.rows[0][0] or 0) > 0
        bad = Parameters((INT4, INT4), (0, 0), (b"4", b"two"))
        with pytest.raises(StatementError) as refused:
            await engine.execute(COUNT, statement.plan, bad)
        assert error_fields(refused.value)["C"] == "22P02"
        assert "two" in error_fields(refused.value)["M"]  # PostgreSQL's own wording
    setup.run(scenario())
    assert [charge.outcome for charge in setup.ledger.charges("bea")] == ["answered"]


def test_a_failure_while_rows_are_read_is_charged(setup: Setup):  # noqa: F811
    """A statement timeout that strikes while the join runs (after BindComplete) may
    depend on the rows: charged, generic error. Not a race: PostgreSQL parses, plans and
    binds this in milliseconds, far under the 1 s timeout however loaded the machine, and
    the 4-way self-join counts about 10⁹ rows, minutes of work on any machine."""
    setup.pool = BackendPool(Endpoint.from_dsn(setup.config.backend.dsn), 2,
                             statement_timeout=1.0)
    sql = ("SELECT count(*) FROM orders o1 JOIN orders o2 ON o1.customer_id = o2.customer_id"
           " JOIN orders o3 ON o2.customer_id = o3.customer_id"
           " JOIN orders o4 ON o3.customer_id = o4.customer_id WHERE o1.product_id > $1")

    async def scenario() -> None:
        engine = setup.engine("cid")
        (statement,) = await engine.statements(sql)
        with pytest.raises(StatementError) as failed:
            await engine.execute(sql, statement.plan,
                                 Parameters((INT4,), (0,), (b"0",)))
        assert error_fields(failed.value)["C"] == "22000"
        assert "charge" in error_fields(failed.value)["M"]
    setup.run(scenario())
    assert [charge.outcome for charge in setup.ledger.charges("cid")] == ["failed"]
