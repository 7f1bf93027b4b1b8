-- sum of a bounded column: L1 = τ·max(|lo|, |hi|)
SELECT sum(order_cost) FROM orders WHERE product_id = 7;
-- expect:
SELECT sum(q."a0") AS "c0" FROM (SELECT b."a0" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT CASE WHEN order_cost IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(order_cost AS DECIMAL), 0.0), 5000.0) END AS "a0", "orders"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM "public"."orders" WHERE product_id = 7) AS b) AS b WHERE b."_dp_row" <= 10) AS q;
-- mode: unit
-- part: sum L1=50000 L2=50000 scale=50000 flex_scale=10000
-- ----
-- avg = noisy sum / noisy count, ε split between them
SELECT avg(quantity) FROM orders WHERE order_date < DATE '2024-07-01';
-- expect:
SELECT sum(q."a0") AS "c0", count(q."a1") AS "c1" FROM (SELECT b."a0", b."a1" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT CASE WHEN (CAST(quantity AS DECIMAL) - 5.5) IS NULL THEN NULL ELSE LEAST(GREATEST(CAST((CAST(quantity AS DECIMAL) - 5.5) AS DECIMAL), -4.5), 4.5) END AS "a0", quantity AS "a1", "orders"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM "public"."orders" WHERE order_date < CAST('2024-07-01' AS DATE)) AS b) AS b WHERE b."_dp_row" <= 10) AS q;
-- mode: unit
-- part: sum L1=45 L2=45 scale=90 flex_scale=18
-- part: count L1=10 L2=10 scale=20 flex_scale=4
-- ----
-- variance from count, sum and sum of squares
SELECT var_samp(quantity) FROM orders;
-- expect:
SELECT count(q."a0") AS "c0", sum(q."a1") AS "c1", sum(q."a2") AS "c2" FROM (SELECT b."a0", b."a1", b."a2" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT quantity AS "a0", CASE WHEN (CAST(quantity AS DECIMAL) - 5.5) * (CAST(quantity AS DECIMAL) - 5.5) IS NULL THEN NULL ELSE LEAST(GREATEST(CAST((CAST(quantity AS DECIMAL) - 5.5) * (CAST(quantity AS DECIMAL) - 5.5) AS DECIMAL), 0.0), 20.25) END AS "a1", CASE WHEN (CAST(quantity AS DECIMAL) - 5.5) IS NULL THEN NULL ELSE LEAST(GREATEST(CAST((CAST(quantity AS DECIMAL) - 5.5) AS DECIMAL), -4.5), 4.5) END AS "a2", "orders"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM "public"."orders") AS b) AS b WHERE b."_dp_row" <= 10) AS q;
-- mode: unit
-- part: count L1=10 L2=10 scale=30 flex_scale=6
-- part: sum L1=202.5 L2=202.5 scale=607.5 flex_scale=121.5
-- part: sum L1=45 L2=45 scale=135 flex_scale=27
