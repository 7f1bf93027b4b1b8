"""BI tools' start-up and schema-browsing SQL through dpgate, each with the driver the tool
uses: DBeaver and Metabase over pgjdbc, Superset over SQLAlchemy + psycopg2, Grafana as
plain simple queries (psycopg without parameters). The statements are in bi_queries/."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import sqlalchemy

from tests.clients.conftest import DEMO_TABLES, Analyst
from tests.clients.test_jdbc import run_java

pytestmark = pytest.mark.end_to_end

QUERIES = Path(__file__).with_name("bi_queries")


@dataclass(frozen=True)
class Statement:
    sql: str
    expected: frozenset[str]  # values the result must contain
    line: int

    def check(self, tool: str, cells: set[str]) -> None:
        missing = self.expected - cells
        assert not missing, f"{tool}.sql line {self.line}: {sorted(missing)} not in the result"


def statements(tool: str) -> list[Statement]:
    """The statements of bi_queries/TOOL.sql: each ends with ';' at the end of a line;
    a `-- expect: a, b` comment inside it lists values its result must contain."""
    text = (QUERIES / f"{tool}.sql").read_text()
    found, line = [], 1
    for chunk in re.split(r";[ \t]*\n", text):
        expected: set[str] = set()
        code = []
        for row in chunk.splitlines():
            if row.lstrip().startswith("--"):
                if row.lstrip().startswith("-- expect:"):
                    expected |= {value.strip() for value in row.split(":", 1)[1].split(",")}
            elif row.strip():
                code.append(row)
        if code:
            first = line + chunk[:chunk.index(code[0])].count("\n")
            found.append(Statement("\n".join(code), frozenset(expected), first))
        line += chunk.count("\n") + 1
    return found


def replay_over_pgjdbc(tool: str, analyst: Analyst) -> None:
    replayed = statements(tool)
    output = run_java("CatalogReplay.java", analyst,
                      stdin="\0".join(statement.sql for statement in replayed)).stdout
    results = output.splitlines()
    assert len(results) == len(replayed), output
    failures = []
    for statement, result in zip(replayed, results, strict=True):
        status, *fields = result.split("\t")
        if status != "OK":
            failures.append(f"{tool}.sql line {statement.line}: {' '.join(fields)[:300]}")
            continue
        statement.check(tool, set(fields[1:]))
    assert not failures, "\n".join(failures)


def test_dbeaver_browses_the_schema_over_pgjdbc(analyst: Analyst):
    replay_over_pgjdbc("dbeaver", analyst)


def test_metabase_syncs_the_database_over_pgjdbc(analyst: Analyst):
    replay_over_pgjdbc("metabase", analyst)


def test_metabase_sees_every_table_as_selectable(analyst: Analyst):
    """Metabase syncs only tables its privilege query says the user may SELECT from."""
    (privileges,) = [statement for statement in statements("metabase")
                     if "table_privileges" in statement.sql]
    with psycopg.connect(analyst.dsn, autocommit=True) as connection:
        cursor = connection.execute(privileges.sql)
        names = [column.name for column in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor]
    selectable = {row["table"] for row in rows if row["schema"] == "public" and row["select"]}
    assert DEMO_TABLES <= selectable


def test_grafana_pickers_as_simple_queries(analyst: Analyst):
    with psycopg.connect(analyst.dsn, autocommit=True) as connection:
        # Grafana's health check is the driver's ping: an empty (comment-only) query.
        ping = connection.pgconn.exec_(b"-- ping")
        assert ping.status == psycopg.pq.ExecStatus.EMPTY_QUERY
        for statement in statements("grafana"):
            cells = {str(value) for row in connection.execute(statement.sql) for value in row}
            statement.check("grafana", cells)


@pytest.fixture
def superset_engine(analyst: Analyst):
    engine = sqlalchemy.create_engine(analyst.dsn.replace("postgresql://",
                                                          "postgresql+psycopg2://"))
    yield engine
    engine.dispose()


def test_superset_inspects_the_database_and_charts(superset_engine):
    inspector = sqlalchemy.inspect(superset_engine)
    assert "public" in inspector.get_schema_names()
    assert DEMO_TABLES <= set(inspector.get_table_names("public"))
    assert inspector.get_view_names("public") == []
    assert inspector.get_materialized_view_names("public") == []
    for table in sorted(DEMO_TABLES):
        assert inspector.get_columns(table, "public")
        assert inspector.get_pk_constraint(table, "public")["constrained_columns"]
        inspector.get_indexes(table, "public")
        assert inspector.get_table_comment(table, "public") == {"text": None}
    foreign = inspector.get_foreign_keys("orders", "public")
    assert {key["referred_table"] for key in foreign} == {"customers", "products"}
    with superset_engine.connect() as connection:
        for statement in statements("superset"):
            result = connection.execute(sqlalchemy.text(statement.sql))
            statement.check("superset", {str(value) for row in result for value in row})
