"""Issue 23, family 1: settings that change how PostgreSQL reads SQL text.

The attack: make PostgreSQL read a statement's text otherwise than dpgate reads it, so
that what dpgate takes for a string runs as code (`SET standard_conforming_strings = off`,
then `SELECT 'a\\', ' , reltuples::bigint FROM pg_class … --'`: two strings to dpgate,
one string and a catalog read to PostgreSQL). Every route to such a setting must be
refused, or leave PostgreSQL reading the text as dpgate does: after each one, the probe
statement must come back as the two strings dpgate saw, never as a number.
"""

from __future__ import annotations

import asyncio
import subprocess

import psycopg
import pytest

from proxy.pgwire.backend import BackendConnection, BackendError, Endpoint
from rewriter.analysis.classify import classify
from rewriter.errors import Refusal
from rewriter.plan import Relay
from rewriter.sql.lexical import PINNED, check_setting, startup_settings
from tests.conftest import RunningProxy
from tests.test_end_to_end import connect
from tests.test_flex import POLICY

pytestmark = pytest.mark.end_to_end

TAIL = " , reltuples::bigint FROM pg_class WHERE relname = $$customers$$ --"
PROBE = "SELECT 'a\\', '" + TAIL + "'"
READ_AS_DPGATE_DOES = [("a\\", TAIL)]
# A nested comment sqlglot ended early: no setting needed (failed before this issue).
NESTED = "SELECT /*/* */ ' */ reltuples::bigint FROM pg_class WHERE relname = $$customers$$ --'"
# E'ā\' in UTF-8 is C4 81 5C 27; to SJIS, 81 5C is one character and 27 ends the string.
SJIS_PROBE = "SELECT E'ā\\'" + TAIL + "'"

# Each route: statements that try to turn standard_conforming_strings off (or make the
# text otherwise unreadable), run one by one on one session before the probe.
ROUTES = {
    "set": ["SET standard_conforming_strings = off"],
    "set to quoted": ["SET standard_conforming_strings TO 'off'"],
    "set session": ["SET SESSION standard_conforming_strings = false"],
    "set quoted name": ['SET "Standard_Conforming_Strings" = of'],
    "set 0": ["SET standard_conforming_strings = 0"],
    "set dollar value": ["SET standard_conforming_strings = $$no$$"],
    "set escaped value": ["SET standard_conforming_strings = E'\\157ff'"],
    "set local": ["BEGIN", "SET LOCAL standard_conforming_strings = off"],
    "set_config": ["SELECT set_config('standard_conforming_strings', 'off', false)"],
    "set_config case": ["SELECT set_config('STANDARD_conforming_strings', 'off', false)"],
    "set_config local": ["BEGIN",
                         "SELECT set_config('standard_conforming_strings', 'off', true)"],
    "set_config from": ["SELECT * FROM set_config('standard_conforming_strings', 'off', false)"],
    "set_config nested": ["SELECT upper(set_config('standard_conforming_strings', 'off', "
                          "false))"],
    "set_config subquery": ["SELECT (SELECT set_config('standard_conforming_strings', 'off', "
                            "false)) AS s"],
    "set_config cte": ["WITH s AS (SELECT set_config('standard_conforming_strings', 'off', "
                       "false) AS v) SELECT v FROM s"],
    "set_config computed value": ["SELECT set_config('standard_conforming_strings', "
                                  "lower('OFF'), false)"],
    "set_config computed name": ["SELECT set_config(lower('STANDARD_CONFORMING_STRINGS'), "
                                 "'off', false)"],
    "pg_settings": ["UPDATE pg_settings SET setting = 'off' "
                    "WHERE name = 'standard_conforming_strings'"],
    "alter role": ["ALTER ROLE CURRENT_USER SET standard_conforming_strings = off"],
    "alter database": ["ALTER DATABASE dpgate_e2e SET standard_conforming_strings = off"],
    "function set clause": ["CREATE FUNCTION lexer_f() RETURNS text LANGUAGE sql "
                            "SET standard_conforming_strings = off AS $$SELECT 'x'$$"],
    "backslash_quote": ["SET backslash_quote = on"],
    "client_encoding": ["SET client_encoding = 'SJIS'"],
    "names": ["SET NAMES 'BIG5'"],
    "client_encoding gbk": ["SELECT set_config('client_encoding', 'GBK', false)"],
    "reset": ["RESET standard_conforming_strings"],
    "reset all": ["RESET ALL"],
    "discard all": ["DISCARD ALL"],
    "set default": ["SET standard_conforming_strings TO DEFAULT"],
}


def _run(connection: psycopg.Connection, statements: list[str]) -> str | None:
    """Run a route's statements; the SQLSTATE of the first refused, if any."""
    for statement in statements:
        try:
            connection.execute(statement)
        except psycopg.Error as error:
            if connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                connection.execute("ROLLBACK")
            return error.sqlstate
    return None


def _assert_read_as_dpgate_does(connection: psycopg.Connection) -> None:
    assert connection.execute(PROBE).fetchall() == READ_AS_DPGATE_DOES
    assert connection.execute("SHOW standard_conforming_strings").fetchone() == ("on",)
    if connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        connection.execute("COMMIT")


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_is_refused_or_read_as_dpgate_reads(proxy: RunningProxy, route: str):
    with connect(proxy.dsn("alice")) as connection:
        refused = _run(connection, ROUTES[route])
        assert refused in (None, "0A000", "42501")
        _assert_read_as_dpgate_does(connection)


@pytest.mark.parametrize("route", ["set", "set_config", "client_encoding", "names"])
def test_the_changes_are_refused_with_0a000_and_a_hint(proxy: RunningProxy, route: str):
    with connect(proxy.dsn("alice")) as connection:
        with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
            connection.execute(ROUTES[route][0])
        assert "is not supported" in refused.value.diag.message_primary
        assert refused.value.diag.message_hint


def test_set_config_over_the_extended_protocol(proxy: RunningProxy):
    with connect(proxy.dsn("alice")) as connection:
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            connection.execute("SELECT set_config('standard_conforming_strings', %s, false)",
                               ["off"])
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            connection.execute("SET standard_conforming_strings = off", prepare=True)
        _assert_read_as_dpgate_does(connection)


def test_the_pinned_values_may_be_set_again(proxy: RunningProxy):
    """Clients that set what they expect (SET client_encoding TO 'UTF8', pgjdbc's
    DateStyle=ISO) keep working."""
    with connect(proxy.dsn("alice")) as connection:
        for statement in ["SET standard_conforming_strings = on",
                          "SET client_encoding TO 'UTF8'", "SET NAMES 'unicode'",
                          "SET backslash_quote = safe_encoding",
                          "SET escape_string_warning = off", "SET DateStyle = 'SQL, MDY'",
                          "SET DateStyle = ISO", "SET IntervalStyle = iso_8601",
                          "SELECT set_config('standard_conforming_strings', 'on', false)"]:
            connection.execute(statement)
        _assert_read_as_dpgate_does(connection)


@pytest.mark.parametrize("statement", ["SET DateStyle = 'ISO, DMY'", "SET DateStyle = German",
                                       "SET IntervalStyle = sql_standard"])
def test_settings_that_change_how_private_literals_read_are_refused(proxy: RunningProxy,
                                                                    statement: str):
    with connect(proxy.dsn("alice")) as connection:
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            connection.execute(statement)


@pytest.mark.parametrize("sql", [
    NESTED,
    # with a literal dpgate lifts out as a parameter (literals.py) before it classifies
    "SELECT /*/* */ ' */ reltuples::bigint AS n FROM pg_class WHERE oid = 1259 --', relname "
    "FROM pg_class WHERE oid = 1259",
])
def test_a_nested_comment_sqlglot_ended_early_is_refused(proxy: RunningProxy, sql: str):
    with connect(proxy.dsn("alice")) as connection:
        for _ in range(2):  # and again, from the plan cache
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                connection.execute(sql)
        assert connection.execute("SELECT 1").fetchone() == (1,)


def test_sjis_text_is_refused_at_startup_and_by_set(proxy: RunningProxy):
    with pytest.raises(psycopg.OperationalError, match="client_encoding"):
        psycopg.connect(proxy.dsn("alice"), client_encoding="SJIS")
    with connect(proxy.dsn("alice")) as connection:
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            connection.execute("SET client_encoding = 'SJIS'")
        # The bytes an SJIS reader would split: one E'' string to dpgate and PostgreSQL.
        assert connection.execute(SJIS_PROBE.encode()).fetchall() == [("ā'" + TAIL,)]


@pytest.mark.parametrize("options", [
    "-c standard_conforming_strings=off", "-cstandard_conforming_strings=off",
    "--standard-conforming-strings=off", "-c backslash_quote=on",
    "-c client_encoding=BIG5", "-c DateStyle=DMY",
])
def test_startup_options_are_refused(proxy: RunningProxy, options: str):
    with pytest.raises(psycopg.OperationalError, match="is not supported"):
        psycopg.connect(proxy.dsn("alice"), options=options)


def test_sql_ascii_clients_are_read_as_utf8(proxy: RunningProxy):
    """psql under LANG=C asks for SQL_ASCII: PostgreSQL does not convert it, so its
    reading of the text is dpgate's."""
    with psycopg.connect(proxy.dsn("alice"), autocommit=True,
                         client_encoding="SQL_ASCII") as connection:
        assert connection.execute("SHOW client_encoding").fetchone() == (b"SQL_ASCII",)
        assert connection.execute(PROBE.encode()).fetchall() == [(b"a\\", TAIL.encode())]


def test_a_role_default_of_the_data_owner_does_not_change_the_relay(proxy: RunningProxy):
    """ALTER ROLE … SET by whoever owns the database: the relay's startup options win."""
    admin = proxy.database.admin_dsn
    with psycopg.connect(admin, autocommit=True) as owner:
        owner.execute("ALTER ROLE dpgate_relay SET standard_conforming_strings = off")
        try:
            with connect(proxy.dsn("alice")) as connection:
                _assert_read_as_dpgate_does(connection)
                connection.execute("RESET ALL")
                _assert_read_as_dpgate_does(connection)
                connection.execute("DISCARD ALL")
                _assert_read_as_dpgate_does(connection)
        finally:
            owner.execute("ALTER ROLE dpgate_relay RESET standard_conforming_strings")


def _psql(proxy: RunningProxy, *commands: str, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess:
    args = ["psql", proxy.dsn("alice"), "-X", "-A", "-t"]
    for command in commands:
        args += ["-c", command]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False,
                          env=env)


def test_the_issue_example_through_psql(proxy: RunningProxy):
    result = _psql(proxy, "SET standard_conforming_strings = off", PROBE, NESTED)
    assert "standard_conforming_strings = 'off' is not supported" in result.stderr
    assert f"a\\|{TAIL}" in result.stdout  # the probe, read as two strings
    assert "cannot read this text exactly as PostgreSQL" in result.stderr


def test_psql_with_pgoptions_is_refused(proxy: RunningProxy):
    import os
    result = _psql(proxy, PROBE, env={**os.environ,
                                      "PGOPTIONS": "-c standard_conforming_strings=off"})
    assert result.returncode != 0 and "is not supported" in result.stderr
    assert "reltuples" not in result.stdout


@pytest.mark.parametrize("encoding", ["SJIS", "BIG5", "GBK", "UHC", "GB18030", "JOHAB"])
def test_psql_with_a_client_only_encoding_is_refused(proxy: RunningProxy, encoding: str):
    import os
    result = _psql(proxy, PROBE, env={**os.environ, "PGCLIENTENCODING": encoding})
    assert result.returncode != 0 and "client_encoding" in result.stderr


# Unit: the rules themselves, without a server.

@pytest.mark.parametrize(("sql", "refused"), [
    ("SET standard_conforming_strings = off", True),
    ("SET standard_conforming_strings = 'yes'", False),
    ("SET standard_conforming_strings = DEFAULT", False),
    ("SET LOCAL backslash_quote = 'safe_encoding'", False),
    ("SET backslash_quote = off", True),
    ("SET client_encoding = 'utf-8'", False),
    ("SET client_encoding = 'LATIN1'", True),
    ("SET client_encoding = 'SQL_ASCII'", True),  # accepted at startup only
    ("SET NAMES 'JOHAB'", True),
    ("SET NAMES DEFAULT", False),
    ("SET DateStyle = 'German, MDY'", False),
    ("SET DateStyle = YMD", True),
    ("SET escape_string_warning = off", False),
    ("SELECT set_config('backslash_quote', 'on', false)", True),
    ("SELECT set_config('client_encoding', 'UTF8', false)", False),
    ("SELECT set_config('jit', 'off', false)", False),
])
def test_classify_guards_lexical_settings(sql: str, refused: bool):
    plan = classify(sql, POLICY)[0].plan
    assert isinstance(plan, Refusal if refused else Relay), plan
    if refused:
        assert isinstance(plan, Refusal) and plan.sqlstate == "0A000"


def test_startup_settings_pin_and_check():
    settings = startup_settings({"user": "a", "client_encoding": "sql-ascii",
                                 "DateStyle": "ISO", "options": "-c work_mem=1MB"})
    assert settings == {**PINNED, "client_encoding": "SQL_ASCII", "DateStyle": "ISO"}
    assert startup_settings({"user": "a"})["client_encoding"] == "UTF8"
    for parameters in ({"standard_conforming_strings": "off"},
                       {"options": r"-c\ x=1 -c standard_conforming_strings=off"},
                       {"options": "--backslash_quote=on"}, {"client_encoding": "auto"}):
        with pytest.raises(Refusal):
            startup_settings(parameters)
    check_setting("standard_conforming_strings", None, "RESET")  # back to the pinned value


def test_a_connection_that_does_not_report_a_pinned_value_is_refused(proxy: RunningProxy):
    endpoint = Endpoint.from_dsn(proxy.database.relay_dsn)

    async def run() -> None:
        with pytest.raises(BackendError, match="DateStyle"):
            await BackendConnection.connect(endpoint, {"DateStyle": "ISO, MDY"},
                                            DateStyle="SQL, DMY")
        connection = await BackendConnection.connect(endpoint, PINNED)
        assert connection.parameters["standard_conforming_strings"] == "on"
        assert connection.alive
        # A route nobody refused (here dpgate's own connection) turns it off: the
        # connection is no longer used, and the session gets a fresh one.
        await connection.fetch("SET standard_conforming_strings = off")
        assert connection.drifted and not connection.alive
        connection.close()

    asyncio.run(run())
