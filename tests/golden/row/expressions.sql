-- arithmetic on an aggregate: computed over the released value
SELECT count(*) * 2 AS twice FROM orders;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders";
-- part: count ES(k)=1 S*=1 k*=0 scale=10 flex_scale=20
-- privacy: global sensitivity (ES/ε), delta 0
-- hidden outputs (for HAVING / ORDER BY only): [1]
-- post: SELECT "r"."o1" * 2 AS "twice" FROM __dpgate_released__ AS r
-- ----
-- a ratio of two noisy counts
SELECT count(*) FILTER (WHERE quantity > 3) * 100.0 / count(*) AS pct_big FROM orders;
-- expect:
SELECT COUNT(CASE WHEN quantity > 3 THEN 1 END) AS "c0", COUNT(*) AS "c1" FROM "public"."orders";
-- part: count ES(k)=1 S*=1 k*=0 scale=20 flex_scale=40
-- part: count ES(k)=1 S*=1 k*=0 scale=20 flex_scale=40
-- privacy: global sensitivity (ES/ε), delta 0
-- hidden outputs (for HAVING / ORDER BY only): [1, 2]
-- post: SELECT "r"."o1" * 100.0 / "r"."o2" AS "pct_big" FROM __dpgate_released__ AS r
-- ----
-- ROUND and a cast of an avg
SELECT round(avg(order_cost)::numeric, 2) FROM orders;
-- expect:
SELECT ARRAY[count(q."a0") FILTER (WHERE q."a0" < 0.25), count(q."a0") FILTER (WHERE q."a0" >= 0.25 AND q."a0" < 0.5), count(q."a0") FILTER (WHERE q."a0" >= 0.5 AND q."a0" < 1.0), count(q."a0") FILTER (WHERE q."a0" >= 1.0 AND q."a0" < 2.0), count(q."a0") FILTER (WHERE q."a0" >= 2.0 AND q."a0" < 4.0), count(q."a0") FILTER (WHERE q."a0" >= 4.0 AND q."a0" < 8.0), count(q."a0") FILTER (WHERE q."a0" >= 8.0 AND q."a0" < 16.0), count(q."a0") FILTER (WHERE q."a0" >= 16.0 AND q."a0" < 32.0), count(q."a0") FILTER (WHERE q."a0" >= 32.0 AND q."a0" < 64.0), count(q."a0") FILTER (WHERE q."a0" >= 64.0 AND q."a0" < 128.0), count(q."a0") FILTER (WHERE q."a0" >= 128.0 AND q."a0" < 256.0), count(q."a0") FILTER (WHERE q."a0" >= 256.0 AND q."a0" < 512.0), count(q."a0") FILTER (WHERE q."a0" >= 512.0 AND q."a0" < 1024.0), count(q."a0") FILTER (WHERE q."a0" >= 1024.0 AND q."a0" < 2048.0), count(q."a0") FILTER (WHERE q."a0" >= 2048.0 AND q."a0" < 4096.0), count(q."a0") FILTER (WHERE q."a0" >= 4096.0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" < 0.25), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 0.25 AND q."a0" < 0.5), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 0.5 AND q."a0" < 1.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 1.0 AND q."a0" < 2.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 2.0 AND q."a0" < 4.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 4.0 AND q."a0" < 8.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 8.0 AND q."a0" < 16.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 16.0 AND q."a0" < 32.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 32.0 AND q."a0" < 64.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 64.0 AND q."a0" < 128.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 128.0 AND q."a0" < 256.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 256.0 AND q."a0" < 512.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 512.0 AND q."a0" < 1024.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 1024.0 AND q."a0" < 2048.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 2048.0 AND q."a0" < 4096.0), 0), COALESCE(sum(q."a0") FILTER (WHERE q."a0" >= 4096.0), 0)]::numeric[] AS "c0", count(q."a1") AS "c1" FROM (SELECT CASE WHEN order_cost IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(order_cost AS DECIMAL), 0.0), 5000.0) END AS "a0", order_cost AS "a1" FROM "public"."orders") AS q;
-- part: sum ES(k)=1 × 2500 S*=2500 k*=0 scale=41666.66667 flex_scale=83333.33333
-- part: count ES(k)=1 S*=1 k*=0 scale=25 flex_scale=50
-- privacy: global sensitivity (ES/ε), delta 0
-- hidden outputs (for HAVING / ORDER BY only): [1]
-- post: SELECT ROUND(CAST("r"."o1" AS DECIMAL), 2) AS "round" FROM __dpgate_released__ AS r
-- ----
-- a query over one aggregate subquery (Metabase)
SELECT "source"."count" FROM (SELECT count(*) AS "count" FROM orders) AS "source";
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders";
-- part: count ES(k)=1 S*=1 k*=0 scale=10 flex_scale=20
-- privacy: global sensitivity (ES/ε), delta 0
-- outer: SELECT "source"."count" FROM __dpgate_answer__
