-- Superset (SQLAlchemy over psycopg2): besides the SQLAlchemy Inspector calls that
-- test_bi_tools.py makes itself, the statements Superset generates: the connection test
-- (dialect do_ping), the default schema, a dataset preview of a public table (select_star,
-- LIMIT 100) and a bar chart's aggregate over a private table (COUNT(*) metric, GROUP BY
-- a dimension, ORDER BY the metric, row limit 10000). Source: apache/superset
-- superset/db_engine_specs/base.py (select_star, get_table_names), superset/models/helpers.py
-- (get_sqla_query), rendered for PostgreSQL.
-- Statements end with ";" at the end of a line; "-- expect: a, b" lists values that must
-- appear in the statement's result.

SELECT 1;

-- expect: public
select current_schema();

-- expect: 1, 2, 3
SELECT product_id AS product_id, name AS name, category AS category, price AS price
FROM public.products
LIMIT 100;

-- expect: 1, 2, 3, 10
SELECT quantity AS quantity, count(*) AS count
FROM public.orders GROUP BY quantity ORDER BY count DESC
LIMIT 10000;
