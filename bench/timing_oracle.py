"""Can a private condition be read off the latency of the costliest expression dpgate accepts?

    .venv/bin/python -m bench.timing_oracle [--pairs 300] [--rows 20000] [--dsn postgresql://…]

Issue 23 read purchases off `CASE WHEN <private condition> THEN <costly> ELSE true END`:
PostgreSQL evaluates the costly branch only for the rows where the condition holds. This
bench builds a table with exactly one row where the condition holds, and for each construct
runs, as paired samples in random order, the statement with that condition (true on one
row) and with a condition true on none. It prints the mean difference per pair with a 95%
confidence interval and a verdict, the construct's cost on one row (measured precisely
with the condition true on 10,000 rows, over them), and the pairs an attacker would need
to see that cost through the measured spread (a two-sided test at 5%, 80% power). Each
statement is what dpgate sends PostgreSQL (the rewritten SQL) and runs straight on
PostgreSQL, without the proxy's own jitter: the
attacker's best case. Constructs dpgate refuses are timed as written, for comparison.
Without --dsn it starts an embedded PostgreSQL (pgserver). Never run in tests (timing).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
import time

import psycopg

from rewriter.aggregate.private import plan_private_aggregate
from rewriter.analysis.classify import parse_query
from rewriter.errors import Refusal
from rewriter.policy.model import Policy
from rewriter.sensitivity.metrics import Metrics

_TYPES = {"order_id": "integer", "customer_id": "integer", "product_id": "integer",
          "order_cost": "numeric", "name": "text"}
_TRUE = "customer_id = 207 AND product_id = 1"
_NEVER = "customer_id = -1 AND product_id = 1"
_REACHED = "order_id BETWEEN 1 AND {rows}"
_L40 = "9" * 40
_L20001 = "9" * 20_001
_CONSTRUCTS = {
    "issue 23: three 20,001-digit products":
        f"(order_cost * {_L20001}) * (order_cost * {_L20001}) * (order_cost * {_L20001}) > 0",
    "three 40-digit products": f"(order_cost * {_L40}) * (order_cost * {_L40}) * "
                               f"(order_cost * {_L40}) > 0",
    "four numeric factors": "order_cost * order_cost * order_cost * order_cost > 0",
    "~1,000 operations (OR chain)": " OR ".join(f"order_id = {-i}" for i in range(190)),
    "16-part concatenation of 200-char text": "length(lower(" + " || ".join(
        [f"'{'x' * 200}'"] + ["name"] * 15) + ")) > 0",
    "nothing costly": "order_cost > 0",
}


def _policy() -> tuple[Policy, Metrics]:
    policy = Policy.from_dict({"tables": {"orders": {"private": True, "columns": {
        "order_id": {"max_freq": 1}}}}})
    types = {("public.orders", column): kind for column, kind in _TYPES.items()}
    return policy, Metrics(columns={"public.orders": tuple(_TYPES)}, column_types=types)


def statement(construct: str, condition: str) -> tuple[str, bool]:
    """(the SQL PostgreSQL runs, whether dpgate accepts it)."""
    sql = (f"SELECT count(*) FROM orders WHERE CASE WHEN {condition} THEN {construct} "
           "ELSE true END")
    policy, metrics = _policy()
    try:
        plan = plan_private_aggregate(parse_query(sql), policy, 0, metrics)
    except Refusal:
        return sql, False
    return plan.sql, True


def _create(connection: psycopg.Connection, rows: int) -> None:
    connection.execute("DROP TABLE IF EXISTS orders")
    connection.execute("CREATE TABLE orders (order_id integer, customer_id integer, "
                       "product_id integer, order_cost numeric(10, 2), name text)")
    # Customer 207 bought product 1 exactly once; the other rows never pair them.
    connection.execute(
        "INSERT INTO orders SELECT i, 1 + (i * 7919) %% 500, CASE WHEN (i * 7919) %% 500 = 206 "
        "THEN 2 + i %% 49 ELSE 1 + i %% 50 END, (i %% 10000) / 7.0, 'customer ' || i "
        "FROM generate_series(1, %s) AS i", (rows,))
    connection.execute("INSERT INTO orders VALUES (0, 207, 1, 123.45, 'the one')")
    connection.execute("ANALYZE orders")


def _seconds(connection: psycopg.Connection, sql: str) -> float:
    start = time.perf_counter()
    connection.execute(sql).fetchall()
    return time.perf_counter() - start


def measure(connection: psycopg.Connection, construct: str, pairs: int,
            rng: random.Random) -> tuple[list[float], float, bool]:
    """(true-minus-false differences per pair, mean time of a false one, accepted)."""
    true_sql, accepted = statement(construct, _TRUE)
    false_sql, _ = statement(construct, _NEVER)
    for sql in (true_sql, false_sql):  # warm the cache and the plan
        _seconds(connection, sql)
    differences, baseline = [], []
    for _ in range(pairs):
        if rng.random() < 0.5:
            true_time = _seconds(connection, true_sql)
            false_time = _seconds(connection, false_sql)
        else:
            false_time = _seconds(connection, false_sql)
            true_time = _seconds(connection, true_sql)
        differences.append(true_time - false_time)
        baseline.append(false_time)
    return differences, statistics.fmean(baseline), accepted


def per_row(connection: psycopg.Connection, construct: str, rows: int, runs: int) -> float:
    """The construct's cost on one row: reached by `rows` rows, minus by none, over rows
    (precise where one row's difference drowns in the noise)."""
    every, _ = statement(construct, _REACHED.format(rows=rows))
    never, _ = statement(construct, _NEVER)
    _seconds(connection, every)
    spent = [_seconds(connection, every) - _seconds(connection, never) for _ in range(runs)]
    return max(statistics.median(spent), 0.0) / rows


def verdict(differences: list[float], row_cost: float) -> tuple[float, float, str, float]:
    """(mean, 95% half-width, verdict, pairs needed to detect one row's cost)."""
    mean = statistics.fmean(differences)
    spread = statistics.stdev(differences)
    half = 1.96 * spread / math.sqrt(len(differences))
    # A two-sided test at 5% with 80% power needs ((1.96 + 0.84) σ / effect)² pairs.
    needed = math.inf if row_cost == 0 else ((1.96 + 0.84) * spread / row_cost) ** 2
    told = "distinguishable" if abs(mean) > half else "not distinguishable"
    return mean, half, f"{told} with {len(differences)} pairs", needed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dsn", help="a PostgreSQL to create the table in (else pgserver)")
    arguments = parser.parse_args()
    rng = random.Random(arguments.seed)
    with tempfile.TemporaryDirectory() as directory:
        server = None
        dsn = arguments.dsn
        if dsn is None:
            import pgserver

            server = pgserver.get_server(directory, cleanup_mode="stop")
            dsn = server.get_uri()
        try:
            with psycopg.connect(dsn, autocommit=True) as connection:
                _create(connection, arguments.rows)
                print(f"{arguments.rows + 1} rows, one where the condition holds; "
                      f"{arguments.pairs} pairs per construct")
                for name, construct in _CONSTRUCTS.items():
                    differences, base, accepted = measure(connection, construct,
                                                          arguments.pairs, rng)
                    # a refused construct is slow: a few rows show its cost
                    reached = min(arguments.rows, 10_000) if accepted else 10
                    row_cost = per_row(connection, construct, reached, 5)
                    mean, half, told, needed = verdict(differences, row_cost)
                    print(f"{name:<42} {'accepted' if accepted else 'REFUSED':<8} "
                          f"query {base * 1e3:6.2f} ms  true-false {mean * 1e6:+8.1f} "
                          f"± {half * 1e6:6.1f} µs: {told}; one row costs "
                          f"{row_cost * 1e6:8.3f} µs, pairs to tell it: {needed:,.0f}")
        finally:
            if server is not None:
                server.cleanup()


if __name__ == "__main__":
    main()
