"""Differential tests: every query of tests/sql_corpus.py through dpgate and
directly on PostgreSQL.

The proxy under test is one of the tests' own, set up so that its noise is zero: no
analyst shift ([0, 0]) and ε = 10¹⁵ per query. At that ε a count's discrete Laplace noise
is 0 except with probability below e^(−10¹⁴), and a sum's grid noise stays below 10⁻⁸, under
the six decimals a released real keeps. No code path is added to dpgate for this: nothing
can switch it on in production.

An answered query must return PostgreSQL's column names, types and rows. By design,
a histogram over a declared domain also lists the domain's empty keys, key
selection leaves out groups below its threshold, and the exponential mechanism picks
grid points: those answers are compared by inclusion, or by columns only. Where
PostgreSQL fails, dpgate must fail with PostgreSQL's SQLSTATE. Every other refusal is
listed in docs/sql-coverage.md, which the module's last test writes and checks.
"""

from __future__ import annotations

import datetime as dt
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
import sqlglot
from sqlglot import exp

from proxy.admin.cli_analysis import explain_on_database
from proxy.config import load_config
from rewriter.policy.model import Policy
from rewriter.sensitivity.metrics import Metrics
from tests.conftest import (
    DemoDatabase,
    free_port,
    write_config,
)
from tests.proxies import EXACT_EPSILON, zero_noise_proxy
from tests.sql_corpus import REFUSED_ON_PURPOSE, corpus

pytestmark = pytest.mark.end_to_end

COVERAGE = Path(__file__).resolve().parent.parent / "docs" / "sql-coverage.md"
ANALYST, PASSWORD = "dora", "dora-pw"


@dataclass
class Outcome:
    columns: list[tuple[str, int]] = field(default_factory=list)
    rows: list[tuple] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    sqlstate: str | None = None
    message: str = ""
    hint: str = ""


@pytest.fixture(scope="module")
def exact_dsn(demo_database: DemoDatabase, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[str]:
    with zero_noise_proxy(tmp_path_factory.mktemp("differential"), demo_database, ANALYST,
                          PASSWORD) as dsn:
        yield dsn


def run(dsn: str, sql: str, connection: psycopg.Connection | None = None) -> Outcome:
    """The statement's outcome on a new connection to `dsn`, or on `connection` (kept open
    across statements: the corpus changes no session state)."""
    if connection is None:
        with psycopg.connect(dsn, autocommit=True) as new:
            return run(dsn, sql, new)
    outcome = Outcome()

    def notice(diagnostic: psycopg.errors.Diagnostic) -> None:
        outcome.notices.append(diagnostic.message_primary or "")
    connection.add_notice_handler(notice)
    try:
        cursor = connection.execute(sql)
        if cursor.description is not None:
            outcome.columns = [(d.name, d.type_code) for d in cursor.description]
            outcome.rows = [tuple(_normal(v) for v in row) for row in cursor.fetchall()]
    except psycopg.Error as error:
        outcome.sqlstate = error.sqlstate or "?"
        outcome.message = error.diag.message_primary or str(error)
        outcome.hint = error.diag.message_hint or ""
    finally:
        connection.remove_notice_handler(notice)
    return outcome


def _normal(value: object) -> object:
    """Reals as exact Decimals, compared to within the six decimals a released real keeps."""
    if isinstance(value, (Decimal, float)):
        return Decimal(value)
    return value


TOLERANCE = Decimal("0.000002")


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(
        abs(x - y) <= TOLERANCE if isinstance(x, Decimal) and isinstance(y, Decimal) else x == y
        for x, y in zip(a, b, strict=True))


def _exact_part(row: tuple) -> tuple:
    return tuple(v for v in row if not isinstance(v, Decimal))


def contained(part: list[tuple], whole: list[tuple], ordered: bool) -> bool:
    """Whether every row of `part` is a row of `whole` (in the same order if `ordered`)."""
    if ordered:
        rows = iter(whole)
        return all(any(_same(row, other) for other in rows) for row in part)
    buckets: dict[tuple, list[tuple]] = {}
    for row in whole:
        buckets.setdefault(_exact_part(row), []).append(row)
    for row in part:
        candidates = buckets.get(_exact_part(row), [])
        match = next((i for i, other in enumerate(candidates) if _same(row, other)), None)
        if match is None:
            return False
        candidates.pop(match)
    return True


def compare(sql: str, direct: Outcome, proxied: Outcome, unlimited: Outcome | None = None
            ) -> tuple[str, str]:
    """(status, detail): status is "supported", "postgres error", "refused for privacy",
    "refused on purpose" (tests/sql_corpus.py's REFUSED_ON_PURPOSE), "not yet", "columns
    only" (a column probe) or "MISMATCH". `unlimited`: for a LIMIT or OFFSET without
    ORDER BY, which rows come back is PostgreSQL's arbitrary choice; dpgate's must then be
    as many, each a row of the statement without them."""
    if proxied.sqlstate is not None:
        if direct.sqlstate is not None:
            if direct.sqlstate != proxied.sqlstate:
                return "MISMATCH", (f"PostgreSQL {direct.sqlstate} {direct.message}, dpgate "
                                    f"{proxied.sqlstate} {proxied.message}")
            return "postgres error", f"{proxied.sqlstate}: {proxied.message}"
        status = "refused for privacy" if proxied.sqlstate == "42501" else \
            "refused on purpose" if sql in REFUSED_ON_PURPOSE else "not yet"
        return status, f"{proxied.sqlstate}: {proxied.message}"
    if direct.sqlstate is not None:
        if sql.upper().startswith("SHOW DP."):
            return "supported", "a dpgate setting"
        return "MISMATCH", f"PostgreSQL fails ({direct.message}), dpgate answers"
    if proxied.columns != direct.columns:
        return "MISMATCH", f"columns {proxied.columns} instead of {direct.columns}"
    notice = " ".join(proxied.notices)
    ordered = " ORDER BY " in sql.upper()
    if "only the statement's columns, no row" in notice:  # a column probe
        return ("columns only", "refused as a question; asked with LIMIT 0 or 1, its "
                "columns are answered, no row") if not proxied.rows else \
            ("MISMATCH", "a column probe returned rows")
    if "exponential mechanism" in notice:
        return "supported", "chosen by the exponential mechanism: columns compared"
    if "every key of the declared domain" in notice:
        return ("supported", "the whole declared domain") \
            if contained(direct.rows, proxied.rows, ordered) else \
            ("MISMATCH", "rows of PostgreSQL missing from the filled histogram")
    if "key selection" in notice:
        return ("supported", "groups above the key-selection threshold") \
            if contained(proxied.rows, direct.rows, ordered) else \
            ("MISMATCH", "rows that PostgreSQL does not return")
    same = len(proxied.rows) == len(direct.rows) and \
        contained(proxied.rows, (unlimited or direct).rows, ordered)
    return ("supported", "exact") if same else \
        ("MISMATCH", f"rows {proxied.rows[:5]} instead of {direct.rows[:5]}")


QUERIES = corpus()


def unordered_limit(sql: str) -> str | None:
    """A SELECT with LIMIT or OFFSET and no ORDER BY, without them; else None."""
    try:
        tree = sqlglot.parse_one(sql, dialect="postgres")
    except sqlglot.errors.ParseError:
        return None
    if not isinstance(tree, exp.Select) or tree.args.get("order") is not None or \
            (tree.args.get("limit") is None and tree.args.get("offset") is None):
        return None
    tree.set("limit", None)
    tree.set("offset", None)
    return tree.sql(dialect="postgres")


@dataclass
class Differential:
    """Runs corpus queries through dpgate and directly on PostgreSQL, each once, on two
    connections kept open (the corpus changes no session state), and keeps how each
    compared for the coverage page."""

    to_postgres: psycopg.Connection
    to_dpgate: psycopg.Connection
    policy: Policy
    database: DemoDatabase
    # SQL -> (status, detail, why `dpgate explain` disagrees or None)
    results: dict[str, tuple[str, str, str | None]] = field(default_factory=dict)

    def check(self, sql: str) -> tuple[str, str, str | None]:
        if sql not in self.results:
            direct, proxied = run("", sql, self.to_postgres), run("", sql, self.to_dpgate)
            whole = unordered_limit(sql) if direct.sqlstate is proxied.sqlstate is None else None
            unlimited = run("", whole, self.to_postgres) if whole is not None else None
            self.results[sql] = (*compare(sql, direct, proxied, unlimited),
                                 explain_disagrees(sql, proxied, self.policy, self.database))
        return self.results[sql]


@pytest.fixture(scope="module")
def differential(exact_dsn: str, demo_database: DemoDatabase,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[Differential]:
    policy = _proxy_policy(tmp_path_factory.mktemp("policy"), demo_database)
    with psycopg.connect(demo_database.admin_dsn, autocommit=True) as to_postgres, \
            psycopg.connect(exact_dsn, autocommit=True) as to_dpgate:
        yield Differential(to_postgres, to_dpgate, policy, demo_database)


# One test per query: a failure names its statement, and with `--dist loadfile` (which
# sends the modules with the most tests first) the corpus starts at once on one worker
# instead of last, when it alone would bound the run.
@pytest.mark.parametrize(("group", "sql"), QUERIES,
                         ids=[f"{i}-{group}" for i, (group, _) in enumerate(QUERIES)])
def test_a_corpus_query_answers_as_postgresql_does(differential: Differential, group: str,
                                                    sql: str):
    status, detail, disagreement = differential.check(sql)
    assert status != "MISMATCH", f"{sql}\n    {detail}"
    assert disagreement is None, f"dpgate explain and the proxy disagree: {sql}\n" \
        f"    {disagreement}"


def test_the_coverage_page_lists_every_query(differential: Differential):
    """docs/sql-coverage.md from the whole corpus: the results of the tests above, and
    any query not run yet (this test run alone) run now."""
    assert len(QUERIES) >= 300
    results = [(group, sql, *differential.check(sql)[:2]) for group, sql in QUERIES]
    written = coverage_table(results)
    if not COVERAGE.exists() or COVERAGE.read_text() != written:
        COVERAGE.write_text(written)
    tracked = subprocess.run(["git", "diff", "--quiet", "--", str(COVERAGE)],
                             cwd=COVERAGE.parent, check=False)
    assert tracked.returncode == 0, f"{COVERAGE} was out of date: regenerated, commit it"


@pytest.mark.parametrize("sql", sorted(REFUSED_ON_PURPOSE))
def test_a_refusal_on_purpose_is_argued_and_says_what_to_write(differential: Differential,
                                                                sql: str):
    assert sql in dict((s, g) for g, s in QUERIES)
    status, detail, _ = differential.check(sql)
    assert status == "refused on purpose", detail
    proxied = run("", sql, differential.to_dpgate)
    assert proxied.hint, f"{sql}: refused without a hint"


def _proxy_policy(directory: Path, database: DemoDatabase) -> Policy:
    """The policy of the proxy under test, loaded from the same configuration."""
    config = directory / "dpgate.toml"
    write_config(config, free_port(), directory / "ledger.sqlite3", database)
    return load_config(str(config)).policy


def explain_disagrees(sql: str, proxied: Outcome, policy: Policy, database: DemoDatabase
                      ) -> str | None:
    """Why `dpgate explain` (with the database, as the CLI runs it given a DSN) does not
    say what the proxy did: answered, or refused with the same SQLSTATE. PostgreSQL's own
    errors (a misspelt function) are PostgreSQL's to find, not the analysis's."""
    if proxied.sqlstate is not None and proxied.sqlstate not in ("42501", "0A000"):
        return None
    report = explain_on_database(sql, policy, Metrics(), database.reader_dsn,
                                 float(EXACT_EPSILON), 1e-6)
    if proxied.sqlstate is None:
        return None if report["supported"] else f"explain refuses: {report.get('error')}"
    if report["supported"]:
        return f"explain answers; the proxy refused with {proxied.sqlstate}"
    if report["sqlstate"] != proxied.sqlstate:
        return f"explain {report['sqlstate']}, the proxy {proxied.sqlstate}"
    return None


def coverage_table(results: list[tuple[str, str, str, str]]) -> str:
    counts = Counter(status for _, _, status, _ in results)
    lines = [
        "# SQL coverage",
        "",
        "Generated by `tests/test_differential.py` (do not edit): every query of",
        "`tests/sql_corpus.py` run through dpgate with zero noise and directly on PostgreSQL.",
        "*supported*: answered with PostgreSQL's columns, types and rows (a histogram over a",
        "declared domain also lists its empty keys); *postgres error*: PostgreSQL fails too,",
        "and dpgate answers with its SQLSTATE; *refused for privacy* (42501), *refused on",
        "purpose* (no sound answer as written: docs/queries.md argues each) and *not yet*",
        "(dpgate does not answer this shape yet) name the reason dpgate gives; *columns only*:",
        "a statement refused as a question, asked with LIMIT 0 or 1 as BI tools ask for a",
        "query's columns, gets PostgreSQL's columns and no row (docs/bi-tools.md).",
        "",
        "| status | queries |",
        "|---|---|",
        *(f"| {status} | {counts[status]} |" for status in sorted(counts)),
        f"| total | {len(results)} |",
        "",
        "| group | query | status | detail |",
        "|---|---|---|---|",
    ]
    for group, sql, status, detail in results:
        lines.append(f"| {group} | `{_cell(sql)}` | {status} | {_cell(detail)} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


@pytest.mark.unit
def test_rows_compare_as_released():
    assert _same((1, Decimal("2.5")), (1, Decimal(2.5000001)))
    assert not _same((1, Decimal("2.5")), (2, Decimal("2.5")))
    assert contained([(1,), (3,)], [(1,), (2,), (3,)], ordered=True)
    assert not contained([(3,), (1,)], [(1,), (2,), (3,)], ordered=True)
    assert contained([(3,), (1,)], [(1,), (2,), (3,)], ordered=False)
    assert not contained([(1,), (1,)], [(1,), (2,)], ordered=False)
    assert unordered_limit("SELECT k, count(*) FROM t GROUP BY k LIMIT 2") == \
        "SELECT k, COUNT(*) FROM t GROUP BY k"
    assert unordered_limit("SELECT k FROM t ORDER BY k LIMIT 2") is None
    assert _normal(dt.date(2024, 1, 1)) == dt.date(2024, 1, 1)
