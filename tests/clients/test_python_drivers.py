"""Python drivers through dpgate: each connects, browses the schema, asks a private count
with a parameter, gets 42501 for a refused statement and keeps working on the same
connection."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import pandas
import pg8000.dbapi
import psycopg
import psycopg2
import psycopg2.errors
import pytest
import sqlalchemy
from psycopg import errors
from sqlalchemy import bindparam, func, select

from tests.clients.conftest import DEMO_TABLES, REFUSED, Analyst, assert_noisy

pytestmark = pytest.mark.end_to_end

TABLES_SQL = ("SELECT table_name FROM information_schema.tables "
              "WHERE table_schema = 'public' ORDER BY 1")


# psycopg 3 ---------------------------------------------------------------------------

def test_psycopg_text_and_binary_results(analyst: Analyst, true_count):
    with psycopg.connect(analyst.dsn, autocommit=True) as connection:
        tables = {row[0] for row in connection.execute(TABLES_SQL)}
        assert DEMO_TABLES <= tables
        for binary, product in ((False, 101), (True, 102)):
            cursor = connection.cursor(binary=binary)
            cursor.execute("SELECT count(*) FROM orders WHERE product_id = %s", (product,))
            assert cursor.pgresult.fformat(0) == int(binary)
            assert_noisy(cursor.fetchone()[0], true_count(product))
        cursor = connection.cursor(binary=True)
        cursor.execute("SELECT name, price FROM products WHERE product_id = %s", (5,))
        name, price = cursor.fetchone()
        assert isinstance(name, str) and price > 0


def test_psycopg_prepared_statements(analyst: Analyst, true_count):
    with psycopg.connect(analyst.dsn, autocommit=True, prepare_threshold=0) as connection:
        for product in (103, 104, 103, 104):
            answer = connection.execute("SELECT count(*) FROM orders WHERE product_id = %s",
                                        (product,)).fetchone()[0]
            assert_noisy(answer, true_count(product))
        public = [connection.execute("SELECT product_id FROM products WHERE product_id = %s",
                                     (product,)).fetchone()[0] for product in (7, 8, 9)]
        assert public == [7, 8, 9]
        with pytest.raises(errors.InsufficientPrivilege):
            connection.execute("SELECT * FROM orders WHERE product_id = %s", (1,))
        assert connection.execute("SELECT %s::int + 1", (41,)).fetchone() == (42,)


def test_psycopg_pipeline(analyst: Analyst, true_count):
    with psycopg.connect(analyst.dsn, autocommit=True) as connection:
        with connection.pipeline():
            count = connection.execute("SELECT count(*) FROM orders WHERE product_id = %s",
                                       (105,))
            product = connection.execute("SELECT name FROM products WHERE product_id = %s",
                                         (1,))
            tables = connection.execute(TABLES_SQL)
        assert_noisy(count.fetchone()[0], true_count(105))
        assert isinstance(product.fetchone()[0], str)
        assert DEMO_TABLES <= {row[0] for row in tables}
        with pytest.raises(errors.InsufficientPrivilege):
            with connection.pipeline():
                connection.execute(REFUSED)
        assert connection.execute("SELECT 1").fetchone() == (1,)


def test_psycopg_refusal_is_typed_and_the_connection_goes_on(analyst: Analyst):
    with psycopg.connect(analyst.dsn) as connection:  # not autocommit: inside a transaction
        with pytest.raises(errors.InsufficientPrivilege) as refused:
            connection.execute(REFUSED)
        assert refused.value.sqlstate == "42501"
        connection.rollback()
        assert connection.execute("SELECT count(*) FROM products").fetchone() == (1000,)


# psycopg2 and pg8000 (DB-API 2, %s parameters) ---------------------------------------

def check_dbapi(connection, error: type[Exception], sqlstate_of, product: int,
                truth: int) -> None:
    """Schema, a private count with a parameter, a refusal, and a query after it."""
    cursor = connection.cursor()
    cursor.execute(TABLES_SQL)
    assert DEMO_TABLES <= {row[0] for row in cursor.fetchall()}
    cursor.execute("SELECT count(*) FROM orders WHERE product_id = %s", (product,))
    assert_noisy(cursor.fetchone()[0], truth)
    with pytest.raises(error) as refused:
        cursor.execute(REFUSED)
    assert sqlstate_of(refused.value) == "42501"
    connection.rollback()  # both drivers opened a transaction, which the error aborted
    cursor = connection.cursor()
    cursor.execute("SELECT product_id FROM products WHERE product_id = %s", (4,))
    assert cursor.fetchone()[0] == 4


def test_psycopg2(analyst: Analyst, true_count):
    connection = psycopg2.connect(analyst.dsn)
    try:
        check_dbapi(connection, psycopg2.errors.InsufficientPrivilege,
                    lambda error: error.pgcode, 111, true_count(111))
    finally:
        connection.close()


def test_pg8000(analyst: Analyst, true_count):
    connection = pg8000.dbapi.connect(user=analyst.name, password=analyst.password,
                                      host=analyst.host, port=analyst.port,
                                      database=analyst.database)
    try:
        check_dbapi(connection, pg8000.dbapi.DatabaseError,
                    lambda error: error.args[0]["C"], 131, true_count(131))
    finally:
        connection.close()


# asyncpg -----------------------------------------------------------------------------

def test_asyncpg_prepared_statements_and_type_introspection(analyst: Analyst, true_count):
    async def run() -> None:
        connection = await asyncpg.connect(analyst.dsn)
        try:
            tables = {row["table_name"] for row in await connection.fetch(TABLES_SQL)}
            assert DEMO_TABLES <= tables
            statement = await connection.prepare(
                "SELECT count(*) FROM orders WHERE product_id = $1")
            assert [attribute.type.name for attribute in statement.get_attributes()] == ["int8"]
            for product in (121, 122):
                assert_noisy(await statement.fetchval(product), true_count(product))
            # set_type_codec introspects the type through pg_catalog queries.
            await connection.set_type_codec("jsonb", schema="pg_catalog",
                                            encoder=json.dumps, decoder=json.loads)
            assert await connection.fetchval("SELECT $1::jsonb", {"a": [1, 2]}) == {"a": [1, 2]}
            with pytest.raises(asyncpg.InsufficientPrivilegeError) as refused:
                await connection.fetch(REFUSED)
            assert refused.value.sqlstate == "42501"
            assert await connection.fetchval(
                "SELECT count(*) FROM products WHERE category = $1", "Books") > 0
        finally:
            await connection.close()

    asyncio.run(run())


def test_asyncpg_pool_resets_connections_on_release(analyst: Analyst, true_count):
    async def run() -> None:
        async with asyncpg.create_pool(analyst.dsn, min_size=1, max_size=1) as pool:
            async with pool.acquire() as connection:
                await connection.execute("SET application_name = 'dirty'")
                answer = await connection.fetchval(
                    "SELECT count(*) FROM orders WHERE product_id = $1", 123)
                assert_noisy(answer, true_count(123))
            # Release ran the reset query (RESET ALL, …) on the one pooled connection.
            async with pool.acquire() as connection:
                assert await connection.fetchval("SHOW application_name") != "dirty"
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await connection.fetch(REFUSED)
            async with pool.acquire() as connection:
                assert await connection.fetchval("SELECT 2") == 2

    asyncio.run(run())


# SQLAlchemy 2 and pandas ---------------------------------------------------------------

@pytest.fixture(params=["psycopg", "psycopg2"])
def engine(request, analyst: Analyst):
    url = analyst.dsn.replace("postgresql://", f"postgresql+{request.param}://")
    engine = sqlalchemy.create_engine(url)
    yield engine
    engine.dispose()


def test_sqlalchemy_inspector_and_core_count(engine, true_count):
    inspector = sqlalchemy.inspect(engine)
    assert DEMO_TABLES <= set(inspector.get_table_names())
    columns = {column["name"]: column for column in inspector.get_columns("orders")}
    assert {"order_id", "customer_id", "product_id", "quantity", "order_cost",
            "order_date"} == set(columns)
    assert isinstance(columns["order_date"]["type"], sqlalchemy.Date)
    assert inspector.get_pk_constraint("orders")["constrained_columns"] == ["order_id"]
    orders = sqlalchemy.Table("orders", sqlalchemy.MetaData(), autoload_with=engine)
    query = (select(func.count()).select_from(orders)
             .where(orders.c.product_id == bindparam("product")))
    with engine.connect() as connection:
        assert_noisy(connection.execute(query, {"product": 141}).scalar_one(),
                     true_count(141))
        with pytest.raises(sqlalchemy.exc.DBAPIError) as refused:
            connection.execute(select(orders))
        orig = refused.value.orig  # psycopg names it sqlstate, psycopg2 pgcode
        assert (getattr(orig, "sqlstate", None) or orig.pgcode) == "42501"
        connection.rollback()
        assert connection.execute(sqlalchemy.text("SELECT 1")).scalar_one() == 1


def test_pandas_read_sql(engine, true_count):
    histogram = pandas.read_sql(
        "SELECT quantity, count(*) AS n FROM orders GROUP BY quantity ORDER BY quantity",
        engine)
    assert list(histogram["quantity"]) == list(range(1, 11))
    assert (histogram["n"] > 0).all()
    frame = pandas.read_sql(sqlalchemy.text(
        "SELECT count(*) AS n FROM orders WHERE product_id = :product"), engine,
        params={"product": 151})
    assert_noisy(int(frame["n"][0]), true_count(151))
    products = pandas.read_sql_table("products", engine)
    assert len(products) == 1000 and "price" in products.columns
