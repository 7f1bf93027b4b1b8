"""dpgate's reading of SQL text against PostgreSQL's own, on a generated corpus.

For every lexical setting and value dpgate accepts (rewriter/sql/lexical.py), a seeded corpus
of tricky query strings — backslashes, E'' and U&'' strings with UESCAPE, dollar quotes
with tags, nested comments, `--` and `;` inside strings, doubled quotes, multi-byte
characters, numbers, string continuation across newlines, several statements in one
string — goes both to PostgreSQL and through dpgate's classification. dpgate may refuse a
string; if it does not, then:

- PostgreSQL returns one result per statement dpgate found, and each statement's text
  as dpgate cut it, run alone, returns what PostgreSQL returned for it (boundaries);
- each statement's text as dpgate will relay it returns the same rows (the relay);
- the SQL dpgate writes back from its tree returns the same rows (the literals' values,
  as a private statement's rewrite would carry them).

The values dpgate refuses are checked on every route in test_lexical_settings.py and, for
the rules alone, below.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

import psycopg
import pytest

from rewriter.analysis.classify import classify, parse_query
from rewriter.errors import Refusal
from rewriter.plan import Relay
from rewriter.sql.lexer import as_postgresql_reads
from rewriter.sql.lexical import PINNED, check_setting, startup_settings
from tests.conftest import Postgres
from tests.test_flex import POLICY

pytestmark = pytest.mark.end_to_end

SEED, STRINGS = 23, 300
MULTIBYTE = ["é", "日本", "😀", "\u00a0", "ß", "\u2028", "中", "ā"]
# Every setting value dpgate lets a session have, as startup options of the connection.
ACCEPTED = [
    {**PINNED, "escape_string_warning": "on"},
    {**PINNED, "escape_string_warning": "off"},
    {**PINNED, "client_encoding": "SQL_ASCII"},
]


def _pieces(rng: random.Random, pool: list[str], most: int) -> str:
    return "".join(rng.choice(pool) for _ in range(rng.randint(0, most)))


def _plain(rng: random.Random) -> str:
    return "'" + _pieces(rng, ["a", "''", "\\", "--", "/*", "*/", ";", "$$", '"', "\n", " ",
                               *MULTIBYTE], 6) + "'"


def _escaped(rng: random.Random) -> str:
    body = _pieces(rng, ["a", "''", "\\\\", "\\'", "\\n", "\\x41", "\\101", "\\u00e9", "--",
                         ";", "$$", "/*", " ", *MULTIBYTE], 6)
    return rng.choice("eE") + "'" + body + "'"


def _unicode(rng: random.Random) -> str:
    escape = rng.choice(["\\", "!", "#", "~"])
    body = _pieces(rng, ["a", "''", escape + "0041", escape + escape, escape + "+01F600",
                         "--", ";", *MULTIBYTE], 5)
    text = rng.choice(["U&", "u&"]) + "'" + body + "'"
    return text if escape == "\\" else f"{text} UESCAPE '{escape}'"


def _dollar(rng: random.Random) -> str:
    tag = rng.choice(["", "t", "tag_1", "é", "Q"])
    body = _pieces(rng, ["a", "'", "\\", "$", "$x$", "--", "/*", ";", "\n", *MULTIBYTE], 6)
    body = body.replace(f"${tag}$", "")
    return f"${tag}${body} ${tag}$"


def _continued(rng: random.Random) -> str:
    first = rng.choice([_plain, _escaped])(rng)
    return first + rng.choice(["\n", " \n ", "\n-- c'\n", "\r\n", " "]) + _plain(rng)


def _comment(rng: random.Random) -> str:
    inner = _pieces(rng, ["a", "'", "--", "/* x */", "$$", ";", "\n", "*", "/", *MULTIBYTE], 4)
    # /*/* (no space) is refused: sqlglot ends it at the first */.
    return rng.choice([f"/*{inner}*/", f"/* /* {inner} */ */", "--" + inner.replace("\n", " ")
                       + "\n"] * 3 + [f"/*/*{inner}*/*/"])


def _name(rng: random.Random) -> str:
    body = _pieces(rng, ["a", '""', "'", "--", " ", "é", ";"], 4) or "x"
    # U&"…" is refused: sqlglot does not read it.
    return rng.choice(['"' + body + '"'] * 5 + ['U&"' + body + '"'])


def _number(rng: random.Random) -> str:
    # 1_000 and 0x1F are written in decimal first (sqlglot reads them as 1 AS _000 and
    # x'1F'); 12ab is PostgreSQL 16's syntax error.
    return rng.choice(["1", "2.5", ".5", "1e3", "1.5E-2", "007", "10."] * 3 +
                      ["1_000", "0x1F", "0o17", "0b1_01", "1_0.0_1e1_0", "12ab", "0x_"])


ITEMS: list[Callable[[random.Random], str]] = [_plain, _escaped, _unicode, _dollar,
                                                _continued, _number]


def _statement(rng: random.Random) -> str:
    items = []
    for _ in range(rng.randint(1, 4)):
        item = rng.choice(ITEMS)(rng)
        if rng.random() < 0.2:
            item = _comment(rng) + item
        if rng.random() < 0.2:
            item += " AS " + _name(rng)
        items.append(item)
    return "SELECT " + ", ".join(items)


def corpus(seed: int, count: int) -> list[str]:
    """Query strings of one to three statements, separated by ; and comments."""
    rng = random.Random(seed)
    strings = []
    for _ in range(count):
        statements = [_statement(rng) for _ in range(rng.choice([1, 1, 2, 3]))]
        glue = [rng.choice([";", "; ", ";\n", ";" + _comment(rng)]) for _ in statements]
        strings.append("".join(s + g for s, g in zip(statements, glue, strict=True))[:-1])
    return strings


def _results(connection: psycopg.Connection, sql: str) -> list[list[tuple]] | None:
    """PostgreSQL's rows for each statement of a simple query, or None if it refused it."""
    try:
        cursor = connection.execute(sql.encode())
    except psycopg.Error:
        return None
    results = []
    while True:
        # nfields rather than description: SQL_ASCII column names are not decoded.
        result = cursor.pgresult
        results.append(cursor.fetchall() if result is not None and result.nfields else [])
        if not cursor.nextset():
            return results


def _check(connection: psycopg.Connection, sql: str, outcomes: Counter) -> None:
    want = _results(connection, sql)
    if want is None:
        outcomes["PostgreSQL error"] += 1
        return
    try:
        statements = classify(sql, POLICY)
    except Refusal:
        outcomes["refused"] += 1
        return
    if any(not isinstance(statement.plan, Relay) for statement in statements):
        outcomes["refused"] += 1
        return
    assert len(statements) == len(want), sql
    for statement, rows in zip(statements, want, strict=True):
        assert statement.plan == Relay(statement.text), sql  # relayed as written
        assert _results(connection, statement.text) == [rows], sql
        again = parse_query(statement.text).sql(dialect="postgres")
        assert _results(connection, again) == [rows], (sql, again)
    outcomes["agreed"] += 1


@pytest.mark.parametrize("settings", ACCEPTED, ids=lambda s: "-".join(
    f"{name}={value}" for name, value in s.items() if name not in PINNED or
    value != PINNED[name]) or "pinned")
def test_dpgate_reads_text_as_postgresql_does(postgres: Postgres, settings: dict[str, str]):
    options = " ".join(f"-c {name}={value}" for name, value in settings.items())
    outcomes: Counter = Counter()
    with psycopg.connect(postgres.admin_dsn, autocommit=True, options=options) as connection:
        for name, value in settings.items():
            shown = connection.execute(f"SHOW {name}").fetchone()[0]
            assert (shown.decode() if isinstance(shown, bytes) else shown) == value
        for sql in corpus(SEED, STRINGS):
            _check(connection, sql, outcomes)
    print(dict(outcomes))
    # Refusing is sound but the corpus is meant to be read: a third at least must agree.
    assert outcomes["agreed"] >= STRINGS // 3, outcomes


@pytest.mark.parametrize("sql", [
    "SELECT 'a\\', ' , 1 --'",  # the shape, as standard_conforming_strings on reads it
    "SELECT E'a\\'b', 'c'",
    "SELECT 'a'\n'b', 'c'\n-- x'\n'd'",
    "SELECT $a$ $b$ ' $b$ $a$, $$--$$",
    "SELECT /* /* ' */ */ 'x'",
    "SELECT 1; SELECT ';'; SELECT 3",
    "SELECT U&'d!0061t' UESCAPE '!'",
    # PostgreSQL 16's numbers, in decimal for sqlglot at the same positions (lexer.py)
    "SELECT 1_000, 0x1F, 0X_ff, 0o17, 0b101, 1_000.000_5, .5e1_0, 0x7FFF_FFFF, 0x8000_0000",
    "SELECT 0x1F AS a; SELECT 1_0 -- 0x1F\n, '1_000'",
    # continued strings, written as the one literal they are (lexer.py): the continued
    # part of an E'' string keeps its escapes (sqlglot alone reads it as a plain string)
    "SELECT E'a'\n'b\\'c'",
    "SELECT E'a\\n' -- x\n'b\\'c', x'1F'\n'0', 1 FROM (SELECT 'd'\n  'e' AS t) s WHERE t = 'de'",
])
def test_known_shapes_agree(postgres: Postgres, sql: str):
    outcomes: Counter = Counter()
    with psycopg.connect(postgres.admin_dsn, autocommit=True) as connection:
        _check(connection, sql, outcomes)
    assert outcomes == Counter(agreed=1)


@pytest.mark.parametrize("sql", [
    "SELECT /*/* */ ' */ 1 --'",  # nested without a space: sqlglot ended the comment early
    "SELECT 0xFFFFFFFFFFFF",  # longer in decimal: not written at the same positions
    "SELECT U&'\\0041' UESCAPE '\\'",  # sqlglot cannot write this back
    'SELECT 1 AS U&"a"',  # sqlglot does not read U&"…" names
    # an escape ending a part of a continued E'' string would take the next part's digits
    "SELECT E'\\x4'\n'1' = E'\\x041'", "SELECT E'\\1'\n'01'", "SELECT E'\\u00'\n'41'",
])
def test_shapes_read_otherwise_are_refused(sql: str):
    with pytest.raises(Refusal):
        classify(sql, POLICY)


@pytest.mark.parametrize("sql", ["SELECT 123abc", "SELECT 1__0", "SELECT 1_", "SELECT 0x",
                                 "SELECT 0b2", "SELECT 1e", "SELECT 1e+", "SELECT 0x1Fg",
                                 "SELECT 1.5_", "SELECT 1; SELECT 7days", "SELECT 0x1F.5",
                                 "SELECT 0x1F.", "SELECT 0b1.e5"])
def test_numbers_postgresql_16_cannot_read_are_its_syntax_errors(postgres: Postgres, sql: str):
    with psycopg.connect(postgres.admin_dsn, autocommit=True) as connection:
        with pytest.raises(psycopg.Error) as failed:
            connection.execute(sql)
    with pytest.raises(Refusal) as refused:
        classify(sql, POLICY)
    assert refused.value.sqlstate == failed.value.sqlstate == "42601"
    assert refused.value.message == failed.value.diag.message_primary


def test_a_rewritten_literal_ends_where_it_did():
    # proxy/engine/literals.py maps a relayed statement back to the text as written by
    # the statement's ends: a literal that ends it must end at the same character.
    assert as_postgresql_reads("SELECT 0x1F") == "SELECT   31"
    assert as_postgresql_reads("SELECT 'a'\n'b' ;") == "SELECT    'ab' ;"


def test_a_number_keeps_its_position_in_decimal():
    sql = "SELECT 0x1F + 1_000 AS n, order_id FROM orders WHERE 0b1 = 1"
    (statement,) = classify(sql, POLICY)
    assert isinstance(statement.plan, Refusal)
    assert statement.plan.position == sql.index("order_id") + 1


REFUSED_VALUES = [("standard_conforming_strings", value) for value in ("off", "false", "0", "of")] \
    + [("backslash_quote", value) for value in ("on", "off")] \
    + [("client_encoding", value) for value in ("SJIS", "BIG5", "GBK", "UHC", "GB18030",
                                                "JOHAB", "LATIN1", "auto")] \
    + [("DateStyle", "ISO, DMY"), ("DateStyle", "YMD"), ("DateStyle", "German"),
       ("IntervalStyle", "sql_standard")]
ROUTE_FORMS = ["SET {name} = '{value}'", "SET LOCAL {name} TO '{value}'",
               "SET SESSION {name} = '{value}'",
               "SELECT set_config('{name}', '{value}', false)",
               "SELECT 1 FROM (SELECT set_config('{name}', '{value}', true)) AS s"]


@pytest.mark.parametrize(("name", "value"), REFUSED_VALUES)
def test_refused_values_are_refused_on_every_route(name: str, value: str):
    for form in ROUTE_FORMS:
        plan = classify(form.format(name=name, value=value), POLICY)[0].plan
        assert isinstance(plan, Refusal) and plan.sqlstate == "0A000", form
    escaped = value.replace(" ", "\\ ")  # as libpq users write a space in options
    for parameters in ({name: value}, {"options": f"-c {name}={escaped}"},
                       {"options": f"--{name.replace('_', '-')}={escaped}"}):
        with pytest.raises(Refusal):
            startup_settings(parameters)
    with pytest.raises(Refusal):
        check_setting(name, value, "SET")
