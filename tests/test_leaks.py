"""Issue 6, "nothing leaks": every channel beside the noisy answer is refused or neutralised,
seen by real clients (psycopg, psql) through the running proxy, and PostgreSQL's own
privileges stop the relay role where the classifier might not."""

from __future__ import annotations

import json
import re

import psycopg
import pytest
from psycopg import errors

from tests.conftest import Postgres, RunningProxy
from tests.test_end_to_end import admin_scalar, connect, psql
from tests.test_ledger_proxy import fresh_analyst

pytestmark = pytest.mark.end_to_end

FLOAT4, INT4, INT8 = 700, 23, 20


@pytest.fixture(scope="module")
def analysed(proxy: RunningProxy) -> RunningProxy:
    """The demo tables with fresh statistics, so that a leak would show real numbers."""
    with psycopg.connect(proxy.database.admin_dsn, autocommit=True) as connection:
        connection.execute("ANALYZE orders, customers")
    assert admin_scalar(proxy, "SELECT reltuples FROM pg_class WHERE relname = 'orders'") > 0
    return proxy


def one_row(proxy: RunningProxy, query: str) -> tuple[tuple, list[tuple[str, int]]]:
    with connect(proxy.dsn("alice")) as connection:
        cursor = connection.execute(query)
        rows = cursor.fetchall()
    assert len(rows) == 1, rows
    return rows[0], [(column.name, column.type_code) for column in cursor.description]


def refused(proxy: RunningProxy, statement: str) -> str:
    """The message of the 42501 refusal of `statement`; the session goes on after it."""
    with connect(proxy.dsn("alice")) as connection:
        with pytest.raises(errors.InsufficientPrivilege) as refusal:
            connection.execute(statement)
        assert connection.execute("SELECT 1").fetchone() == (1,)
    return str(refusal.value)


# -- neutralised: row estimates and statistics counters ------------------------------------

def test_the_relay_role_itself_sees_row_estimates(analysed: RunningProxy):
    """Why dpgate must neutralise them: PostgreSQL shows them to every role."""
    with psycopg.connect(analysed.database.relay_dsn) as connection:
        estimate = connection.execute(
            "SELECT reltuples FROM pg_class WHERE relname = 'orders'").fetchone()[0]
    assert estimate == pytest.approx(admin_scalar(analysed, "SELECT count(*) FROM orders"),
                                     rel=0.1)


@pytest.mark.parametrize("query", [
    "SELECT relname, reltuples, relpages, relallvisible FROM pg_class WHERE relname = 'orders'",
    "SELECT c.relname, (c.reltuples), c.relpages, relallvisible FROM pg_catalog.pg_class c "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'orders'",
    "SELECT relname, reltuples, relpages, relallvisible FROM (SELECT * FROM pg_class) s "
    "WHERE relname = 'orders'",
    "SELECT relname, reltuples, relpages, relallvisible FROM pg_class WHERE relname = 'orders' "
    "AND reltuples >= -1 ORDER BY reltuples",
    "SELECT b, k, j, l FROM pg_class AS c(a, b, c, d, e, f, g, h, i, j, k, l) WHERE b = 'orders'",
])
def test_pg_class_row_estimates_come_back_unknown(analysed: RunningProxy, query: str):
    row, columns = one_row(analysed, query)
    assert row == ("orders", -1.0, 0, 0)
    assert [type_oid for _, type_oid in columns][1:] == [FLOAT4, INT4, INT4]


def test_select_star_over_pg_class_keeps_every_column_but_the_estimates(analysed: RunningProxy):
    query = "SELECT * FROM pg_catalog.pg_class WHERE relname = 'orders'"
    row, columns = one_row(analysed, query)
    with psycopg.connect(analysed.database.admin_dsn) as connection:
        cursor = connection.execute(query)
        truth = dict(zip([column.name for column in cursor.description], cursor.fetchone(),
                         strict=True))
    assert [name for name, _ in columns] == list(truth)
    values = dict(zip(truth, row, strict=True))
    assert (values["reltuples"], values["relpages"], values["relallvisible"]) == (-1.0, 0, 0)
    for stable in ("oid", "relname", "relnamespace", "relkind", "relnatts", "relacl"):
        assert values[stable] == truth[stable]


def test_a_whole_pg_class_row_is_neutralised_too(analysed: RunningProxy):
    row, _ = one_row(analysed, "SELECT to_jsonb(c) ->> 'reltuples', to_jsonb(c) ->> 'relname' "
                     "FROM pg_class c WHERE relname = 'orders'")
    assert row == ("-1", "orders")


def test_a_filter_on_an_estimate_cannot_probe_it(analysed: RunningProxy):
    row, _ = one_row(analysed, "SELECT count(*) FROM pg_class WHERE relname = 'orders' "
                     "AND reltuples BETWEEN 1 AND 1e9")
    assert row == (0,)


@pytest.mark.parametrize("query", [
    "SELECT n_live_tup, n_dead_tup, seq_tup_read, n_tup_ins, n_mod_since_analyze "
    "FROM pg_stat_user_tables WHERE relname = 'orders'",
    "SELECT s.n_live_tup, s.n_dead_tup, s.seq_tup_read, s.n_tup_ins, s.n_mod_since_analyze "
    "FROM pg_catalog.pg_stat_all_tables s JOIN pg_class c ON c.oid = s.relid "
    "WHERE c.relname = 'orders'",
    "SELECT t.live, 0::bigint, 0::bigint, 0::bigint, 0::bigint FROM (SELECT relname, "
    "n_live_tup AS live FROM pg_stat_user_tables) t WHERE t.relname = 'orders'",
])
def test_statistics_counters_come_back_as_reset(analysed: RunningProxy, query: str):
    assert admin_scalar(analysed, "SELECT n_tup_ins FROM pg_stat_user_tables "
                        "WHERE relname = 'orders'") > 0
    row, columns = one_row(analysed, query)
    assert row == (0, 0, 0, 0, 0)
    assert {type_oid for _, type_oid in columns} == {INT8}


def test_select_star_over_pg_stat_user_tables_keeps_its_columns(analysed: RunningProxy):
    query = "SELECT * FROM pg_stat_user_tables WHERE relname = 'orders'"
    row, columns = one_row(analysed, query)
    with psycopg.connect(analysed.database.admin_dsn) as connection:
        names = [c.name for c in connection.execute(query).description]
    assert [name for name, _ in columns] == names
    values = dict(zip(names, row, strict=True))
    assert values["relname"] == "orders" and values["schemaname"] == "public"
    assert {values[n] for n in names if n not in ("relid", "relname", "schemaname")} <= {0, None}


@pytest.mark.parametrize("query, expected", [
    ("SELECT heap_blks_read + heap_blks_hit FROM pg_statio_user_tables "
     "WHERE relname = 'orders'", 0),
    ("SELECT sum(idx_scan) FROM pg_stat_user_indexes WHERE relname = 'orders'", 0),
    ("SELECT tup_inserted FROM pg_stat_database WHERE datname = current_database()", 0),
])
def test_io_index_and_database_counters_are_neutralised(analysed: RunningProxy, query: str,
                                                        expected: int):
    assert one_row(analysed, query)[0] == (expected,)


def test_psql_reads_row_counts_like_a_bi_tool(analysed: RunningProxy):
    """Metabase and pgAdmin need these statements to succeed, not to be refused."""
    result = psql(analysed, "alice",
                  "SELECT relname, n_live_tup FROM pg_stat_user_tables ORDER BY relname",
                  "SELECT relname, reltuples::bigint AS estimate FROM pg_class "
                  "WHERE relname = 'orders'")
    assert result.returncode == 0, result.stderr
    assert re.search(r"\borders\s*\|\s*0\n", result.stdout)
    assert re.search(r"\borders\s*\|\s*-1\n", result.stdout)


# -- refused: what cannot be neutralised -----------------------------------------------------

@pytest.mark.parametrize("statement, words", [
    ("SELECT most_common_vals FROM pg_stats WHERE tablename = 'orders'", "most common values"),
    ("SELECT histogram_bounds FROM pg_catalog.pg_stats", "histograms"),
    ("SELECT count(*) FROM pg_statistic", "pg_statistic"),
    ("SELECT * FROM pg_stats_ext", "pg_stats_ext"),
    ("SELECT * FROM pg_statistic_ext_data", "pg_statistic_ext_data"),
    ("SELECT * FROM pg_stat_io", "pg_stat_io"),
    ("SELECT * FROM pg_stat_user_functions", "pg_stat_user_functions"),
    ("SELECT * FROM pg_largeobject", "large objects"),
    ("WITH s AS (SELECT * FROM pg_stats) SELECT count(*) FROM s", "pg_stats"),
])
def test_value_statistics_are_refused(proxy: RunningProxy, statement: str, words: str):
    assert words in refused(proxy, statement)


@pytest.mark.parametrize("function, unknown", [
    ("pg_relation_size('orders')", None), ("pg_table_size('orders')", None),
    ("pg_indexes_size('orders')", None), ("pg_total_relation_size('orders')", None),
    ("pg_size_pretty(pg_total_relation_size('orders'))", None),
    ("pg_catalog.pg_relation_size('orders', 'main')", None),
    ("\"pg_table_size\"('orders')", None), ("pg_database_size(current_database())", None),
    ("pg_column_size(1)", None), ("pg_stat_get_live_tuples('orders'::regclass)", 0),
    ("pg_catalog.pg_stat_get_tuples_inserted('orders'::regclass)", 0),
])
def test_sizes_and_row_counters_come_back_unknown(analysed: RunningProxy, function: str,
                                                  unknown: int | None):
    assert admin_scalar(analysed, f"SELECT {function}") not in (None, 0, "0 bytes")
    assert one_row(analysed, f"SELECT {function}")[0] == (unknown,)


def test_psql_lists_tables_with_sizes_left_blank(analysed: RunningProxy):
    r"""psql's \dt+ and \l+ call pg_table_size and pg_database_size."""
    result = psql(analysed, "alice", r"\dt+ orders", r"\l+ dpgate_e2e")
    assert result.returncode == 0, result.stderr
    assert re.search(r"\| orders\s*\| table", result.stdout)
    assert not re.search(r"\d+ (bytes|kB|MB)", result.stdout)


@pytest.mark.parametrize("function", [
    "pg_stat_get_backend_activity(1)", "pg_stat_get_xact_tuples_inserted(1)",
    "pg_relation_size('orders') FROM orders", "pgstattuple('orders')", "pg_relpages('orders')",
    "get_raw_page('orders', 0)",
    "heap_page_items(get_raw_page('orders', 0))", "bt_metap('orders_pkey')",
    "pg_visibility_map('orders')", "pg_freespace('orders')", "verify_heapam('orders')",
    "pg_get_wal_records_info('0/0', '0/1')", "pg_sequence_last_value('s'::regclass)",
    "pg_mcv_list_items(NULL)", "pg_get_statisticsobjdef_expressions(1)",
])
def test_size_and_page_functions_are_refused(proxy: RunningProxy, function: str):
    assert "is refused" in refused(proxy, f"SELECT {function}")


@pytest.mark.parametrize("function", [
    "query_to_xml('SELECT * FROM orders', true, true, '')",
    "query_to_xml_and_xmlschema('SELECT 1', true, true, '')",
    "cursor_to_xml('c', 1, true, true, '')", "table_to_xml('orders', true, true, '')",
    "xpath('//text()', query_to_xml('EXPLAIN SELECT * FROM orders', true, true, ''))",
    "dblink('dbname=dpgate_e2e', 'SELECT count(*) FROM orders')",
    "pg_read_file('/etc/passwd')", "pg_read_binary_file('PG_VERSION')", "pg_ls_dir('.')",
    "pg_stat_file('PG_VERSION')", "lo_import('/etc/passwd')", "lo_export(1, '/tmp/x')",
    "lo_get(1)", "lo_open(1, 262144)", "loread(0, 10)",
    "ts_stat('SELECT to_tsvector(name) FROM customers')",
    "ts_rewrite('a'::tsquery, 'SELECT ''a''::tsquery, ''b''::tsquery')",
])
def test_functions_that_run_sql_text_or_read_files_are_refused(proxy: RunningProxy,
                                                              function: str):
    assert "is refused" in refused(proxy, f"SELECT {function}")


@pytest.mark.parametrize("statement", [
    "EXPLAIN SELECT 1", "EXPLAIN ANALYZE SELECT count(*) FROM orders",
    "explain (format json) SELECT * FROM products", "/* tools */ EXPLAIN VERBOSE TABLE orders",
    "EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM orders WHERE customer_id = 42",
])
def test_explain_is_refused_in_every_form(proxy: RunningProxy, statement: str):
    assert "EXPLAIN is refused" in refused(proxy, statement)


@pytest.mark.parametrize("statement", [
    "COPY orders TO STDOUT", "COPY (SELECT * FROM orders) TO STDOUT",
    "COPY (SELECT relname FROM pg_class) TO STDOUT", "COPY products FROM STDIN",
])
def test_copy_is_refused(proxy: RunningProxy, statement: str):
    assert "COPY is refused" in refused(proxy, statement)


@pytest.mark.parametrize("command", [
    r"\copy orders to stdout", r"\copy (SELECT * FROM orders) to stdout",
    r"\copy products from /dev/null",
])
def test_psql_backslash_copy_is_refused(proxy: RunningProxy, command: str):
    before = admin_scalar(proxy, "SELECT count(*) FROM products")
    result = psql(proxy, "alice", command)
    assert result.returncode != 0
    assert "42501" in result.stderr and "COPY is refused" in result.stderr
    assert result.stdout == ""
    assert admin_scalar(proxy, "SELECT count(*) FROM products") == before


@pytest.mark.parametrize("statement", [
    "CREATE TEMP TABLE leak AS SELECT * FROM orders",
    "CREATE TEMPORARY TABLE leak AS SELECT relname FROM pg_class",
    "SELECT * INTO TEMP leak FROM orders", "SELECT count(*) INTO leak FROM orders",
    "SELECT relname INTO leak FROM pg_class UNION SELECT 'x'",
])
def test_temporary_tables_and_select_into_are_refused(proxy: RunningProxy, statement: str):
    with connect(proxy.dsn("alice")) as connection:
        with pytest.raises(errors.InsufficientPrivilege):
            connection.execute(statement)
        # Temporary tables live in the session: the relay session holds none.
        assert connection.execute("SELECT to_regclass('leak')").fetchone() == (None,)


@pytest.mark.parametrize("statement, words", [
    ("DO $$ BEGIN PERFORM count(*) FROM orders; END $$", "DO is refused"),
    ("CALL some_procedure()", "CALL is refused"),
    ("PREPARE total AS SELECT count(*) FROM orders", "PREPARE is refused"),
    ("PREPARE harmless AS SELECT 1", "PREPARE is refused"),
    ("EXECUTE total", "EXECUTE is refused"),
])
def test_procedural_code_and_prepared_statements_are_refused(proxy: RunningProxy,
                                                            statement: str, words: str):
    with connect(proxy.dsn("alice")) as connection:
        spent = connection.execute("SHOW dp.budget").fetchone()[1]
        with pytest.raises(errors.InsufficientPrivilege) as refusal:
            connection.execute(statement)
        assert words in str(refusal.value)
        assert connection.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)
        assert connection.execute("SHOW dp.budget").fetchone()[1] == spent


def test_a_cursor_over_catalogs_is_relayed_and_neutralised(analysed: RunningProxy):
    with connect(analysed.dsn("alice")) as connection:
        connection.execute("BEGIN")
        connection.execute("DECLARE c NO SCROLL CURSOR FOR SELECT relname, reltuples "
                           "FROM pg_class WHERE relname IN ('orders', 'customers') ORDER BY 1")
        assert connection.execute("FETCH 1 FROM c").fetchall() == [("customers", -1.0)]
        connection.execute("MOVE FORWARD 0 IN c")
        assert connection.execute("FETCH ALL FROM c").fetchall() == [("orders", -1.0)]
        connection.execute("CLOSE c")
        connection.execute("COMMIT")


def test_a_cursor_over_private_tables_is_refused_and_charges_nothing(proxy: RunningProxy):
    with connect(proxy.dsn("alice")) as connection:
        spent = connection.execute("SHOW dp.budget").fetchone()[1]
        connection.execute("BEGIN")
        with pytest.raises(errors.InsufficientPrivilege) as refusal:
            connection.execute("DECLARE c CURSOR FOR SELECT count(*) FROM orders")
        assert "cursor over private tables" in str(refusal.value)
        connection.execute("ROLLBACK")
        assert connection.execute("SHOW dp.budget").fetchone()[1] == spent


def test_psql_fetch_count_works_on_catalogs_and_is_refused_on_private_tables(
        analysed: RunningProxy):
    """psql's FETCH_COUNT wraps each query in DECLARE _psql_cursor … FETCH … CLOSE."""
    catalog = psql(analysed, "alice", "\\set FETCH_COUNT 1",
                   "SELECT relname, reltuples FROM pg_class WHERE relname = 'orders'")
    assert catalog.returncode == 0, catalog.stderr
    assert re.search(r"\borders\s*\|\s*-1\n", catalog.stdout)
    private = psql(analysed, "alice", "\\set FETCH_COUNT 1",
                   "SELECT count(*) FROM orders WHERE quantity = 5")
    assert private.returncode != 0 and "FETCH_COUNT" in private.stderr


@pytest.mark.parametrize("statement", [
    "SELECT count(*) FROM orders o JOIN pg_class c ON c.oid = o.customer_id",
    "SELECT count(*) FROM orders, pg_class WHERE relname = 'orders' AND reltuples > 1000",
    "SELECT relname FROM pg_class UNION ALL SELECT name FROM customers",
    "SELECT relname, (SELECT count(*) FROM orders) FROM pg_class",
    "SELECT count(*) FROM orders WHERE quantity IN (SELECT n_live_tup FROM pg_stat_user_tables)",
    "WITH c AS (SELECT reltuples FROM pg_class) SELECT count(*) FROM orders, c",
])
def test_statements_mixing_catalogs_and_private_tables_are_refused(proxy: RunningProxy,
                                                                  statement: str):
    assert "cannot read catalogs" in refused(proxy, statement)


# -- errors while reading private rows ---------------------------------------------------------

@pytest.mark.parametrize("condition", ["customer_id::smallint = 1",
                                       "date_trunc('day', order_date, 'UTC') IS NULL",
                                       "order_date + 1 > '2024-01-01'"])
def test_expressions_that_can_fail_on_private_rows_are_refused_before_any_charge(
        proxy: RunningProxy, condition: str):
    name = fresh_analyst(proxy)
    with connect(proxy.dsn(name, name)) as connection:
        with pytest.raises(errors.FeatureNotSupported) as refusal:
            connection.execute(f"SELECT count(*) FROM orders WHERE {condition}")
        assert "private rows" in str(refusal.value)
        assert connection.execute("SHOW dp.budget").fetchone()[1] == 0


@pytest.mark.parametrize("condition", ["quantity / 0 = 1", "quantity::text = '1'",
                                       "order_id % 97 <> 1", "order_cost * quantity > 100",
                                       "-customer_id < 0"])
def test_arithmetic_on_private_rows_is_answered_in_a_total_form(
        proxy: RunningProxy, condition: str):
    """Rewritten so that no row can fail it (division by NULLIF, exact numeric)."""
    name = fresh_analyst(proxy)
    with connect(proxy.dsn(name, name)) as connection:
        (count,) = connection.execute(f"SELECT count(*) FROM orders WHERE {condition}"
                                      ).fetchone()
        assert isinstance(count, int)
        assert connection.execute("SHOW dp.budget").fetchone()[1] == pytest.approx(0.1)


@pytest.mark.end_to_end
@pytest.mark.parametrize("value", [None, "-7", "2.5", "2.50", "1e41"])
def test_a_clamped_parameter_keeps_postgresqls_value_and_its_null(postgres: Postgres,
                                                                   value: str | None):
    """A parameter in arithmetic is clamped to ±1e40 (its digits bounded, and so the work
    of what it multiplies); a NULL stays NULL, as in PostgreSQL (LEAST and GREATEST would
    have made it -1e40), and a value within the bound keeps its scale."""
    import sqlglot

    from rewriter.analysis.arithmetic import total_form

    node = sqlglot.parse_one("SELECT 3 * $1", read="postgres").expressions[0]
    total = total_form(node, lambda column: None).sql(dialect="postgres")
    with psycopg.connect(postgres.admin_dsn, autocommit=True,
                         cursor_factory=psycopg.RawCursor) as connection:
        (answer,) = connection.execute(f"SELECT ({total})::text", [value]).fetchone()
        # PostgreSQL's own 3 * $1, with the clamp only where it binds (1e41).
        (expected,) = connection.execute(
            "SELECT (3 * CASE WHEN $1::numeric > 1e40 THEN 1e40 ELSE $1::numeric END)"
            "::text", [value]).fetchone()
    assert answer == expected and (answer is None) == (value is None)


def test_what_postgresql_itself_rejects_gets_postgresqls_error_before_any_charge(
        proxy: RunningProxy):
    """A cast PostgreSQL cannot do fails at parse time, whatever the rows: its own words."""
    name = fresh_analyst(proxy)
    with connect(proxy.dsn(name, name)) as connection:
        with pytest.raises(errors.CannotCoerce, match="cannot cast type date to integer"):
            connection.execute("SELECT count(*) FROM orders WHERE CAST(order_date AS integer) = 1")
        assert connection.execute("SHOW dp.budget").fetchone()[1] == 0


@pytest.mark.parametrize("query, detail", [
    ("SELECT count(*) FROM orders WHERE date_trunc('nonsense', order_date) = '2024-01-01'",
     "nonsense"),
    ("SELECT count(*) FROM customers WHERE name LIKE '%\\'", "escape"),
])
def test_a_failure_on_private_rows_is_generic_and_keeps_its_charge(
        proxy: RunningProxy, query: str, detail: str):
    """Whether it fails can depend on the rows: no detail, no refund (or refused upfront)."""
    name = fresh_analyst(proxy)
    with connect(proxy.dsn(name, name)) as connection:
        with pytest.raises(psycopg.Error) as failure:
            connection.execute(query)
        spent = connection.execute("SHOW dp.budget").fetchone()[1]
    error = failure.value
    if error.sqlstate in ("42501", "0A000"):  # refused at classification: free
        assert spent == 0
        return
    assert error.sqlstate == "22000"
    assert detail not in str(error) and error.diag.message_detail is None
    assert "charge of epsilon 0.1 is kept" in str(error)
    assert spent == pytest.approx(0.1)
    charges = json.loads(proxy.cli("user", "show", name, "--json").stdout)["charges"]
    assert [charge["outcome"] for charge in charges] == ["failed"]


# -- defence in depth: the relay role on its own -----------------------------------------------

def test_the_relay_role_cannot_read_private_rows_or_their_statistics(analysed: RunningProxy):
    assert admin_scalar(analysed, "SELECT count(*) FROM pg_stats WHERE tablename = 'orders'") > 0
    with psycopg.connect(analysed.database.relay_dsn, autocommit=True) as connection:
        for statement in ("SELECT customer_id FROM orders LIMIT 1",
                          "SELECT query_to_xml('SELECT * FROM orders', true, true, '')",
                          "EXPLAIN SELECT * FROM orders",
                          "SELECT pg_read_file('PG_VERSION')",
                          "SELECT lo_import('/etc/hostname')"):
            with pytest.raises(errors.InsufficientPrivilege):
                connection.execute(statement)
        private_stats = connection.execute(
            "SELECT count(*) FROM pg_stats WHERE tablename IN ('orders', 'customers')")
        assert private_stats.fetchone() == (0,)
        # information_schema still lists private columns, which BI tools need.
        listed = connection.execute("SELECT count(*) FROM information_schema.columns "
                                    "WHERE table_name = 'orders'").fetchone()[0]
        assert listed == 6
