-- sum of a bounded column: clamped in the database, summed as NUMERIC
SELECT sum(order_cost) FROM orders;
-- expect:
SELECT ARRAY[count(q."a0") FILTER (WHERE q."a0" < 0.25), count(q."a0") FILTER (WHERE q."a0" >= 0.25 AND q."a0" < 0.5), count(q."a0") FILTER (WHERE q."a0" >= 0.5 AND q."a0" < 1.0), count(q."a0") FILTER (WHERE q."a0" >= 1.0 AND q."a0" < 2.0), count(q."a0") FILTER (WHERE q."a0" >= 2.0 AND q."a0" < 4.0), count(q."a0") FILTER (WHERE q."a0" >= 4.0 AND q."a0" < 8.0), count(q."a0") FILTER (WHERE q."a0" >= 8.0 AND q."a0" < 16.0), count(q."a0") FILTER (WHERE q."a0" >= 16.0 AND q."a0" < 32.0), count(q."a0") FILTER (WHERE q."a0" >= 32.0 AND q."a0" < 64.0), count(q."a0") FILTER (WHERE q."a0" >= 64.0 AND q."a0" < 128.0), count(q."a0") FILTER (WHERE q."a0" >= 128.0 AND q."a0" < 256.0), count(q."a0") FILTER (WHERE q."a0" >= 256.0 AND q."a0" < 512.0), count(q."a0") FILTER (WHERE q."a0" >= 512.0 AND q."a0" < 1024.0), count(q."a0") FILTER (WHERE q."a0" >= 1024.0 AND q."a0" < 2048.0), count(q."a0") FILTER (WHERE q."a0" >= 2048.0 AND q."a0" < 4096.0), count(q."a0") FILTER (WHERE q."a0" >= 4096.0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" < 0.25), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 0.25 AND q."a0" < 0.5), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 0.5 AND q."a0" < 1.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 1.0 AND q."a0" < 2.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 2.0 AND q."a0" < 4.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 4.0 AND q."a0" < 8.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 8.0 AND q."a0" < 16.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 16.0 AND q."a0" < 32.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 32.0 AND q."a0" < 64.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 64.0 AND q."a0" < 128.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 128.0 AND q."a0" < 256.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 256.0 AND q."a0" < 512.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 512.0 AND q."a0" < 1024.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 1024.0 AND q."a0" < 2048.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 2048.0 AND q."a0" < 4096.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 4096.0), 0)]::numeric[] AS "c0", count(q."a1") AS "c1" FROM (SELECT CASE WHEN order_cost IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(order_cost AS DECIMAL), 0.0), 5000.0) END AS "a0", order_cost AS "a1" FROM "public"."orders") AS q;
-- part: sum ES(k)=1 × 5000 S*=5000 k*=0 scale=55555.55556 flex_scale=111111.1111
-- part: count ES(k)=1 S*=1 k*=0 scale=100 flex_scale=200
-- privacy: global sensitivity (ES/ε), delta 0
-- ----
-- avg is a noisy sum over a noisy count, ε split between them
SELECT avg(quantity) FROM orders WHERE order_date < DATE '2024-07-01';
-- expect:
SELECT ARRAY[count(q."a0") FILTER (WHERE q."a0" < 2.0), count(q."a0") FILTER (WHERE q."a0" >= 2.0 AND q."a0" < 4.0), count(q."a0") FILTER (WHERE q."a0" >= 4.0 AND q."a0" < 8.0), count(q."a0") FILTER (WHERE q."a0" >= 8.0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" < 2.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 2.0 AND q."a0" < 4.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 4.0 AND q."a0" < 8.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 8.0), 0)]::numeric[] AS "c0", count(q."a1") AS "c1" FROM (SELECT CASE WHEN quantity IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(quantity AS DECIMAL), 1.0), 10.0) END AS "a0", quantity AS "a1" FROM "public"."orders" WHERE order_date < CAST('2024-07-01' AS DATE)) AS q;
-- part: sum ES(k)=1 × 4.5 S*=4.5 k*=0 scale=75 flex_scale=150
-- part: count ES(k)=1 S*=1 k*=0 scale=25 flex_scale=50
-- privacy: global sensitivity (ES/ε), delta 0
-- ----
-- stddev from noisy count, sum and sum of squares
SELECT stddev(quantity) FROM orders;
-- expect:
SELECT COUNT(quantity) AS "c0", SUM(CASE WHEN (CAST(quantity AS DECIMAL) - 5.5) * (CAST(quantity AS DECIMAL) - 5.5) IS NULL THEN NULL ELSE LEAST(GREATEST(CAST((CAST(quantity AS DECIMAL) - 5.5) * (CAST(quantity AS DECIMAL) - 5.5) AS DECIMAL), 0.0), 20.25) END) AS "c1", SUM(CASE WHEN (CAST(quantity AS DECIMAL) - 5.5) IS NULL THEN NULL ELSE LEAST(GREATEST(CAST((CAST(quantity AS DECIMAL) - 5.5) AS DECIMAL), -4.5), 4.5) END) AS "c2" FROM "public"."orders";
-- part: count ES(k)=1 S*=1 k*=0 scale=30 flex_scale=60
-- part: sum ES(k)=1 × 20.25 S*=20.25 k*=0 scale=607.5 flex_scale=1215
-- part: sum ES(k)=1 × 4.5 S*=4.5 k*=0 scale=135 flex_scale=270
-- privacy: global sensitivity (ES/ε), delta 0
-- hidden outputs (for HAVING / ORDER BY only): [1, 2, 3, 4, 5, 6]
-- post: SELECT SQRT(CASE WHEN "r"."o1" > 1 THEN GREATEST("r"."o2" - "r"."o3" * "r"."o4" / "r"."o5", 0) / ("r"."o6" - 1) END) AS "stddev" FROM __dpgate_released__ AS r
-- ----
-- sum of a CASE: bounded by its branches
SELECT sum(CASE WHEN quantity > 5 THEN 1 ELSE 0 END) FROM orders;
-- expect:
SELECT SUM(CASE WHEN CASE WHEN quantity > 5 THEN 1 ELSE 0 END IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(CASE WHEN quantity > 5 THEN 1 ELSE 0 END AS DECIMAL), 0.0), 1.0) END) AS "c0", COUNT(CASE WHEN quantity > 5 THEN 1 ELSE 0 END) AS "c1" FROM "public"."orders";
-- part: sum ES(k)=1 S*=1 k*=0 scale=11.11111111 flex_scale=22.22222222
-- part: count ES(k)=1 S*=1 k*=0 scale=100 flex_scale=200
-- privacy: global sensitivity (ES/ε), delta 0
-- ----
-- sum over a join of private tables: ES(k) times the bound
SELECT sum(o.quantity) FROM orders o JOIN recommendations r ON o.customer_id = r.customer_id;
-- expect:
SELECT SUM(CASE WHEN o.quantity IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(o.quantity AS DECIMAL), 1.0), 10.0) END) AS "c0", COUNT(o.quantity) AS "c1" FROM "public"."orders" AS o JOIN "public"."recommendations" AS r ON o.customer_id = r.customer_id;
-- part: sum ES(k)=(250 + 1k) × 10 S*=2857.475165 k*=190 scale=63499.44812 flex_scale=63499.44812
-- part: count ES(k)=250 + 1k S*=1552.24973 k*=3711 scale=310449.946 flex_scale=310449.946
-- privacy: smooth sensitivity (2S*/ε), delta 1e-08
