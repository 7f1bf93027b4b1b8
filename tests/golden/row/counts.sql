-- count of one table: a global sensitivity of 1, scale 1/ε (FLEX's 2/ε beside it)
SELECT count(*) FROM orders WHERE product_id = 1;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE product_id = 1;
-- part: count ES(k)=1 S*=1 k*=0 scale=10 flex_scale=20
-- privacy: global sensitivity (ES/ε), delta 0
-- ----
-- count of a column and count with FILTER: ε split over two parts
SELECT count(quantity), count(*) FILTER (WHERE quantity > 3) FROM orders;
-- expect:
SELECT COUNT(quantity) AS "c0", COUNT(CASE WHEN quantity > 3 THEN 1 END) AS "c1" FROM "public"."orders";
-- part: count ES(k)=1 S*=1 k*=0 scale=20 flex_scale=40
-- part: count ES(k)=1 S*=1 k*=0 scale=20 flex_scale=40
-- privacy: global sensitivity (ES/ε), delta 0
-- ----
-- count of distinct values: one row changes at most one distinct value
SELECT count(DISTINCT product_id) FROM orders WHERE order_date >= DATE '2024-06-01';
-- expect:
SELECT COUNT(DISTINCT product_id) AS "c0" FROM "public"."orders" WHERE order_date >= CAST('2024-06-01' AS DATE);
-- part: count ES(k)=1 S*=1 k*=0 scale=10 flex_scale=20
-- privacy: global sensitivity (ES/ε), delta 0
-- ----
-- a public table only: sensitivity 0
SELECT count(*) FROM products;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."products";
-- part: count ES(k)=0 S*=0 k*=0 scale=0 flex_scale=0
-- privacy: global sensitivity (ES/ε), delta 0
-- ----
-- nested aggregation doubles the stability
SELECT count(*) FROM (SELECT customer_id, count(*) AS n FROM orders GROUP BY customer_id HAVING count(*) > 3) t;
-- expect:
SELECT COUNT(*) AS "c0" FROM (SELECT customer_id, COUNT(*) AS n FROM "public"."orders" GROUP BY customer_id HAVING COUNT(*) > 3) AS t;
-- part: count ES(k)=2 S*=2 k*=0 scale=20 flex_scale=40
-- privacy: global sensitivity (ES/ε), delta 0
-- ----
-- UNION ALL adds the stabilities of both sides
SELECT count(*) FROM (SELECT customer_id FROM orders UNION ALL SELECT customer_id FROM recommendations) u;
-- expect:
SELECT COUNT(*) AS "c0" FROM (SELECT customer_id FROM "public"."orders" UNION ALL SELECT customer_id FROM "public"."recommendations") AS u;
-- part: count ES(k)=2 S*=2 k*=0 scale=20 flex_scale=40
-- privacy: global sensitivity (ES/ε), delta 0
