-- count of one table: per-customer counts in one scan; τ is chosen per query, at most the limit 100
SELECT count(*) FROM orders WHERE product_id = 1;
-- expect:
SELECT LEAST(h."_dp_rows", 100) AS "c0", count(*) AS "c1" FROM (SELECT count(*) AS "_dp_rows" FROM (SELECT "orders"."customer_id" AS "_dp_unit" FROM "public"."orders" WHERE product_id = 1 AND NOT "orders"."customer_id" IS NULL) AS b GROUP BY b."_dp_unit" ORDER BY b."_dp_unit") AS h GROUP BY 1 ORDER BY 1;
-- mode: unit
-- part: count L1=100 L2=100 scale=100 flex_scale=2
-- ----
-- count of a column and count with FILTER: the filter is a CASE, rows bounded first
SELECT count(quantity), count(*) FILTER (WHERE quantity > 3) FROM orders;
-- expect:
SELECT count(q."a0") AS "c0", count(q."a1") AS "c1" FROM (SELECT b."a0", b."a1" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT quantity AS "a0", CASE WHEN quantity > 3 THEN 1 END AS "a1", "orders"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM "public"."orders" WHERE NOT "orders"."customer_id" IS NULL) AS b) AS b WHERE b."_dp_row" <= 10) AS q;
-- mode: unit
-- part: count L1=10 L2=10 scale=20 flex_scale=4
-- part: count L1=10 L2=10 scale=20 flex_scale=4
-- ----
-- count of distinct values: a unit adds at most τ distinct values
SELECT count(DISTINCT product_id) FROM orders WHERE order_date >= DATE '2025-01-01';
-- expect:
SELECT count(DISTINCT q."a0") AS "c0" FROM (SELECT b."a0" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT product_id AS "a0", "orders"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM "public"."orders" WHERE order_date >= CAST('2025-01-01' AS DATE) AND NOT "orders"."customer_id" IS NULL) AS b) AS b WHERE b."_dp_row" <= 10) AS q;
-- mode: unit
-- part: count L1=10 L2=10 scale=10 flex_scale=2
-- ----
-- the unit table itself: one row per customer, its path is the unit column
SELECT count(*) FROM customers WHERE address LIKE '%France%';
-- expect:
SELECT LEAST(h."_dp_rows", 100) AS "c0", count(*) AS "c1" FROM (SELECT count(*) AS "_dp_rows" FROM (SELECT "customers"."customer_id" AS "_dp_unit" FROM "public"."customers" WHERE address LIKE '%France%' AND NOT "customers"."customer_id" IS NULL) AS b GROUP BY b."_dp_unit" ORDER BY b."_dp_unit") AS h GROUP BY 1 ORDER BY 1;
-- mode: unit
-- part: count L1=100 L2=100 scale=100 flex_scale=2
