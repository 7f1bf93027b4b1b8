-- group keys without an aggregate: the domain only, no private row read [row]
SELECT quantity FROM orders GROUP BY quantity;
-- expect:
SELECT d0."k0" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 ORDER BY d0."k0";
-- ----
-- GROUP BY prefers an input column to an output alias [row]
SELECT quantity AS product_id, count(*) FROM orders GROUP BY quantity, product_id;
-- expect:
SELECT d0."k0", d1."k1", count(q."a0") AS "c0" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 CROSS JOIN (SELECT DISTINCT "product_id" AS "k1" FROM "public"."products" WHERE "product_id" IS NOT NULL) AS d1 LEFT JOIN (SELECT quantity AS "k0", product_id AS "k1", 1 AS "a0" FROM "public"."orders") AS q ON q."k0" = d0."k0" AND q."k1" = d1."k1" GROUP BY d0."k0", d1."k1" ORDER BY d0."k0", d1."k1";
-- ----
-- GROUP BY an alias that names no input column [row]
SELECT quantity AS q, count(*) FROM orders GROUP BY q;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 LEFT JOIN (SELECT quantity AS "k0", 1 AS "a0" FROM "public"."orders") AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
-- ----
-- expressions over aggregates: HAVING and ORDER BY run over released values only [row]
SELECT quantity, count(*) * 100.0 / 7 AS pct FROM orders GROUP BY quantity HAVING count(*) * 2 > 100 ORDER BY count(*) * -1, 1;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 LEFT JOIN (SELECT quantity AS "k0", 1 AS "a0" FROM "public"."orders") AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
-- post: SELECT "r"."o0" AS "quantity", "r"."o2" * 100.0 / 7 AS "pct" FROM __dpgate_released__ AS r WHERE "r"."o3" * 2 > 100 ORDER BY "r"."o4" * -1, 1
-- ----
-- FILTER is a CASE inside the aggregate [row]
SELECT count(*) FILTER (WHERE quantity > 3), sum(quantity) FILTER (WHERE order_cost > 10) FROM orders;
-- expect:
SELECT COUNT(CASE WHEN quantity > 3 THEN 1 END) AS "c0", SUM(CASE WHEN CASE WHEN order_cost > 10 THEN quantity END IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(CASE WHEN order_cost > 10 THEN quantity END AS DECIMAL), 1.0), 10.0) END) AS "c1", COUNT(CASE WHEN order_cost > 10 THEN quantity END) AS "c2" FROM "public"."orders";
-- ----
-- a private table is written qualified, its alias kept [reference]
SELECT count(*) AS n, COUNT(customer_id) FROM orders o WHERE o.product_id IN (1, 2) AND order_date >= '2024-01-01'::date;
-- expect:
SELECT COUNT(*) AS "c0", COUNT(customer_id) AS "c1" FROM "public"."orders" AS o WHERE o.product_id IN (1, 2) AND order_date >= CAST('2024-01-01' AS DATE);
