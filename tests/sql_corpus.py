"""The differential corpus: SQL that analysts, DP SQL workloads and BI tools write, over the
demo schema (orders, customers and recommendations private; products public).

Written for dpgate from the shapes of public examples: DP SQL test workloads (counts,
sums and averages under filters, histograms, joins), the SQL Superset, Metabase, Grafana
and Tableau generate (quoted schema-qualified names, time buckets, LIMIT 10000, column
probes with LIMIT 0 or 1, Tableau's `SUM(1)` and quoted `"cnt:…:ok"` aliases), TPC-H's
pricing-summary and revenue queries, and the mistakes people make at a psql prompt.
Each entry is (group, SQL); tests/test_differential.py runs every one through dpgate and
directly on PostgreSQL.
"""

from __future__ import annotations

_FILTERS = [
    "",
    " WHERE quantity > 2",
    " WHERE quantity BETWEEN 2 AND 5",
    " WHERE order_date >= DATE '2025-01-01'",
    " WHERE order_date < '2024-07-01' AND quantity <> 1",
    " WHERE product_id IN (1, 2, 3, 4, 5)",
    " WHERE order_cost > 100",
    " WHERE NOT (quantity = 1 OR quantity = 2)",
    " WHERE product_id <= 100 AND order_cost BETWEEN 10 AND 500",
    " WHERE customer_id % 2 = 0",
    " WHERE order_date BETWEEN '2024-03-01' AND '2024-03-31'",
    " WHERE quantity IS NOT NULL",
]

_AGGREGATES = [
    "count(*)",
    "count(quantity)",
    "count(DISTINCT customer_id)",
    "sum(quantity)",
    "avg(quantity)",
    "sum(order_cost)",
    "avg(order_cost)",
    "count(*) AS n, sum(quantity) AS units",
    "count(*), avg(order_cost), sum(order_cost)",
    "count(*) FILTER (WHERE quantity > 3)",
]

_KEYS = ["quantity", "product_id", "order_date", "customer_id"]
_KEYED_AGGREGATES = ["count(*)", "sum(quantity)", "avg(order_cost)",
                     "count(*) AS n, sum(order_cost) AS revenue"]
_KEYED_FILTERS = ["", " WHERE quantity > 3", " WHERE order_date >= '2025-06-01'"]

_HANDWRITTEN = [
    # -- name resolution and scoping (PostgreSQL's rules) ---------------------------------
    ("names", "SELECT quantity AS product_id, count(*) FROM orders "
              "GROUP BY quantity, product_id ORDER BY 1, 2"),
    ("names", "SELECT quantity AS q, count(*) FROM orders GROUP BY q ORDER BY q"),
    ("names", "SELECT quantity AS q, count(*) AS n FROM orders GROUP BY 1 ORDER BY n DESC, q"),
    ("names", "SELECT quantity AS product_id, count(*) AS n FROM orders GROUP BY quantity "
              "ORDER BY product_id DESC"),
    ("names", "SELECT count(*) AS quantity FROM orders GROUP BY quantity HAVING quantity > 3 "
              "ORDER BY 1"),
    ("names", "SELECT quantity AS q, count(*) FROM orders GROUP BY quantity HAVING q > 3"),
    ("names", "SELECT quantity, count(*) AS n FROM orders GROUP BY quantity HAVING n > 10"),
    ("names", "SELECT quantity, count(*) FROM orders GROUP BY quantity "
              "HAVING order_date = 1"),
    ("names", "SELECT quantity, count(*) FROM orders GROUP BY quantity HAVING quantity = 'x'"),
    ("names", "SELECT o.quantity, count(*) FROM orders o GROUP BY o.quantity ORDER BY 1"),
    ("names", "SELECT \"quantity\", COUNT(*) FROM \"orders\" GROUP BY \"quantity\" ORDER BY 1"),
    ("names", "SELECT quantity, count(*) FROM orders GROUP BY 1 HAVING quantity >= 5 "
              "ORDER BY quantity DESC"),
    ("names", "SELECT quantity, count(*) FROM orders GROUP BY quantity "
              "HAVING count(*) > 100 AND quantity < 8 ORDER BY 1"),
    ("names", "SELECT quantity, count(*) FROM orders GROUP BY quantity ORDER BY count(*) DESC, "
              "quantity LIMIT 3"),
    ("names", "SELECT quantity, count(*) FROM orders GROUP BY quantity ORDER BY 2 DESC, 1 "
              "LIMIT 5 OFFSET 2"),
    ("names", "SELECT quantity FROM orders GROUP BY quantity"),
    ("names", "SELECT quantity FROM orders GROUP BY quantity ORDER BY quantity DESC"),
    ("names", "SELECT quantity, product_id FROM orders GROUP BY quantity, product_id "
              "ORDER BY 1, 2"),
    ("names", "SELECT customer_id FROM orders GROUP BY customer_id"),
    ("names", "SELECT count(*) FROM orders GROUP BY quantity ORDER BY 1"),
    ("names", "SELECT quantity, count(*) FROM orders GROUP BY quantity, quantity ORDER BY 1"),
    ("names", "SELECT quantity AS a, quantity AS b, count(*) FROM orders GROUP BY quantity "
              "ORDER BY a"),
    # -- what PostgreSQL itself rejects ---------------------------------------------------
    ("errors", "SELECT cout(*) FROM orders"),
    ("errors", "SELCT count(*) FROM orders"),
    ("errors", "SELECT count(*) FROM ordrs"),
    ("errors", "SELECT count(*) FROM orders WHERE quantity = 'many'"),
    ("errors", "SELECT count(*) FROM orders WHERE quantity > "),
    ("errors", "SELECT sum(name) FROM customers"),
    ("errors", "SELECT quantity, count(*) FROM orders"),
    ("errors", "SELECT count(*) FROM orders GROUP BY 7"),
    ("errors", "SELECT count(nosuchcolumn) FROM orders"),
    ("errors", "SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.id"),
    ("errors", "SELECT avg(order_date) FROM orders"),
    ("errors", "SELECT count(*) FROM orders WHERE order_date > 5"),
    # -- literals as PostgreSQL 16 reads them (relayed, hidden row counts, private) ------
    ("literals", "SELECT 0x1F, 1_000, 0o17, 0b101, 1_000.5, .5e1_0"),
    ("literals", "SELECT n_live_tup, 0x1F AS hex, 1_000 AS thousand FROM pg_stat_user_tables "
                 "WHERE relname = 'no_such_table'"),
    ("literals", "SELECT count(*) FROM orders WHERE quantity > 0x3 AND order_cost < 1_000"),
    ("literals", "SELECT count(*) FROM products WHERE product_id > 17 AND price < 0x1F"),
    ("literals", "SELECT name FROM products WHERE product_id < 3 AND name <> 'a' -- continued\n'b' "
                 "ORDER BY 1"),
    ("literals", "SELECT 'a' 'b'"),
    ("literals", "SELECT 'a' -- one string, continued on the next line\n'b'"),
    ("literals", "SELECT count(*) FROM orders WHERE order_date > '2025' '-01-01'"),
    ("literals", "SELECT count(*) FROM orders WHERE order_date > '2025' -- continued\n'-01-01'"),
    ("literals", "SELECT 123abc"),
    ("literals", "SELECT count(*) FROM orders WHERE quantity > 1__0"),
    ("literals", "SELECT 0x"),
    # -- DP SQL workloads: joins, public tables, subqueries --------------------------------
    ("joins", "SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id"),
    ("joins", "SELECT count(*) FROM orders o JOIN products p ON o.product_id = p.product_id "
              "WHERE p.category = 'Books'"),
    ("joins", "SELECT p.category, count(*) FROM orders o JOIN products p "
              "ON o.product_id = p.product_id GROUP BY p.category ORDER BY 1"),
    ("joins", "SELECT p.category, sum(o.order_cost) AS revenue FROM orders o JOIN products p "
              "ON o.product_id = p.product_id GROUP BY p.category ORDER BY revenue DESC, 1"),
    ("joins", "SELECT p.category, avg(o.quantity) FROM orders o JOIN products p "
              "ON o.product_id = p.product_id GROUP BY 1 ORDER BY 1"),
    ("joins", "SELECT count(*) FROM orders o, customers c WHERE o.customer_id = c.customer_id "
              "AND o.quantity > 5"),
    ("joins", "SELECT count(*) FROM orders o JOIN recommendations r "
              "ON o.customer_id = r.customer_id"),
    ("joins", "SELECT count(*) FROM orders o1 JOIN orders o2 ON o1.customer_id = o2.customer_id"),
    ("joins", "SELECT count(*) FROM orders o JOIN products p USING (product_id) "
              "WHERE p.price > 50"),
    ("joins", "SELECT count(*) FROM customers"),
    ("joins", "SELECT count(*) FROM recommendations"),
    ("joins", "SELECT count(DISTINCT product_id) FROM recommendations"),
    ("joins", "SELECT count(*) FROM orders WHERE product_id IN "
              "(SELECT product_id FROM products WHERE category = 'Garden')"),
    ("joins", "SELECT count(*) FROM orders o LEFT JOIN customers c "
              "ON o.customer_id = c.customer_id"),
    ("joins", "SELECT count(*) FROM orders o CROSS JOIN products p"),
    ("joins", "SELECT count(*) FROM orders o CROSS JOIN products p "
              "WHERE p.category = 'Books' AND o.quantity > 9"),
    ("joins", "SELECT count(*) FROM orders o LEFT JOIN products p "
              "ON o.product_id = p.product_id"),
    ("joins", "SELECT p.category, count(*) FROM orders o LEFT JOIN products p "
              "ON o.product_id = p.product_id GROUP BY 1 ORDER BY 1"),
    ("joins", "SELECT count(*), count(o.order_id) FROM customers c LEFT JOIN orders o "
              "ON o.customer_id = c.customer_id"),
    ("joins", "SELECT count(*) FROM orders o RIGHT JOIN customers c "
              "ON o.customer_id = c.customer_id AND o.quantity > 5"),
    ("joins", "SELECT count(*) FROM orders o FULL JOIN customers c "
              "ON o.customer_id = c.customer_id"),
    ("joins", "SELECT sum(o.quantity) FROM products p LEFT JOIN orders o "
              "ON o.product_id = p.product_id"),
    ("joins", "SELECT count(*) FROM orders o LEFT JOIN customers c USING (customer_id) "
              "WHERE c.customer_id IS NULL"),
    ("joins", "SELECT count(*) FROM orders o FULL JOIN customers c USING (customer_id)"),
    ("joins", "SELECT count(customer_id), count(o.order_id) FROM orders o FULL JOIN customers c "
              "USING (customer_id) WHERE customer_id < 5000"),
    ("joins", "SELECT count(*) FROM orders o LEFT JOIN customers c USING (customer_id) "
              "JOIN recommendations r USING (customer_id)"),
    ("joins", "SELECT count(*) FROM orders WHERE quantity > ALL "
              "(SELECT product_id FROM products WHERE product_id < 4)"),
    ("joins", "SELECT count(*) FROM orders WHERE product_id <> ALL "
              "(SELECT product_id FROM products WHERE category = 'Garden')"),
    ("joins", "SELECT count(*) FROM (SELECT customer_id FROM orders UNION "
              "SELECT customer_id FROM recommendations) AS u"),
    ("joins", "SELECT count(*) FROM (SELECT customer_id FROM orders INTERSECT "
              "SELECT customer_id FROM customers) AS s"),
    ("joins", "SELECT count(*) FROM (SELECT customer_id FROM customers EXCEPT "
              "SELECT customer_id FROM orders) AS s"),
    ("joins", "SELECT count(*) FROM (SELECT product_id FROM orders INTERSECT ALL "
              "SELECT product_id FROM products) AS s"),
    ("joins", "SELECT count(*) FROM (SELECT customer_id FROM orders EXCEPT ALL "
              "SELECT customer_id FROM recommendations) AS s"),
    ("joins", "SELECT count(*) FROM (SELECT customer_id, product_id FROM orders UNION "
              "SELECT customer_id, product_id FROM recommendations) AS u "
              "JOIN customers c ON c.customer_id = u.customer_id"),
    ("joins", "SELECT count(*) FROM (SELECT * FROM orders WHERE quantity > 2) AS s"),
    ("joins", "WITH big AS (SELECT * FROM orders WHERE order_cost > 200) "
              "SELECT count(*) FROM big"),
    ("joins", "WITH t AS (SELECT count(*) AS n FROM orders) SELECT * FROM t"),
    ("joins", "SELECT n FROM (SELECT count(*) AS n FROM orders) AS s"),
    ("joins", "SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM customers"),
    ("joins", "SELECT count(*) FROM products"),
    ("joins", "SELECT category, count(*), avg(price) FROM products GROUP BY category "
              "ORDER BY 1"),
    # -- rows and raw values: refused for privacy -----------------------------------------
    ("rows", "SELECT * FROM orders"),
    ("rows", "SELECT order_id, order_cost FROM orders LIMIT 10"),
    ("rows", "SELECT name FROM customers WHERE customer_id = 42"),
    ("rows", "SELECT DISTINCT quantity FROM orders"),
    ("rows", "SELECT DISTINCT quantity, product_id FROM orders ORDER BY 1, 2"),
    ("rows", "SELECT quantity, count(*) FROM orders GROUP BY quantity "
             "ORDER BY count(*) DESC LIMIT 1"),
    ("rows", "SELECT address, count(*) FROM customers GROUP BY address"),
    ("rows", "SELECT sum(order_id) FROM orders"),
    ("rows", "SELECT count(*) FROM orders WHERE order_id = (SELECT max(order_id) FROM orders)"),
    ("rows", "SELECT min(order_cost), max(order_cost) FROM orders"),
    ("rows", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY order_cost) FROM orders"),
    ("rows", "SELECT mode() WITHIN GROUP (ORDER BY quantity) FROM orders"),
    # -- post-processing of released aggregates -------------------------------------------
    ("post", "SELECT (count(*)) FROM orders"),
    ("post", "SELECT (sum(quantity)) FROM orders"),
    ("post", "SELECT count(*) * 2 FROM orders"),
    ("post", "SELECT count(*) * 100.0 / 7 FROM orders"),
    ("post", "SELECT sum(quantity) / count(*) FROM orders"),
    ("post", "SELECT 3 AS three, count(*) FROM orders"),
    ("post", "SELECT 'total' AS label, count(*) FROM orders"),
    ("post", "SELECT round(avg(order_cost), 2) FROM orders"),
    ("post", "SELECT round(avg(quantity)) FROM orders"),
    ("post", "SELECT count(*)::float8 FROM orders"),
    ("post", "SELECT CAST(sum(order_cost) AS integer) FROM orders"),
    ("post", "SELECT CASE WHEN count(*) > 1000 THEN 'many' ELSE 'few' END FROM orders"),
    ("post", "SELECT quantity, count(*) * 100.0 / 5000 AS pct FROM orders GROUP BY quantity "
             "ORDER BY 1"),
    ("post", "SELECT quantity, count(*) FROM orders GROUP BY quantity "
             "HAVING quantity * 1000 < 3000 ORDER BY 1"),
    ("post", "SELECT quantity, count(*) FROM orders GROUP BY quantity "
             "HAVING count(*) * 2 > 100 ORDER BY 1"),
    ("post", "SELECT quantity, sum(order_cost) / count(*) AS mean FROM orders "
             "GROUP BY quantity ORDER BY 1"),
    ("post", "SELECT quantity, count(*) FROM orders GROUP BY quantity "
             "ORDER BY count(*) * -1, 1"),
    # -- derived aggregates ----------------------------------------------------------------
    ("derived", "SELECT var_samp(quantity) FROM orders"),
    ("derived", "SELECT var_pop(quantity) FROM orders"),
    ("derived", "SELECT variance(order_cost) FROM orders"),
    ("derived", "SELECT stddev(quantity) FROM orders"),
    ("derived", "SELECT stddev_samp(order_cost) FROM orders WHERE quantity > 2"),
    ("derived", "SELECT stddev_pop(quantity) FROM orders"),
    ("derived", "SELECT quantity, stddev(order_cost), var_pop(order_cost) FROM orders "
                "GROUP BY quantity ORDER BY 1"),
    ("derived", "SELECT sum(CASE WHEN quantity > 3 THEN 1 ELSE 0 END) FROM orders"),
    ("derived", "SELECT count(*) FILTER (WHERE order_cost > 100) AS big, count(*) FROM orders"),
    ("derived", "SELECT quantity, count(*) FILTER (WHERE order_cost > 100) FROM orders "
                "GROUP BY quantity ORDER BY 1"),
    ("derived", "SELECT sum(quantity) FILTER (WHERE order_date >= '2025-01-01') FROM orders"),
    ("derived", "SELECT count(CASE WHEN quantity > 3 THEN 1 END) FROM orders"),
    ("derived", "SELECT sum(quantity * 2) FROM orders"),
    ("derived", "SELECT avg(quantity::numeric) FROM orders"),
    # expressions inside aggregates: bounds by interval arithmetic (aggregate_args.py)
    ("derived", "SELECT sum(quantity * order_cost) FROM orders"),
    ("derived", "SELECT sum(order_cost * (1 - 0.15)) AS revenue FROM orders"),
    ("derived", "SELECT sum(CASE WHEN quantity > 3 THEN quantity * order_cost ELSE 0 END) / "
                "sum(quantity * order_cost) AS share FROM orders"),
    ("derived", "SELECT avg(order_cost / 100.0), sum(-quantity) FROM orders"),
    ("derived", "SELECT sum(abs(quantity - 5)), avg(greatest(quantity, 3)) FROM orders"),
    ("derived", "SELECT quantity, sum(order_cost * 1.2) FROM orders GROUP BY quantity "
                "ORDER BY 1"),
    ("derived", "SELECT sum(quantity::float8 * 2) FROM orders WHERE order_cost > 100"),
    ("derived", "SELECT sum(quantity / 2) FROM orders"),
    ("derived", "SELECT avg(quantity / 3), sum(quantity % 4), sum(order_cost / 4) FROM orders"),
    ("derived", "SELECT quantity, sum((quantity + 1) / -2) FROM orders GROUP BY 1 ORDER BY 1"),
    ("derived", "SELECT sum(CASE WHEN quantity > 5 THEN order_cost % 100 ELSE quantity / 2 END) "
                "FROM orders"),
    ("derived", "SELECT count(DISTINCT product_id) FROM orders"),
    ("derived", "SELECT count(DISTINCT quantity) FROM orders WHERE order_cost > 1000"),
    # -- BI tools: Superset ---------------------------------------------------------------
    ("superset", "SELECT date_trunc('month', order_date) AS __timestamp, count(*) AS count "
                 "FROM public.orders GROUP BY date_trunc('month', order_date) "
                 "ORDER BY count DESC LIMIT 10000"),
    ("superset", "SELECT date_trunc('year', order_date) AS __timestamp, "
                 "sum(order_cost) AS \"SUM(order_cost)\" FROM public.orders "
                 "GROUP BY date_trunc('year', order_date) LIMIT 50000"),
    ("superset", "SELECT quantity AS quantity, count(*) AS count FROM public.orders "
                 "GROUP BY quantity ORDER BY count DESC LIMIT 100"),
    ("superset", "SELECT count(*) AS count FROM public.orders LIMIT 50000"),
    ("superset", "SELECT quantity AS quantity, sum(order_cost) AS \"SUM(order_cost)\" "
                 "FROM public.orders WHERE order_date >= TO_DATE('2024-01-01', 'YYYY-MM-DD') "
                 "GROUP BY quantity ORDER BY \"SUM(order_cost)\" DESC LIMIT 10000"),
    ("superset", "SELECT product_id AS product_id, count(*) AS count FROM public.orders "
                 "GROUP BY product_id ORDER BY count DESC, product_id LIMIT 10"),
    ("superset", "SELECT avg(order_cost) AS \"AVG(order_cost)\" FROM public.orders "
                 "WHERE quantity IN (1, 2) LIMIT 50000"),
    ("superset", "SELECT DATE_TRUNC('week', order_date) AS __timestamp, count(*) AS count "
                 "FROM public.orders GROUP BY DATE_TRUNC('week', order_date) LIMIT 10000"),
    # Explore's Samples tab counts the rows first (charged: a number about the data).
    ("superset", "SELECT COUNT(*) AS \"COUNT(*)\" FROM public.orders LIMIT 50000"),
    # Saving a virtual dataset from SQL Lab runs its SQL (sqlglot-formatted) with LIMIT 1
    # to learn its columns; a dataset of rows is a column probe
    # (rewriter/analysis/probes.py).
    ("superset", "SELECT\n  o.order_date,\n  o.quantity,\n  p.category\nFROM orders AS o\n"
                 "JOIN products AS p\n  ON o.product_id = p.product_id\nLIMIT 1"),
    ("superset", "SELECT\n  customer_id,\n  SUM(order_id)\nFROM orders\nGROUP BY\n"
                 "  customer_id\nLIMIT 1"),
    # A chart over that virtual dataset: Superset wraps its SQL as virtual_table.
    ("superset", "SELECT category AS category, COUNT(*) AS count FROM (SELECT o.order_date, "
                 "o.quantity, p.category FROM orders o JOIN products p "
                 "ON o.product_id = p.product_id) AS virtual_table GROUP BY category "
                 "ORDER BY count DESC LIMIT 10000"),
    ("superset", "SELECT DATE_TRUNC('month', order_date) AS order_date, SUM(quantity) AS "
                 "\"SUM(quantity)\" FROM (SELECT o.order_date, o.quantity, p.category "
                 "FROM orders o JOIN products p ON o.product_id = p.product_id) AS "
                 "virtual_table WHERE category IN ('Books', 'Toys') GROUP BY "
                 "DATE_TRUNC('month', order_date) ORDER BY order_date ASC LIMIT 10000"),
    # -- BI tools: Metabase ---------------------------------------------------------------
    ("metabase", "SELECT count(*) AS \"count\" FROM \"public\".\"orders\""),
    ("metabase", "SELECT \"public\".\"orders\".\"quantity\" AS \"quantity\", count(*) AS "
                 "\"count\" FROM \"public\".\"orders\" GROUP BY \"public\".\"orders\".\"quantity\" "
                 "ORDER BY \"public\".\"orders\".\"quantity\" ASC"),
    ("metabase", "SELECT sum(\"public\".\"orders\".\"order_cost\") AS \"sum\" "
                 "FROM \"public\".\"orders\""),
    ("metabase", "SELECT avg(\"public\".\"orders\".\"quantity\") AS \"avg\" "
                 "FROM \"public\".\"orders\" WHERE \"public\".\"orders\".\"quantity\" > 1"),
    ("metabase", "SELECT CAST(date_trunc('month', \"public\".\"orders\".\"order_date\") AS "
                 "date) AS \"order_date\", count(*) AS \"count\" FROM \"public\".\"orders\" "
                 "GROUP BY CAST(date_trunc('month', \"public\".\"orders\".\"order_date\") AS date)"
                 " ORDER BY CAST(date_trunc('month', \"public\".\"orders\".\"order_date\") AS "
                 "date) ASC"),
    ("metabase", "SELECT \"public\".\"orders\".\"order_date\" AS \"order_date\", count(*) AS "
                 "\"count\" FROM \"public\".\"orders\" GROUP BY "
                 "\"public\".\"orders\".\"order_date\" "
                 "ORDER BY \"public\".\"orders\".\"order_date\" ASC"),
    ("metabase", "SELECT \"source\".\"count\" AS \"count\" FROM (SELECT count(*) AS \"count\" "
                 "FROM \"public\".\"orders\") AS \"source\" LIMIT 1048575"),
    ("metabase", "SELECT \"public\".\"orders\".\"product_id\" AS \"product_id\", "
                 "sum(\"public\".\"orders\".\"quantity\") AS \"sum\" FROM \"public\".\"orders\" "
                 "GROUP BY \"public\".\"orders\".\"product_id\" ORDER BY "
                 "\"public\".\"orders\".\"product_id\" ASC"),
    ("metabase", "SELECT count(distinct \"public\".\"orders\".\"customer_id\") AS \"count\" "
                 "FROM \"public\".\"orders\""),
    ("metabase", "SELECT extract(year from \"public\".\"orders\".\"order_date\") AS "
                 "\"order_date\", count(*) AS \"count\" FROM \"public\".\"orders\" GROUP BY "
                 "extract(year from \"public\".\"orders\".\"order_date\") ORDER BY "
                 "extract(year from \"public\".\"orders\".\"order_date\") ASC"),
    # binning a number column, a relative date filter, a question over a saved question
    ("metabase", "SELECT ((floor(((\"public\".\"orders\".\"quantity\" - 1.0) / 1.0)) * 1.0) "
                 "+ 1.0) AS \"quantity\", count(*) AS \"count\" FROM \"public\".\"orders\" "
                 "GROUP BY ((floor(((\"public\".\"orders\".\"quantity\" - 1.0) / 1.0)) * 1.0) "
                 "+ 1.0) ORDER BY ((floor(((\"public\".\"orders\".\"quantity\" - 1.0) / 1.0)) "
                 "* 1.0) + 1.0) ASC"),
    ("metabase", "SELECT count(*) AS \"count\" FROM \"public\".\"orders\" WHERE "
                 "(\"public\".\"orders\".\"order_date\" >= CAST((NOW() + INTERVAL '-30 day') "
                 "AS date)) AND (\"public\".\"orders\".\"order_date\" < CAST(NOW() AS date))"),
    ("metabase", "SELECT \"source\".\"quantity\" AS \"quantity\", \"source\".\"count\" AS "
                 "\"count\" FROM (SELECT \"public\".\"orders\".\"quantity\" AS \"quantity\", "
                 "count(*) AS \"count\" FROM \"public\".\"orders\" GROUP BY "
                 "\"public\".\"orders\".\"quantity\" ORDER BY \"public\".\"orders\".\"quantity\" "
                 "ASC) AS \"source\" LIMIT 2000"),
    # -- BI tools: Grafana (macros expanded) ----------------------------------------------
    ("grafana", "SELECT order_date AS \"time\", count(*) AS \"orders\" FROM orders "
                "WHERE order_date BETWEEN '2024-01-01' AND '2024-12-31' GROUP BY 1 ORDER BY 1"),
    ("grafana", "SELECT date_trunc('day', order_date) AS \"time\", count(*) FROM orders "
                "GROUP BY 1 ORDER BY 1"),
    ("grafana", "SELECT order_date AS \"time\", sum(order_cost) AS revenue FROM orders "
                "WHERE order_date >= '2025-12-01' GROUP BY 1 ORDER BY 1"),
    ("grafana", "SELECT floor(extract(epoch from order_date)/86400)*86400 AS \"time\", "
                "count(*) FROM orders GROUP BY 1 ORDER BY 1"),
    # Grafana writes ORDER BY 1; rows tied on the time come back in PostgreSQL's arbitrary
    # order, which no ordered comparison can match, so the metric orders the ties here.
    ("grafana", "SELECT order_date AS \"time\", quantity::text AS metric, count(*) "
                "FROM orders GROUP BY 1, 2 ORDER BY 1, 2"),
    ("grafana", "SELECT order_date AS \"time\", avg(quantity) AS \"avg\" FROM orders "
                "WHERE order_date BETWEEN '2025-01-01' AND '2025-01-31' GROUP BY 1 ORDER BY 1"),
    # $__timeGroupAlias(order_date, '1d') and $__timeFilter(order_date), expanded
    ("grafana", "SELECT floor(extract(epoch from order_date)/86400)*86400 AS \"time\", "
                "count(*) AS \"orders\" FROM orders WHERE order_date BETWEEN "
                "'2024-01-01T00:00:00Z' AND '2024-03-31T23:59:59Z' GROUP BY 1 ORDER BY 1"),
    ("grafana", "SELECT floor(extract(epoch from order_date)/604800)*604800 AS \"time\", "
                "sum(order_cost) AS \"revenue\" FROM orders WHERE order_date BETWEEN "
                "'2024-01-01T00:00:00Z' AND '2024-12-31T23:59:59Z' GROUP BY 1 ORDER BY 1"),
    ("grafana", "SELECT floor(extract(epoch from order_date)/60)*60 AS \"time\", count(*) "
                "FROM orders WHERE order_date >= to_timestamp(1735689600) AND "
                "order_date <= to_timestamp(1738367999) GROUP BY 1 ORDER BY 1"),
    # -- BI tools: Tableau (its PostgreSQL dialect) ---------------------------------------
    ("tableau", "SELECT \"orders\".\"quantity\" AS \"quantity\", SUM(1) AS "
                "\"cnt:orders_6A8F3C:ok\" FROM \"public\".\"orders\" \"orders\" GROUP BY 1 "
                "ORDER BY 1"),
    ("tableau", "SELECT DATE_TRUNC('MONTH', CAST(\"orders\".\"order_date\" AS TIMESTAMP)) AS "
                "\"tmn:order_date:ok\", COUNT(1) AS \"cnt:orders:ok\" FROM \"public\".\"orders\" "
                "\"orders\" GROUP BY 1 ORDER BY 1"),
    ("tableau", "SELECT DATE_TRUNC('MONTH', CAST(\"orders\".\"order_date\" AS TIMESTAMP)) AS "
                "\"tmn:order_date:ok\", COUNT(1) AS \"cnt:orders:ok\" FROM \"public\".\"orders\" "
                "\"orders\" WHERE (CAST(\"orders\".\"order_date\" AS TIMESTAMP) >= "
                "TIMESTAMP '2024-01-01 00:00:00') GROUP BY 1 ORDER BY 1"),
    ("tableau", "SELECT CAST(EXTRACT(YEAR FROM \"orders\".\"order_date\") AS BIGINT) AS "
                "\"yr:order_date:ok\", SUM(\"orders\".\"order_cost\") AS \"sum:order_cost:ok\" "
                "FROM \"public\".\"orders\" \"orders\" GROUP BY 1 ORDER BY 1"),
    ("tableau", "SELECT SUM(CAST(\"orders\".\"quantity\" AS BIGINT)) AS \"sum:quantity:ok\" "
                "FROM \"public\".\"orders\" \"orders\" HAVING (COUNT(1) > 0)"),
    ("tableau", "SELECT \"orders\".\"product_id\" AS \"product_id\" FROM \"public\".\"orders\" "
                "\"orders\" GROUP BY 1 ORDER BY 1"),
    ("tableau", "SELECT AVG(CAST(\"orders\".\"quantity\" AS DOUBLE PRECISION)) AS "
                "\"avg:quantity:ok\" FROM \"public\".\"orders\" \"orders\""),
    ("tableau", "SELECT COUNT(DISTINCT \"orders\".\"customer_id\") AS \"ctd:customer_id:ok\" "
                "FROM \"public\".\"orders\" \"orders\""),
    ("tableau", "SELECT \"products\".\"category\" AS \"category\", SUM(\"orders\".\"order_cost\") "
                "AS \"sum:order_cost:ok\" FROM \"public\".\"orders\" \"orders\" INNER JOIN "
                "\"public\".\"products\" \"products\" ON (\"orders\".\"product_id\" = "
                "\"products\".\"product_id\") GROUP BY 1 ORDER BY 1"),
    # custom SQL: its columns first, with LIMIT 0
    ("tableau", "SELECT * FROM (SELECT o.order_date, o.quantity FROM orders o) "
                "\"Custom SQL Query\" LIMIT 0"),
    # -- TPC-H style ------------------------------------------------------------------------
    ("tpch", "SELECT quantity, sum(order_cost) AS sum_cost, avg(order_cost) AS avg_cost, "
             "count(*) AS count_order FROM orders WHERE order_date <= DATE '2025-09-02' "
             "GROUP BY quantity ORDER BY quantity"),
    ("tpch", "SELECT sum(order_cost) AS revenue FROM orders WHERE order_date >= "
             "DATE '2024-01-01' AND order_date < DATE '2025-01-01' AND quantity < 5"),
    ("tpch", "SELECT p.category, sum(o.order_cost) AS revenue, count(*) AS orders "
             "FROM orders o JOIN products p ON o.product_id = p.product_id "
             "WHERE o.order_date >= DATE '2025-01-01' GROUP BY p.category "
             "ORDER BY revenue DESC, 1"),
    ("tpch", "SELECT sum(o.quantity) FROM orders o JOIN products p "
             "ON o.product_id = p.product_id WHERE p.category IN ('Books', 'Garden')"),
    ("tpch", "SELECT count(*) FROM orders WHERE order_date >= DATE '2024-10-01' "
             "AND order_date < DATE '2024-10-01' + INTERVAL '3 month'"),
    ("tpch", "SELECT quantity, count(*) AS order_count FROM orders WHERE order_date >= "
             "DATE '2025-07-01' GROUP BY quantity ORDER BY quantity"),
    ("tpch", "SELECT 100.00 * sum(CASE WHEN quantity > 5 THEN order_cost ELSE 0 END) / "
             "sum(order_cost) AS promo_revenue FROM orders"),
    ("tpch", "SELECT sum(order_cost) / 7.0 AS avg_yearly FROM orders WHERE quantity < 2"),
    ("tpch", "SELECT extract(year FROM order_date) AS o_year, sum(order_cost) FROM orders "
             "GROUP BY o_year ORDER BY o_year"),
    ("tpch", "SELECT count(*) FROM customers c WHERE c.customer_id IN "
             "(SELECT customer_id FROM orders)"),
    # -- functions of releasable columns --------------------------------------------------
    ("buckets", "SELECT quantity % 3 AS r, count(*) FROM orders GROUP BY 1 ORDER BY 1"),
    ("buckets", "SELECT CASE WHEN quantity < 5 THEN 'small' ELSE 'large' END AS size, "
                "count(*) FROM orders GROUP BY 1 ORDER BY 1"),
    ("buckets", "SELECT extract(month FROM order_date) AS m, count(*) FROM orders "
                "GROUP BY 1 ORDER BY 1"),
    ("buckets", "SELECT date_trunc('quarter', order_date)::date AS q, count(*) FROM orders "
                "GROUP BY 1 ORDER BY 1"),
    ("buckets", "SELECT to_char(order_date, 'YYYY-MM') AS month, count(*) FROM orders "
                "GROUP BY 1 ORDER BY 1"),
    # computed keys evaluated on the declared domain only (rewriter/analysis/buckets.py)
    ("buckets", "SELECT quantity::text AS q, count(*) FROM orders GROUP BY 1 ORDER BY 1"),
    ("buckets", "SELECT (quantity - 1) / 3 AS b, count(*), sum(order_cost) FROM orders "
                "GROUP BY 1 ORDER BY 1"),
    ("buckets", "SELECT width_bucket(quantity, 1, 11, 5) AS b, count(*) FROM orders "
                "GROUP BY 1 ORDER BY 1"),
    ("buckets", "SELECT to_char(order_date, 'YYYY-\"Q\"Q') AS quarter, count(*) FROM orders "
                "WHERE order_date >= '2025-01-01' GROUP BY 1 ORDER BY 1"),
    ("buckets", "SELECT extract(isodow FROM order_date) AS dow, quantity % 2 AS odd, count(*) "
                "FROM orders GROUP BY 1, 2 ORDER BY 1, 2"),
    ("buckets", "SELECT round(quantity / 4.0) AS b, avg(order_cost) FROM orders "
                "GROUP BY 1 ORDER BY 1"),
    # -- queries over an aggregate subquery or CTE (post-processing of its answer) -------
    ("outer", "SELECT sum(n) AS total FROM (SELECT quantity, count(*) AS n FROM orders "
              "GROUP BY quantity) AS s"),
    ("outer", "WITH m AS (SELECT date_trunc('month', order_date) AS month, count(*) AS n "
              "FROM orders GROUP BY 1) SELECT month, n FROM m WHERE n > 100 ORDER BY month"),
    ("outer", "SELECT s.q, s.n * 2 AS twice FROM (SELECT quantity AS q, count(*) AS n "
              "FROM orders GROUP BY quantity) AS s ORDER BY 1"),
    ("outer", "SELECT max(n) FROM (SELECT quantity, count(*) AS n FROM orders "
              "GROUP BY quantity) AS s"),
    # -- found by the audit: arrays, nested stars, aggregates over released groups ----------
    ("audit", "SELECT count(*) FROM orders WHERE quantity = ANY('{1,2}')"),
    ("audit", "SELECT count(*) FROM orders WHERE quantity = ANY(ARRAY[1, 2, 3])"),
    ("audit", "SELECT count(*) FROM orders WHERE product_id = ANY(SELECT product_id "
              "FROM products WHERE price > 100)"),
    ("audit", "SELECT count(*) FROM orders WHERE quantity > ALL(SELECT 5)"),
    ("audit", "SELECT count(*) FROM (SELECT * FROM (SELECT * FROM orders) AS x) AS y "
              "WHERE y.quantity = 1"),
    ("audit", "WITH a AS (SELECT * FROM orders), b AS (SELECT * FROM a) "
              "SELECT count(*) FROM a JOIN b ON a.order_id = b.order_id"),
    ("audit", "SELECT count(*) FROM (SELECT product_id, count(*) AS n FROM orders "
              "WHERE quantity = 10 GROUP BY product_id) AS s"),
    ("audit", "SELECT count(*) FROM (SELECT customer_id, count(*) AS n FROM orders "
              "GROUP BY customer_id HAVING count(*) > 1) AS s"),
    ("audit", "SELECT quantity, count(*) FROM orders GROUP BY quantity ORDER BY 1 LIMIT 1 + 2"),
    ("audit", "SELECT quantity, count(*) FROM orders GROUP BY quantity "
              "LIMIT (SELECT count(*) FROM orders WHERE customer_id = 1)"),
    ("audit", "SELECT count(*) FROM orders WHERE order_cost * 1e100 > 0"),
    ("audit", "SELECT count(*) FROM orders WHERE order_cost::numeric(10, 2) > 100"),
    ("audit", "SELECT count(*), sum(quantity) FROM orders WHERE order_cost::numeric(5, 1) < 1000 "
              "AND quantity::decimal(3) > 2"),
    # -- PostgreSQL's exact answer shape (issue 28) --------------------------------------
    ("shapes", "SELECT avg(quantity), sum(quantity) / 10 FROM orders"),
    ("shapes", "SELECT avg(quantity), sum(quantity), count(*) * 2 FROM orders"),
    ("shapes", "SELECT quantity::char(4) AS q, count(*) FROM orders GROUP BY 1 ORDER BY 1"),
    ("shapes", "SELECT count(*) FROM (SELECT * FROM orders)"),
    ("shapes", "SELECT count(*) FROM (SELECT * FROM orders WHERE quantity > 2)"),
    # a declared domain wider than the data: ordered or limited, empty keys are dropped
    ("shapes", "SELECT order_date, count(*) FROM orders WHERE product_id = 1 "
               "GROUP BY order_date ORDER BY order_date DESC LIMIT 3"),
    ("shapes", "SELECT order_date, count(*) AS n FROM orders WHERE product_id = 1 "
               "GROUP BY order_date ORDER BY n, order_date LIMIT 3"),
    ("shapes", "SELECT quantity, count(*) FROM orders WHERE order_cost > 4000 "
               "GROUP BY quantity ORDER BY quantity DESC"),
    # -- semi- and anti-joins over private tables (rewriter/analysis/semi_joins.py) -------
    ("subqueries", "SELECT count(*) FROM customers c WHERE EXISTS "
                   "(SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id)"),
    ("subqueries", "SELECT count(*) FROM customers c WHERE NOT EXISTS "
                   "(SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id)"),
    ("subqueries", "SELECT count(*) FROM customers WHERE customer_id IN "
                   "(SELECT customer_id FROM orders WHERE quantity > 5)"),
    ("subqueries", "SELECT count(*) FROM customers c WHERE c.customer_id NOT IN "
                   "(SELECT customer_id FROM orders)"),
    ("subqueries", "SELECT count(*) FROM orders o WHERE o.product_id IN "
                   "(SELECT product_id FROM recommendations)"),
    ("subqueries", "SELECT count(*) FROM products p WHERE p.product_id IN "
                   "(SELECT product_id FROM orders WHERE quantity > 8)"),
    ("subqueries", "SELECT count(*) FROM orders WHERE customer_id IN (SELECT customer_id "
                   "FROM orders GROUP BY customer_id HAVING count(*) > 20)"),
    ("subqueries", "SELECT sum(order_cost) FROM orders o WHERE EXISTS (SELECT 1 FROM "
                   "recommendations r WHERE r.customer_id = o.customer_id AND "
                   "r.product_id = o.product_id)"),
    ("subqueries", "SELECT quantity, count(*) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM "
                   "recommendations r WHERE r.customer_id = o.customer_id AND "
                   "r.product_id = o.product_id LIMIT 1) GROUP BY quantity ORDER BY quantity"),
    ("subqueries", "SELECT count(*) FROM orders o JOIN products p ON o.product_id = p.product_id "
                   "WHERE p.category = 'Books' AND o.customer_id IN "
                   "(SELECT customer_id FROM customers WHERE address LIKE '%United States%')"),
    ("subqueries", "SELECT count(*) FROM (SELECT * FROM orders o WHERE EXISTS (SELECT 1 FROM "
                   "customers c WHERE c.customer_id = o.customer_id)) AS virtual_table"),
    # (`<`, not `>`: PostgreSQL finds a match at once; with `>` it scanned every order for
    # each of the 9,990 customers without one, minutes on a loaded machine)
    ("subqueries", "SELECT count(*) FROM customers c WHERE EXISTS "
                   "(SELECT 1 FROM orders o WHERE o.quantity < c.customer_id)"),
    # -- derived tables passing one unit per row (unit mode: rewriter/analysis/unit.py) ----
    ("derived", "SELECT count(*) FROM (SELECT * FROM (SELECT * FROM orders) AS a "
                "WHERE quantity > 2) AS b"),
    ("derived", "SELECT count(*) FROM (SELECT customer_id, count(*) AS n FROM orders "
                "GROUP BY customer_id) s WHERE n > 3"),
    ("derived", "SELECT count(*) FROM (SELECT quantity, count(*) AS n FROM orders "
                "GROUP BY quantity) s"),
    ("derived", "SELECT count(*) FROM (SELECT customer_id FROM orders UNION "
                "SELECT customer_id FROM recommendations) u"),
    ("derived", "SELECT count(*) FROM (SELECT customer_id, product_id FROM orders EXCEPT "
                "SELECT customer_id, product_id FROM recommendations) u"),
    # -- issue 28: ranks over a wide domain, Superset's TO_DATE range, mixed choices -------
    ("shapes", "SELECT quantity, sum(order_cost) FROM orders WHERE order_cost > 4000 "
               "GROUP BY quantity ORDER BY quantity DESC LIMIT 3"),
    ("superset", "SELECT date_trunc('month', order_date) AS __timestamp, count(*) AS count "
                 "FROM public.orders WHERE order_date >= TO_DATE('2024-01-01', 'YYYY-MM-DD') "
                 "AND order_date < TO_DATE('2025-01-01', 'YYYY-MM-DD') "
                 "GROUP BY date_trunc('month', order_date) ORDER BY 1 LIMIT 10000"),
    ("metabase", "SELECT count(*) AS \"count\" FROM (SELECT \"public\".\"orders\".\"quantity\" "
                 "AS \"quantity\", sum(\"public\".\"orders\".\"order_cost\") AS \"sum\" "
                 "FROM \"public\".\"orders\" GROUP BY \"public\".\"orders\".\"quantity\") "
                 "AS \"source\""),
    ("derived", "SELECT count(*), avg(quantity), percentile_cont(0.5) WITHIN GROUP "
                "(ORDER BY quantity) FROM orders"),
    # -- several releases under one charge (rewriter/aggregate/composite.py) -------------
    ("releases", "SELECT count(*), avg(quantity), percentile_cont(0.5) WITHIN GROUP "
                 "(ORDER BY quantity) FROM orders WHERE order_date >= '2025-01-01'"),
    ("releases", "SELECT percentile_disc(0.9) WITHIN GROUP (ORDER BY order_cost) AS p90, "
                 "sum(quantity), count(*) AS n FROM orders"),
    ("releases", "SELECT max(order_cost), count(*), min(quantity) FROM orders "
                 "WHERE quantity > 2"),
    ("releases", "SELECT mode() WITHIN GROUP (ORDER BY quantity), count(*) FROM orders"),
    ("releases", "SELECT count(*), percentile_cont(0.25) WITHIN GROUP (ORDER BY order_cost) "
                 "FROM orders ORDER BY 1 LIMIT 5"),
    ("releases", "SELECT count(*) AS n, percentile_disc(0.5) WITHIN GROUP (ORDER BY quantity) "
                 "FROM orders ORDER BY quantity"),
    ("releases", "SELECT count(*) * 2 AS twice, round(avg(order_cost), 2), percentile_cont(0.5) "
                 "WITHIN GROUP (ORDER BY order_cost) FROM orders"),
    ("releases", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY quantity) FROM orders "
                 "UNION ALL SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY order_cost) "
                 "FROM orders"),
    ("releases", "SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY quantity) "
                 "FROM orders UNION ALL SELECT count(*), percentile_cont(0.5) WITHIN GROUP "
                 "(ORDER BY order_cost) FROM orders WHERE quantity > 2 ORDER BY 1"),
    ("releases", "SELECT count(*) FROM orders UNION SELECT count(*) FROM customers"),
    ("releases", "SELECT count(*) FROM orders INTERSECT SELECT count(*) FROM orders"),
    ("releases", "SELECT count(*) FROM orders EXCEPT SELECT count(*) FROM customers"),
    ("releases", "SELECT count(*) FROM orders EXCEPT ALL SELECT count(*) FROM orders"),
    ("releases", "SELECT count(*) AS n FROM orders UNION ALL SELECT sum(order_cost) FROM orders"),
    ("releases", "SELECT avg(quantity) FROM orders UNION ALL SELECT count(*) FROM customers "
                 "ORDER BY 1 DESC"),
    ("releases", "SELECT 'orders' AS t, count(*) FROM orders UNION ALL "
                 "SELECT 'customers', count(*) FROM customers ORDER BY 2 DESC LIMIT 1"),
    ("releases", "SELECT quantity, count(*) FROM orders GROUP BY quantity UNION ALL "
                 "SELECT quantity, count(*) FROM orders WHERE order_cost > 100 "
                 "GROUP BY quantity ORDER BY 1, 2"),
    ("releases", "SELECT quantity, count(*) FROM orders WHERE order_cost > 4000 GROUP BY quantity "
                 "UNION SELECT quantity, count(*) FROM orders WHERE order_cost < 5 "
                 "GROUP BY quantity ORDER BY 2 DESC, 1 LIMIT 3"),
    ("releases", "SELECT count(*) FROM orders UNION ALL (SELECT count(*) FROM customers "
                 "EXCEPT SELECT count(*) FROM recommendations)"),
    ("releases", "SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM products"),
    ("releases", "SELECT count(*) FROM orders UNION ALL SELECT 0 ORDER BY 1"),
    ("releases", "(SELECT quantity FROM orders GROUP BY quantity) EXCEPT "
                 "(SELECT quantity FROM orders WHERE quantity > 5 GROUP BY quantity) ORDER BY 1"),
    ("releases", "SELECT count(*) FROM orders UNION ALL SELECT count(*), 1 FROM customers"),
    ("releases", "WITH t AS (SELECT * FROM orders) SELECT count(*) FROM t "
                 "UNION ALL SELECT count(*) FROM customers"),
    ("releases", "SELECT count(*) AS n FROM orders UNION ALL SELECT n * 2 FROM "
                 "(SELECT count(*) AS n FROM customers) AS s"),
    ("releases", "SELECT count(*) FROM orders UNION ALL SELECT order_id FROM orders"),
    ("releases", "SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM pg_class"),
    # -- issue 28, last round: a SUM over no value is NULL (from a noisy count of values)
    ("shapes", "SELECT sum(quantity) FROM orders WHERE quantity > 100"),
    ("shapes", "SELECT sum(order_cost) FROM orders WHERE quantity > 100"),
    ("shapes", "SELECT sum(order_cost), count(order_cost) FROM orders WHERE quantity > 100"),
    ("shapes", "SELECT sum(quantity), avg(quantity) FROM orders WHERE order_cost < 0"),
    ("shapes", "SELECT count(*), sum(quantity) FROM orders WHERE quantity > 100"),
    ("shapes", "SELECT sum(quantity) / 10 FROM orders WHERE quantity > 100"),
    ("shapes", "SELECT sum(order_cost) FILTER (WHERE quantity > 100), sum(quantity) FROM orders"),
    ("shapes", "SELECT sum(quantity * order_cost) FROM orders WHERE quantity > 100"),
    ("shapes", "SELECT quantity, sum(order_cost) FROM orders WHERE quantity < 3 "
               "GROUP BY quantity ORDER BY quantity"),
    ("shapes", "SELECT sum(o.order_cost) FROM orders o JOIN customers c "
               "ON o.customer_id = c.customer_id WHERE o.quantity > 100"),
    ("shapes", "SELECT sum(order_cost) FROM orders WHERE quantity > 100 HAVING count(*) >= 0"),
    # Tableau's casts: a date to TIMESTAMP in WHERE (total, and the key's domain narrowed),
    # a widening cast to DOUBLE PRECISION inside SUM/AVG
    ("tableau", "SELECT COUNT(1) AS \"cnt:orders:ok\" FROM \"public\".\"orders\" \"orders\" "
                "WHERE ((CAST(\"orders\".\"order_date\" AS TIMESTAMP) >= TIMESTAMP "
                "'2025-06-01 00:00:00') AND (CAST(\"orders\".\"order_date\" AS TIMESTAMP) < "
                "TIMESTAMP '2025-07-01 00:00:00'))"),
    ("tableau", "SELECT SUM(CAST(\"orders\".\"quantity\" AS DOUBLE PRECISION)) AS "
                "\"sum:quantity:ok\" FROM \"public\".\"orders\" \"orders\" "
                "WHERE (\"orders\".\"product_id\" = 7)"),
    ("tableau", "SELECT CAST(\"orders\".\"quantity\" AS TEXT) AS \"quantity\", "
                "AVG(CAST(\"orders\".\"quantity\" AS DOUBLE PRECISION)) AS \"avg:quantity:ok\" "
                "FROM \"public\".\"orders\" \"orders\" GROUP BY 1 ORDER BY 1"),
    # a CROSS JOIN with the public table written first
    ("joins", "SELECT count(*) FROM products p CROSS JOIN orders o "
              "WHERE p.product_id <= 3 AND o.quantity = 10"),
    ("joins", "SELECT count(*), sum(o.quantity) FROM products p, orders o "
              "WHERE p.category = 'Books' AND o.product_id = 7"),
    # -- session and settings ---------------------------------------------------------------
    ("session", "SHOW dp.epsilon"),
    ("session", "SELECT 1"),
    ("session", "SELECT now() IS NOT NULL"),
    ("session", "SELECT current_user IS NOT NULL"),
]


# Refused on purpose: no sound answer as written, argued in docs/queries.md ("Refused on
# purpose"); the coverage page says so, and each refusal must carry a hint.
REFUSED_ON_PURPOSE = frozenset({
    "SELECT count(*) FROM customers c WHERE c.customer_id NOT IN "
    "(SELECT customer_id FROM orders)",
    "SELECT count(*) FROM customers c WHERE EXISTS "
    "(SELECT 1 FROM orders o WHERE o.quantity < c.customer_id)",
    "SELECT count(*) FROM orders WHERE order_cost * 1e100 > 0",
})


def corpus() -> list[tuple[str, str]]:
    """Every (group, SQL) of the corpus, in a stable order, without duplicates."""
    queries = [("filters", f"SELECT {aggregate} FROM orders{where}")
               for aggregate in _AGGREGATES for where in _FILTERS]
    queries += [("histograms", f"SELECT {key}, {aggregate} FROM orders{where} "
                               f"GROUP BY {key} ORDER BY {key}")
                for key in _KEYS for aggregate in _KEYED_AGGREGATES for where in _KEYED_FILTERS]
    queries += [("two keys", f"SELECT quantity, {key}, count(*) FROM orders{where} "
                             f"GROUP BY quantity, {key} ORDER BY 1, 2")
                for key in ("product_id", "order_date") for where in _KEYED_FILTERS]
    queries += _HANDWRITTEN
    seen: set[str] = set()
    unique = []
    for group, sql in queries:
        if sql not in seen:
            seen.add(sql)
            unique.append((group, sql))
    return unique
