-- sum of a bounded column: L1 = τ·max(|lo|, |hi|)
SELECT sum(order_cost) FROM orders WHERE product_id = 7;
-- expect:
SELECT u."_dp_n", count(*) AS "_dp_rows", width_bucket(q."a0", ARRAY[0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0]::numeric[]) AS "b0", count(q."a0") AS "n0", sum(q."a0") AS "c0", count(q."a1") AS "c1" FROM (SELECT CASE WHEN order_cost IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(order_cost AS DECIMAL), 0.0), 5000.0) END AS "a0", order_cost AS "a1", "orders"."customer_id" AS "_dp_unit" FROM "public"."orders" WHERE product_id = 7 AND NOT "orders"."customer_id" IS NULL OFFSET 0) AS q JOIN (SELECT r."_dp_unit", count(*) AS "_dp_n" FROM (SELECT CASE WHEN order_cost IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(order_cost AS DECIMAL), 0.0), 5000.0) END AS "a0", order_cost AS "a1", "orders"."customer_id" AS "_dp_unit" FROM "public"."orders" WHERE product_id = 7 AND NOT "orders"."customer_id" IS NULL) AS r GROUP BY r."_dp_unit" ORDER BY r."_dp_unit") AS u ON u."_dp_unit" = q."_dp_unit" GROUP BY 1, 3;
-- mode: unit
-- part: sum L1=500000 L2=500000 scale=555556 flex_scale=11111.1
-- part: count L1=100 L2=100 scale=1000 flex_scale=20
-- ----
-- avg = noisy sum / noisy count, ε split between them
SELECT avg(quantity) FROM orders WHERE order_date < DATE '2024-07-01';
-- expect:
SELECT u."_dp_n", count(*) AS "_dp_rows", width_bucket(q."a0", ARRAY[2.0, 4.0, 8.0]::numeric[]) AS "b0", count(q."a0") AS "n0", sum(q."a0") AS "c0", count(q."a1") AS "c1" FROM (SELECT CASE WHEN quantity IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(quantity AS DECIMAL), 1.0), 10.0) END AS "a0", quantity AS "a1", "orders"."customer_id" AS "_dp_unit" FROM "public"."orders" WHERE order_date < CAST('2024-07-01' AS DATE) AND NOT "orders"."customer_id" IS NULL OFFSET 0) AS q JOIN (SELECT r."_dp_unit", count(*) AS "_dp_n" FROM (SELECT CASE WHEN quantity IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(quantity AS DECIMAL), 1.0), 10.0) END AS "a0", quantity AS "a1", "orders"."customer_id" AS "_dp_unit" FROM "public"."orders" WHERE order_date < CAST('2024-07-01' AS DATE) AND NOT "orders"."customer_id" IS NULL) AS r GROUP BY r."_dp_unit" ORDER BY r."_dp_unit") AS u ON u."_dp_unit" = q."_dp_unit" GROUP BY 1, 3;
-- mode: unit
-- part: sum L1=450 L2=450 scale=750 flex_scale=15
-- part: count L1=100 L2=100 scale=250 flex_scale=5
-- ----
-- variance from count, sum and sum of squares
SELECT var_samp(quantity) FROM orders;
-- expect:
SELECT u."_dp_n", count(*) AS "_dp_rows", count(q."a0") AS "c0", sum(q."a1") AS "c1", sum(q."a2") AS "c2" FROM (SELECT quantity AS "a0", CASE WHEN (CAST(quantity AS DECIMAL) - 5.5) * (CAST(quantity AS DECIMAL) - 5.5) IS NULL THEN NULL ELSE LEAST(GREATEST(CAST((CAST(quantity AS DECIMAL) - 5.5) * (CAST(quantity AS DECIMAL) - 5.5) AS DECIMAL), 0.0), 20.25) END AS "a1", CASE WHEN (CAST(quantity AS DECIMAL) - 5.5) IS NULL THEN NULL ELSE LEAST(GREATEST(CAST((CAST(quantity AS DECIMAL) - 5.5) AS DECIMAL), -4.5), 4.5) END AS "a2", "orders"."customer_id" AS "_dp_unit" FROM "public"."orders" WHERE NOT "orders"."customer_id" IS NULL OFFSET 0) AS q JOIN (SELECT r."_dp_unit", count(*) AS "_dp_n" FROM (SELECT quantity AS "a0", CASE WHEN (CAST(quantity AS DECIMAL) - 5.5) * (CAST(quantity AS DECIMAL) - 5.5) IS NULL THEN NULL ELSE LEAST(GREATEST(CAST((CAST(quantity AS DECIMAL) - 5.5) * (CAST(quantity AS DECIMAL) - 5.5) AS DECIMAL), 0.0), 20.25) END AS "a1", CASE WHEN (CAST(quantity AS DECIMAL) - 5.5) IS NULL THEN NULL ELSE LEAST(GREATEST(CAST((CAST(quantity AS DECIMAL) - 5.5) AS DECIMAL), -4.5), 4.5) END AS "a2", "orders"."customer_id" AS "_dp_unit" FROM "public"."orders" WHERE NOT "orders"."customer_id" IS NULL) AS r GROUP BY r."_dp_unit" ORDER BY r."_dp_unit") AS u ON u."_dp_unit" = q."_dp_unit" GROUP BY 1;
-- mode: unit
-- part: count L1=100 L2=100 scale=300 flex_scale=6
-- part: sum L1=2025 L2=2025 scale=6075 flex_scale=121.5
-- part: sum L1=450 L2=450 scale=1350 flex_scale=27
