"""Catalog SQL of real tools through dpgate (issue 13): pgcli's completion, asyncpg's and
SQLAlchemy's set_config('jit', …), and the policy as psql's column comments."""

from __future__ import annotations

import psycopg
import pytest

from rewriter.analysis.classify import _qualify_array_types, classify
from rewriter.errors import Refusal
from rewriter.plan import Relay
from tests.conftest import RunningProxy
from tests.test_end_to_end import connect
from tests.test_flex import POLICY
from tests.test_psql import psql

pytestmark = pytest.mark.end_to_end

# pgcli 4's function completion (pgexecute.py, PostgreSQL ≥ 11): sqlglot reads regtype[]
# only schema-qualified.
PGCLI_FUNCTIONS = """
SELECT n.nspname schema_name,
        p.proname func_name,
        p.proargnames,
        COALESCE(proallargtypes::regtype[], proargtypes::regtype[])::text[],
        p.proargmodes,
        prorettype::regtype::text return_type,
        p.prokind = 'a' is_aggregate,
        p.prokind = 'w' is_window,
        p.proretset is_set_returning,
        d.deptype = 'e' is_extension,
        pg_get_expr(proargdefaults, 0) AS arg_defaults
FROM pg_catalog.pg_proc p
        INNER JOIN pg_catalog.pg_namespace n
            ON n.oid = p.pronamespace
LEFT JOIN pg_depend d ON d.objid = p.oid and d.deptype = 'e'
WHERE p.prorettype::regtype != 'trigger'::regtype
ORDER BY 1, 2
"""
# asyncpg's type introspection (connection.py, _introspect_types), also under SQLAlchemy.
ASYNCPG_JIT = "SELECT current_setting('jit') AS cur, set_config('jit', 'off', false) AS new"


@pytest.mark.unit
def test_array_types_are_qualified_only_where_sqlglot_needs_it():
    assert _qualify_array_types("SELECT x::regtype[], CAST(y AS oid[]), z::regtype "
                                "FROM t") == ("SELECT x::pg_catalog.regtype[], "
                                              "CAST(y AS pg_catalog.oid[]), z::regtype FROM t")
    assert _qualify_array_types("SELECT 'x::regtype[]'") == "SELECT 'x::regtype[]'"


@pytest.mark.unit
def test_pgcli_completion_is_relayed_as_written():
    (statement,) = classify(PGCLI_FUNCTIONS, POLICY)
    assert isinstance(statement.plan, Relay)
    assert statement.plan.text == PGCLI_FUNCTIONS.strip()


@pytest.mark.unit
@pytest.mark.parametrize(("sql", "allowed"), [
    (ASYNCPG_JIT, True),
    ("SELECT set_config('jit', $1, false)", True),
    ("SELECT set_config('statement_timeout', '5s', true)", True),
    ("SELECT set_config('role', 'postgres', false)", False),
    ("SELECT set_config('session_authorization', 'postgres', false)", False),
    ("SELECT set_config('dp.epsilon', '0', false)", False),
    ("SELECT set_config(name, 'x', false) FROM pg_settings", False),  # not a literal name
    ("SELECT count(*) FROM orders WHERE set_config('jit', 'off', false) = 'off'", False),
])
def test_set_config_is_relayed_like_set(sql: str, allowed: bool):
    (statement,) = classify(sql, POLICY)
    assert isinstance(statement.plan, Relay) is allowed, statement.plan
    if not allowed:
        assert isinstance(statement.plan, Refusal)


def test_pgcli_and_asyncpg_catalog_queries_through_dpgate(proxy: RunningProxy):
    with connect(proxy.dsn("alice")) as connection:
        functions = connection.execute(PGCLI_FUNCTIONS).fetchall()
        assert any(row[1] == "date_trunc" for row in functions)
        cur, new = connection.execute(ASYNCPG_JIT).fetchone()
        assert new == "off" and cur in ("on", "off")
        assert connection.execute("SHOW jit").fetchone() == ("off",)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            connection.execute("SELECT set_config('role', 'postgres', false)")


def test_psql_shows_the_policy_as_column_comments(proxy: RunningProxy):
    result = psql(proxy, r"\d+ orders", r"\d+ products")
    assert result.returncode == 0, result.stderr
    lines = {line.split("|")[0].strip(): line.split("|")[-1].strip()
             for line in result.stdout.splitlines() if line.count("|") >= 8}
    assert lines["quantity"].startswith("dpgate: private; domain 1 .. 10; bounds [1, 10]")
    assert "key selection" in lines["customer_id"]
    assert lines["order_id"] == "dpgate: private; answers: count, count(DISTINCT), WHERE"
    assert lines["price"] == ""  # a public table keeps its own (empty) comments
