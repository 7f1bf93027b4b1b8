"""Issue 23, family 4: nothing in a private statement may change the state of a backend
connection or of the database. A function with side effects (setseed, set_config, sequence
functions, advisory locks, notifications, large objects, signals, transaction ids…) is
refused wherever it stands: select list, WHERE, FILTER, CASE, HAVING, ORDER BY, GROUP BY,
CTEs, derived tables, subqueries, and the query around an aggregate subquery. The rule is
PostgreSQL's own volatility (pg_proc.provolatile), read from the backend, with a short
allow-list of volatile functions that only draw random numbers or read the clock."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from rewriter.analysis.classify import classify
from rewriter.errors import Refusal
from rewriter.plan import PrivateAggregate
from rewriter.sensitivity.metrics import Metrics
from tests.conftest import RunningProxy
from tests.test_classify import POLICY
from tests.test_end_to_end import connect
from tests.test_ledger_proxy import fresh_analyst

pytestmark = pytest.mark.end_to_end

# Every function here changes some state when it runs (or assigns a transaction id).
SIDE_EFFECTS = [
    "setseed(0.5)", "set_config('dpgate.x', '1', false)", "nextval('orders_seq')",
    "currval('orders_seq')", "lastval()", "setval('orders_seq', 1)", "pg_advisory_lock(1)",
    "pg_try_advisory_xact_lock(1)", "pg_notify('c', 'x')", "lo_create(0)",
    "pg_cancel_backend(0)", "pg_terminate_backend(0)", "pg_reload_conf()", "txid_current()",
    "pg_current_xact_id()", "pg_stat_reset()", "pg_catalog.setseed(0.5)", '"setseed"(0.5)',
]
# {f} is the function call; every clause and nesting level a private statement has.
ROUTES = [
    "SELECT count(*), {f} FROM orders",
    "SELECT count(*) + length(({f})::text) FROM orders",
    "SELECT count(*) FROM orders HAVING ({f}) IS NULL",
    "SELECT count(*) FROM orders ORDER BY ({f}) IS NULL",
    "SELECT count(*) FROM orders WHERE ({f}) IS NULL",
    "SELECT count(*) FILTER (WHERE ({f}) IS NULL) FROM orders",
    "SELECT sum(CASE WHEN ({f}) IS NULL THEN 1 ELSE 0 END) FROM orders",
    "SELECT product_id, count(*) FROM orders GROUP BY product_id, ({f}) IS NULL",
    "WITH t AS (SELECT customer_id FROM orders WHERE ({f}) IS NULL) SELECT count(*) FROM t",
    "SELECT count(*) FROM (SELECT customer_id, {f} AS x FROM orders) AS s",
    "SELECT n, {f} FROM (SELECT count(*) AS n FROM orders) AS s",
    "WITH t AS (SELECT count(*) AS n FROM orders) SELECT n FROM t WHERE ({f}) IS NULL",
    "SELECT count(*) FROM orders WHERE product_id IN "
    "(SELECT product_id FROM products WHERE ({f}) IS NULL)",
    "SELECT count(*) FROM orders WHERE customer_id = (SELECT 1 WHERE ({f}) IS NULL)",
    "SELECT count(*), (SELECT {f}) FROM orders",
    "SELECT count(*) FROM orders o JOIN products p ON o.product_id = p.product_id "
    "AND ({f}) IS NULL",
]


@pytest.fixture(scope="module")
def analyst(proxy: RunningProxy) -> str:
    return fresh_analyst(proxy, 1000)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("call", SIDE_EFFECTS)
def test_a_function_with_side_effects_is_refused_anywhere(proxy: RunningProxy, analyst: str,
                                                          route: str, call: str):
    statement = route.format(f=call)
    with connect(proxy.dsn(analyst, analyst)) as connection:
        with pytest.raises(errors.InsufficientPrivilege) as refusal:
            connection.execute(statement)
        assert connection.execute("SELECT 1").fetchone() == (1,)  # the session goes on
    assert "refused" in str(refusal.value)


@pytest.mark.parametrize("statement", [
    "SELECT count(*), random() < 2 FROM orders",
    "SELECT count(*), clock_timestamp() > '2000-01-01' FROM orders",
    "SELECT n, now() > '2000-01-01' FROM (SELECT count(*) AS n FROM orders) AS s",
])
def test_volatile_functions_that_only_draw_or_read_the_clock_stay_allowed(
        proxy: RunningProxy, analyst: str, statement: str):
    with connect(proxy.dsn(analyst, analyst)) as connection:
        (row,) = connection.execute(statement).fetchall()
    assert row[1] is True


# -- the rule itself, without a backend ----------------------------------------------------

def _plan(sql: str, volatile: frozenset[str]) -> PrivateAggregate | Refusal:
    (statement,) = classify(sql, POLICY, Metrics(volatile_functions=volatile))
    return statement.plan


def test_the_volatility_rule_comes_from_the_catalog_it_is_given():
    """A function the backend marks volatile is refused by name; an unknown one is not
    (PostgreSQL then says it does not exist)."""
    sql = "SELECT count(*), my_audit_hook() FROM orders"
    refused = _plan(sql, frozenset({"my_audit_hook"}))
    assert isinstance(refused, Refusal) and refused.sqlstate == "42501"
    assert "my_audit_hook" in refused.message and "volatile" in refused.message
    assert isinstance(_plan(sql, frozenset()), PrivateAggregate)


def test_the_fixed_lists_apply_even_without_the_catalog():
    """Stable functions that assign a transaction id, and the deny list of functions.py;
    the rest comes from the catalog, which the proxy reads before it plans anything."""
    for call in ("txid_current()", "pg_current_xact_id()", "set_config('a.b', '1', false)",
                 "nextval('s')", "pg_advisory_lock(1)"):
        plan = _plan(f"SELECT count(*), {call} FROM orders", frozenset())
        assert isinstance(plan, Refusal) and plan.sqlstate == "42501", call


def test_allowed_volatile_functions_pass_the_rule():
    plan = _plan("SELECT count(*), random() FROM orders", frozenset({"random"}))
    assert isinstance(plan, PrivateAggregate)


def test_the_catalog_marks_every_listed_function_volatile(proxy: RunningProxy):
    """The functions the tests above name are the catalog's volatile ones (or the few
    stable ones that assign a transaction id), so the rule, not a list, refuses them."""
    with psycopg.connect(proxy.database.admin_dsn) as connection:
        marks = dict(connection.execute(
            "SELECT proname, string_agg(DISTINCT provolatile::text, '') FROM pg_proc "
            "GROUP BY proname").fetchall())
    for call in SIDE_EFFECTS:
        name = call.split("(")[0].split(".")[-1].strip('"')
        assert "v" in marks[name] or name in ("txid_current", "pg_current_xact_id"), name
