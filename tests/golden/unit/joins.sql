-- the issue's join: USING (customer_id) makes both sides one customer's
SELECT count(*) FROM orders JOIN customers USING (customer_id) WHERE product_id = 1 AND address LIKE '%United States%';
-- expect:
SELECT LEAST(h."_dp_rows", 100) AS "c0", count(*) AS "c1" FROM (SELECT count(*) AS "_dp_rows" FROM (SELECT "orders"."customer_id" AS "_dp_unit" FROM "public"."orders" JOIN "public"."customers" USING (customer_id) WHERE (product_id = 1 AND address LIKE '%United States%') AND NOT "orders"."customer_id" IS NULL) AS b GROUP BY b."_dp_unit" ORDER BY b."_dp_unit") AS h GROUP BY 1 ORDER BY 1;
-- mode: unit
-- part: count L1=100 L2=100 scale=100 flex_scale=200
-- ----
-- a join written in WHERE
SELECT count(*) FROM orders o, customers c WHERE o.customer_id = c.customer_id AND c.address LIKE '%Japan%';
-- expect:
SELECT LEAST(h."_dp_rows", 100) AS "c0", count(*) AS "c1" FROM (SELECT count(*) AS "_dp_rows" FROM (SELECT "o"."customer_id" AS "_dp_unit" FROM "public"."orders" AS o, "public"."customers" AS c WHERE (o.customer_id = c.customer_id AND c.address LIKE '%Japan%') AND NOT "o"."customer_id" IS NULL) AS b GROUP BY b."_dp_unit" ORDER BY b."_dp_unit") AS h GROUP BY 1 ORDER BY 1;
-- mode: unit
-- part: count L1=100 L2=100 scale=100 flex_scale=200
-- ----
-- orders ⋈ recommendations on the unit: FLEX's scale grows with maxFreq, the unit's does not
SELECT count(*) FROM orders o JOIN recommendations r ON o.customer_id = r.customer_id WHERE o.product_id = r.product_id;
-- expect:
SELECT LEAST(h."_dp_rows", 100) AS "c0", count(*) AS "c1" FROM (SELECT count(*) AS "_dp_rows" FROM (SELECT "o"."customer_id" AS "_dp_unit" FROM "public"."orders" AS o JOIN "public"."recommendations" AS r ON o.customer_id = r.customer_id WHERE o.product_id = r.product_id AND NOT "o"."customer_id" IS NULL) AS b GROUP BY b."_dp_unit" ORDER BY b."_dp_unit") AS h GROUP BY 1 ORDER BY 1;
-- mode: unit
-- part: count L1=100 L2=100 scale=100 flex_scale=500
-- ----
-- self-join on the unit
SELECT count(*) FROM orders o1 JOIN orders o2 ON o1.customer_id = o2.customer_id WHERE o1.product_id = 1 AND o2.product_id = 2;
-- expect:
SELECT LEAST(h."_dp_rows", 100) AS "c0", count(*) AS "c1" FROM (SELECT count(*) AS "_dp_rows" FROM (SELECT "o1"."customer_id" AS "_dp_unit" FROM "public"."orders" AS o1 JOIN "public"."orders" AS o2 ON o1.customer_id = o2.customer_id WHERE (o1.product_id = 1 AND o2.product_id = 2) AND NOT "o1"."customer_id" IS NULL) AS b GROUP BY b."_dp_unit" ORDER BY b."_dp_unit") AS h GROUP BY 1 ORDER BY 1;
-- mode: unit
-- part: count L1=100 L2=100 scale=100 flex_scale=402
-- ----
-- a public table joins freely
SELECT sum(o.order_cost) FROM orders o JOIN products p ON o.product_id = p.product_id WHERE p.category = 'Books';
-- expect:
SELECT u."_dp_n", count(*) AS "_dp_rows", width_bucket(q."a0", ARRAY[0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0]::numeric[]) AS "b0", count(q."a0") AS "n0", sum(q."a0") AS "c0", count(q."a1") AS "c1" FROM (SELECT CASE WHEN o.order_cost IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(o.order_cost AS DECIMAL), 0.0), 5000.0) END AS "a0", o.order_cost AS "a1", "o"."customer_id" AS "_dp_unit" FROM "public"."orders" AS o JOIN "public"."products" AS p ON o.product_id = p.product_id WHERE p.category = 'Books' AND NOT "o"."customer_id" IS NULL OFFSET 0) AS q JOIN (SELECT r."_dp_unit", count(*) AS "_dp_n" FROM (SELECT CASE WHEN o.order_cost IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(o.order_cost AS DECIMAL), 0.0), 5000.0) END AS "a0", o.order_cost AS "a1", "o"."customer_id" AS "_dp_unit" FROM "public"."orders" AS o JOIN "public"."products" AS p ON o.product_id = p.product_id WHERE p.category = 'Books' AND NOT "o"."customer_id" IS NULL) AS r GROUP BY r."_dp_unit" ORDER BY r."_dp_unit") AS u ON u."_dp_unit" = q."_dp_unit" GROUP BY 1, 3;
-- mode: unit
-- part: sum L1=500000 L2=500000 scale=555556 flex_scale=11111.1
-- part: count L1=100 L2=100 scale=1000 flex_scale=20
-- ----
-- three tables, the unit through two equalities
SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id JOIN recommendations r ON r.customer_id = c.customer_id;
-- expect:
SELECT LEAST(h."_dp_rows", 100) AS "c0", count(*) AS "c1" FROM (SELECT count(*) AS "_dp_rows" FROM (SELECT "o"."customer_id" AS "_dp_unit" FROM "public"."orders" AS o JOIN "public"."customers" AS c ON o.customer_id = c.customer_id JOIN "public"."recommendations" AS r ON r.customer_id = c.customer_id WHERE NOT "o"."customer_id" IS NULL) AS b GROUP BY b."_dp_unit" ORDER BY b."_dp_unit") AS h GROUP BY 1 ORDER BY 1;
-- mode: unit
-- part: count L1=100 L2=100 scale=100 flex_scale=50000
-- ----
-- a join that mixes customers is refused
SELECT count(*) FROM orders o JOIN recommendations r ON o.product_id = r.product_id;
-- expect:
-- refused: 42501 the join mixes rows of different units: o.customer_id and r.customer_id are not made equal by the join, so dpgate cannot protect each public.customers.customer_id here (policy setting privacy_unit; row_level_fallback = false)
-- ----
-- [fallback] a join that mixes customers, answered at row level when the policy allows it
SELECT count(*) FROM orders o JOIN recommendations r ON o.product_id = r.product_id;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" AS o JOIN "public"."recommendations" AS r ON o.product_id = r.product_id;
-- mode: row-level (the join mixes rows of different units: o.customer_id and r.customer_id are not made equal by the join)
-- part: count L1=2000 L2=0 scale=4000 flex_scale=4000
-- ----
-- a join on a non-unit column of the unit table mixes units too
SELECT count(*) FROM orders o JOIN customers c ON o.product_id = c.customer_id;
-- expect:
-- refused: 42501 the join mixes rows of different units: o.customer_id and c.customer_id are not made equal by the join, so dpgate cannot protect each public.customers.customer_id here (policy setting privacy_unit; row_level_fallback = false)
