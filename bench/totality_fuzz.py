"""An adversarial fuzzer for dpgate's list of expressions that cannot fail on a row.

    .venv/bin/python -m bench.totality_fuzz [--count 20000] [--seed 1] [--dsn postgresql://…]
    make fuzz

For every node that rewriter/sql/functions.py treats as total (and the forms arithmetic.py
builds), it generates expressions whose operands differ on one row only: `CASE WHEN id = k
THEN x ELSE y END` of arrays of other dimensions and lengths, NULLs, empty arrays, extreme
numbers (NaN, ±Infinity, the smallest and largest integers, 1e308), long and odd text,
dates and timestamps at the ends of their ranges, nested. Each expression goes into a
private statement (WHERE, FILTER, a derived table's output, a CASE in SUM) over a small
table whose rows hold those extremes; dpgate plans it, and what dpgate accepts runs on
PostgreSQL (its computed constants first, as the proxy does). An error there is a node
that is not total: it is reported with the expression. The same expressions also run
as written, without dpgate, to show which nodes PostgreSQL itself fails on (those dpgate
must refuse or rewrite). Without --dsn it starts an embedded PostgreSQL (pgserver).
tests/test_totality_fuzz.py runs a bounded, seeded version.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import psycopg
import sqlglot
from sqlglot import exp

from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.analysis.constants import evaluation_sql, substitute
from rewriter.errors import Refusal
from rewriter.policy.model import Policy
from rewriter.sensitivity.metrics import Metrics
from rewriter.sql.functions import ROW_SAFE_NODES

# The private table: one column per type dpgate allows on rows.
COLUMNS = {
    "id": "integer", "i2": "smallint", "i4": "integer", "i8": "bigint", "n": "numeric",
    "r": "real", "d": "double precision", "t": "text", "v": "character varying",
    "dt": "date", "ts": "timestamp without time zone", "tz": "timestamp with time zone",
    "b": "boolean", "a": "integer[]",
}
_LONG = "y" * 900
# Row 1 is ordinary; the others hold the extremes, one NULL row among them.
ROWS = [
    "1, 1, 1, 1, 1.5, 1.5, 1.5, 'abc', 'abc', '2024-01-01', '2024-01-01 12:00', "
    "'2024-01-01 12:00+00', true, '{1,2}'",
    "2, -32768, -2147483648, -9223372036854775808, 'NaN', '-Infinity', '-Infinity', '', '', "
    "'-infinity', '4713-11-24 00:00 BC', '4713-11-24 00:00+00 BC', false, '{}'",
    "3, 32767, 2147483647, 9223372036854775807, 'Infinity', 'NaN', 1e308, "
    f"'İß\\%_{_LONG}', 'ǅ', '5874897-12-31', '294276-12-31 23:59:59', "
    "'294276-12-31 23:59:59+00', true, '{{1,2},{3,4}}'",
    "4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL",
    "5, 0, 0, -1, -1e-300, 3.4e38, 'NaN', '{1}', '{{1}}', '10001-01-01', '0001-01-01 00:00',"
    " '0001-01-01 00:00+14', NULL, '{NULL}'",
    "6, -1, -1, 0, 99999999999999999999999999999999.99999, 1e-45, -1e308, '  x  ', 'a\\', "
    "'0001-01-01 BC', 'infinity', '-infinity', false, '{{{1}}}'",
]
ROW_IDS = range(1, len(ROWS) + 1)

# Value categories, with the columns and literals of each.
_CATEGORIES: dict[str, tuple[list[str], list[str]]] = {
    "int": (["id", "i2", "i4", "i8"],
            ["0", "-1", "32767", "2147483647", "9223372036854775807", "NULL::int"]),
    "num": (["n", "r", "d"],
            ["0.5", "1e-30", "1234567890123456789012345678901234567890", "'NaN'::numeric",
             "'Infinity'::numeric", "'-Infinity'::float8", "1e308::float8", "NULL::numeric"]),
    "text": (["t", "v"],
             ["''", "'x'", "'İß\\%_'", f"'{_LONG[:200]}'", "'{1,2}'", "'{{1}}'",
              "NULL::text"]),
    "date": (["dt"],
             ["DATE '2024-02-29'", "DATE 'infinity'", "DATE '-infinity'", "DATE '4714-11-24 BC'",
              "DATE '5874897-12-31'", "DATE '10001-01-01'", "DATE '0001-01-01'"]),
    "ts": (["ts", "tz"],
           ["TIMESTAMP '294276-12-31 23:59:59'", "TIMESTAMP '4713-11-24 00:00 BC'",
            "TIMESTAMP 'infinity'", "TIMESTAMPTZ '0001-01-01 00:00+14'",
            "TIMESTAMP '9999-12-31 23:59:59.999999'"]),
    "bool": (["b"], ["true", "false", "NULL::boolean"]),
    "array": (["a"], ["ARRAY[1]", "ARRAY[[1, 2]]", "ARRAY[[1], [2]]", "'{}'::int[]",
                      "ARRAY[[[1]]]", "NULL::int[]"]),
}
_NUMBERS = ("int", "num")
_TIMES = ("date", "ts")
_EXTRACT_UNITS = ("century", "day", "decade", "dow", "doy", "epoch", "isodow", "isoyear",
                  "julian", "millennium", "month", "quarter", "week", "year")
_TRUNC_UNITS = ("microseconds", "second", "hour", "day", "week", "month", "quarter", "year",
                "decade", "century", "millennium")
_PATTERNS = ("'%'", "'a%'", "'\\%'", "'_%_'", "'%ß%'", "'\\\\'", "''")
# Statements an expression of any type goes into: every place a row reaches it.
_CLAUSES = (
    "SELECT count(*) FROM fuzz WHERE ({e}) IS NOT NULL",
    "SELECT count(*) FILTER (WHERE ({e}) IS NULL) FROM fuzz",
    "SELECT count(*) FROM (SELECT id, ({e}) AS f FROM fuzz) AS s WHERE f IS NOT NULL",
    "SELECT sum(CASE WHEN ({e}) IS NULL THEN 1 ELSE 0 END) FROM fuzz",
)
# Nodes of the list that compute no value of their own: clauses, names, markers.
STRUCTURAL = frozenset({
    exp.Identifier, exp.Star, exp.Where, exp.Order, exp.Ordered, exp.Group, exp.Limit,
    exp.Offset, exp.Parameter, exp.Placeholder, exp.Var, exp.DataType,
})

Generate = Callable[["_Generator", int], str]


@dataclass
class _Generator:
    rng: random.Random

    def value(self, category: str, depth: int) -> str:
        """An expression of `category` whose value may differ on one row only."""
        choices: list[Callable[[], str]] = [
            lambda: self.rng.choice(_CATEGORIES[category][0]),
            lambda: self.rng.choice(_CATEGORIES[category][1]),
        ]
        if depth > 0:
            choices.append(lambda: self.one_row(category, depth - 1))
            producers = [p for c, _, p in TEMPLATES if c == category]
            choices.extend([lambda p=p: p(self, depth - 1) for p in producers] * 2)
        return self.rng.choice(choices)()

    def one_row(self, category: str, depth: int) -> str:
        row = self.rng.choice(ROW_IDS)
        return (f"CASE WHEN id = {row} THEN {self.value(category, depth)} "
                f"ELSE {self.value(category, depth)} END")

    def any(self, depth: int, among: tuple[str, ...] = tuple(_CATEGORIES)) -> tuple[str, str]:
        category = self.rng.choice(among)
        return category, self.value(category, depth)

    def pair(self, depth: int, among: tuple[str, ...] = tuple(_CATEGORIES)) -> list[str]:
        """Three comparable values (numbers with numbers, dates with timestamps)."""
        category = self.rng.choice(among)
        family = _NUMBERS if category in _NUMBERS else _TIMES if category in _TIMES \
            else (category,)
        return [self.value(category, depth)] + [
            self.value(self.rng.choice(family), depth) for _ in range(2)]

    def pick(self, *options: str) -> str:
        return self.rng.choice(options)


def _compare(g: _Generator, depth: int, operator: str) -> str:
    left, right, _ = g.pair(depth)
    return f"({left} {operator} {right})"


def _choice_of(kind: str) -> Callable[[str], Generate]:
    def make(category: str) -> Generate:
        def generate(g: _Generator, d: int) -> str:
            values = [g.value(category, d) for _ in range(g.rng.randint(2, 3))]
            if kind == "CASE":
                return (f"CASE WHEN {g.value('bool', d)} THEN {values[0]} "
                        f"ELSE {values[1]} END")
            if kind == "NULLIF":
                return f"NULLIF({values[0]}, {values[1]})"
            return f"{kind}({', '.join(values)})"
        return generate
    return make


# (category produced, node exercised, generator). Every node of ROW_SAFE_NODES is either
# exercised here or STRUCTURAL (tests/test_totality_fuzz.py checks it).
# numeric(p, s) fails on larger values: arithmetic.py guards it.
_NUMERIC_CASTS = ("numeric", "double precision", "numeric(10, 2)", "numeric(3)",
                  "numeric(2, 5)")
TEMPLATES: list[tuple[str, type[exp.Expression], Generate]] = [
    ("bool", exp.EQ, lambda g, d: _compare(g, d, "=")),
    ("bool", exp.NEQ, lambda g, d: _compare(g, d, "<>")),
    ("bool", exp.GT, lambda g, d: _compare(g, d, ">")),
    ("bool", exp.GTE, lambda g, d: _compare(g, d, ">=")),
    ("bool", exp.LT, lambda g, d: _compare(g, d, "<")),
    ("bool", exp.LTE, lambda g, d: _compare(g, d, "<=")),
    ("bool", exp.NullSafeEQ, lambda g, d: _compare(g, d, "IS NOT DISTINCT FROM")),
    ("bool", exp.NullSafeNEQ, lambda g, d: _compare(g, d, "IS DISTINCT FROM")),
    ("bool", exp.And, lambda g, d: f"({g.value('bool', d)} AND {g.value('bool', d)})"),
    ("bool", exp.Or, lambda g, d: f"({g.value('bool', d)} OR {g.value('bool', d)})"),
    ("bool", exp.Not, lambda g, d: f"(NOT {g.value('bool', d)})"),
    ("bool", exp.Is, lambda g, d: f"({g.any(d)[1]} IS {g.pick('NULL', 'NOT NULL')})"),
    ("bool", exp.Boolean, lambda g, d: g.pick("true", "false")),
    ("bool", exp.In, lambda g, d: "({} IN ({}, {}))".format(*g.pair(d))),
    ("bool", exp.Between, lambda g, d: "({} BETWEEN {} AND {})".format(*g.pair(d))),
    ("bool", exp.Like, lambda g, d: f"({g.value('text', d)} LIKE {g.pick(*_PATTERNS)})"),
    ("bool", exp.ILike, lambda g, d: f"({g.value('text', d)} ILIKE {g.pick(*_PATTERNS)})"),
    ("bool", exp.Any, lambda g, d: f"({g.value('int', d)} = ANY({g.value('array', d)}))"),
    ("bool", exp.All, lambda g, d: f"({g.value('int', d)} {g.pick('<', '>=', '<>')} "
                                   f"ALL({g.value('array', d)}))"),
    ("bool", exp.Tuple, lambda g, d: "(({}, {}) = ({}, {}))".format(
        *g.pair(d, ("int", "text"))[:2], *g.pair(d, ("int", "text"))[:2])),
    ("bool", exp.Paren, lambda g, d: f"({g.value('bool', d)})"),
    ("int", exp.Length, lambda g, d: f"length({g.value('text', d)})"),
    ("num", exp.Extract, lambda g, d: f"extract({g.pick(*_EXTRACT_UNITS)} FROM "
                                      f"{g.any(d, _TIMES)[1]})"),
    ("text", exp.Lower, lambda g, d: f"lower({g.value('text', d)})"),
    ("text", exp.Upper, lambda g, d: f"upper({g.value('text', d)})"),
    ("text", exp.Trim, lambda g, d: g.pick(f"trim({g.value('text', d)})",
                                           f"trim(both 'xy' FROM {g.value('text', d)})")),
    ("text", exp.DPipe, lambda g, d: f"({g.any(d, ('text', 'int', 'num'))[1]} || "
                                     f"{g.value('text', d)})"),
    ("array", exp.DPipe, lambda g, d: g.pick(
        f"({g.value('array', d)} || {g.value('array', d)})",
        f"({g.value('array', d)} || {g.value('int', d)})",
        f"({g.value('int', d)} || {g.value('array', d)})")),
    ("text", exp.Concat, lambda g, d: f"concat({g.any(d)[1]}, {g.any(d)[1]})"),
    ("array", exp.Array, lambda g, d: f"ARRAY[{g.value(c := g.pick('int', 'array'), d)}, "
                                      f"{g.value(c, d)}]"),
    ("date", exp.CurrentDate, lambda g, d: "current_date"),
    ("ts", exp.CurrentTimestamp, lambda g, d: "current_timestamp"),
    ("ts", exp.Interval, lambda g, d: "(current_date - interval '30 days')"),
    ("ts", exp.TimestampTrunc, lambda g, d: f"date_trunc('{g.pick(*_TRUNC_UNITS)}', "
                                            f"{g.any(d, _TIMES)[1]})"),
    # arithmetic and casts, in the total forms arithmetic.py builds
    ("num", exp.Add, lambda g, d: f"({g.any(d, _NUMBERS)[1]} + {g.any(d, _NUMBERS)[1]})"),
    ("num", exp.Sub, lambda g, d: f"({g.any(d, _NUMBERS)[1]} - {g.any(d, _NUMBERS)[1]})"),
    ("num", exp.Mul, lambda g, d: f"({g.any(d, _NUMBERS)[1]} * {g.any(d, _NUMBERS)[1]})"),
    ("num", exp.Div, lambda g, d: f"({g.any(d, _NUMBERS)[1]} / {g.any(d, _NUMBERS)[1]})"),
    ("num", exp.Mod, lambda g, d: f"({g.any(d, _NUMBERS)[1]} % {g.any(d, _NUMBERS)[1]})"),
    ("num", exp.Neg, lambda g, d: f"(-({g.any(d, _NUMBERS)[1]}))"),
    ("int", exp.Cast, lambda g, d: f"CAST({g.value('int', d)} AS "
                                   f"{g.pick('bigint', 'integer')})"),
    ("num", exp.Cast, lambda g, d: f"CAST({g.any(d, _NUMBERS)[1]} AS "
                                   f"{g.pick(*_NUMERIC_CASTS)})"),
    ("text", exp.Cast, lambda g, d: f"CAST({g.any(d)[1]} AS text)"),
]
for _category in _CATEGORIES:
    for _kind, _node in (("CASE", exp.Case), ("COALESCE", exp.Coalesce),
                         ("NULLIF", exp.Nullif), ("GREATEST", exp.Greatest),
                         ("LEAST", exp.Least)):
        TEMPLATES.append((_category, _node, _choice_of(_kind)(_category)))


def covered_nodes() -> frozenset[type[exp.Expression]]:
    """The node classes the templates exercise (as sqlglot parses what they write)."""
    rng = random.Random(0)
    found: set[type[exp.Expression]] = set()
    for _, node, generate in TEMPLATES:
        for _ in range(5):
            found |= {type(n) for n in sqlglot.parse_one(
                generate(_Generator(rng), 1), read="postgres").walk()}
        found.add(node)
    return frozenset(found)


def policy_and_metrics() -> tuple[Policy, Metrics]:
    policy = Policy.from_dict({"tables": {"fuzz": {"private": True, "columns": {
        "id": {"max_freq": 1}}}}})
    types = {("public.fuzz", name): "ARRAY" if kind.endswith("[]") else kind
             for name, kind in COLUMNS.items()}
    return policy, Metrics(columns={"public.fuzz": tuple(COLUMNS)}, column_types=types)


def create_table(connection: psycopg.Connection) -> None:
    columns = ", ".join(f"{name} {kind}" for name, kind in COLUMNS.items())
    connection.execute("DROP TABLE IF EXISTS fuzz")
    connection.execute(f"CREATE TABLE fuzz ({columns})")
    for row in ROWS:
        connection.execute(f"INSERT INTO fuzz VALUES ({row})")


@dataclass
class Failure:
    expression: str
    statement: str
    sqlstate: str
    message: str


@dataclass
class Report:
    """Counts per node class: tried, refused by dpgate, failed on PostgreSQL."""

    tried: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    raw_failed: Counter[str] = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    expressions: int = 0
    accepted: int = 0
    raw_failures: int = 0

    def lines(self) -> Iterator[str]:
        yield (f"{self.expressions} expressions, {self.accepted} accepted by dpgate, "
               f"{len(self.failures)} accepted ones failed on PostgreSQL; "
               f"{self.raw_failures} failed on rows when run as written")
        yield "per node: expressions containing it (tried, refused, failed; failed as written)"
        yield f"{'node':<18}{'tried':>8}{'refused':>9}{'failed':>8}{'raw fails':>11}"
        for name in sorted(self.tried):
            yield (f"{name:<18}{self.tried[name]:>8}{self.refused[name]:>9}"
                   f"{self.failed[name]:>8}{self.raw_failed[name]:>11}")
        for failure in self.failures[:20]:
            yield f"FAILED {failure.sqlstate} {failure.message}: {failure.expression[:300]}"


def expressions(count: int, seed: int, depth: int = 3) -> Iterator[str]:
    """`count` generated expressions, each rooted at a template (all nodes in turn)."""
    rng = random.Random(seed)
    generator = _Generator(rng)
    for index in range(count):
        _, _, generate = TEMPLATES[index % len(TEMPLATES)]
        yield generate(generator, rng.randint(1, depth))


def fuzz(connection: psycopg.Connection, count: int, seed: int) -> Report:
    """Plan each expression with dpgate and run what it accepts (and, apart, as written)."""
    policy, metrics = policy_and_metrics()
    rng = random.Random(seed + 1)
    report = Report()
    for expression in expressions(count, seed):
        nodes = {type(n).__name__ for n in sqlglot.parse_one(expression, read="postgres")
                 .walk() if type(n) in set(ROW_SAFE_NODES) | _ARITHMETIC_NODES}
        statement = rng.choice(_CLAUSES).format(e=expression)
        report.expressions += 1
        report.tried.update(nodes)
        if _error(connection, statement) is not None:
            report.raw_failures += 1
            report.raw_failed.update(nodes)
        try:
            plan = plan_private_aggregate(parse_query(statement), policy, 0, metrics)
        except Refusal:
            report.refused.update(nodes)
            continue
        try:
            error = _run_plan(connection, plan.sql, plan.constants,
                              max(1, len(plan.checks.reads)))
        except Refusal:  # the proxy refuses it too, before it runs
            report.refused.update(nodes)
            continue
        report.accepted += 1
        if error is not None:
            report.failed.update(nodes)
            report.failures.append(Failure(expression, statement, *error))
    return report


_ARITHMETIC_NODES = frozenset({exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg,
                               exp.Cast, exp.TimestampTrunc})


def _run_plan(connection: psycopg.Connection, sql: str, constants: tuple, reads: int = 1
              ) -> tuple[str, str] | None:
    if constants:
        try:
            row = connection.execute(evaluation_sql(constants)).fetchone()
        except psycopg.Error:
            return None  # computed first, before any row is read: free and row-independent
        assert row is not None
        sql = substitute(sql, constants, list(row), reads)
    return _error(connection, sql)


def _error(connection: psycopg.Connection, sql: str) -> tuple[str, str] | None:
    """The error PostgreSQL raises while reading rows, if any. One raised while planning
    (a type mismatch, a constant that overflows) is the same whatever the rows hold."""
    try:
        connection.execute(f"EXPLAIN {sql}")
    except psycopg.Error:
        return None
    try:
        connection.execute(sql).fetchall()
    except psycopg.Error as error:
        return error.sqlstate or "", str(error).splitlines()[0]
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dsn", help="a PostgreSQL to create the table in (else pgserver)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        dsn = arguments.dsn
        server = None
        if dsn is None:
            import pgserver

            server = pgserver.get_server(directory, cleanup_mode="stop")
            dsn = server.get_uri()
        try:
            with psycopg.connect(dsn, autocommit=True) as connection:
                connection.execute("SET statement_timeout = '5s'")
                create_table(connection)
                report = fuzz(connection, arguments.count, arguments.seed)
                for line in report.lines():
                    print(line)
        finally:
            if server is not None:
                server.cleanup()


if __name__ == "__main__":
    main()
