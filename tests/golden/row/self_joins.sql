-- self-join: 2(100 + k) + 1
SELECT count(*) FROM orders o1 JOIN orders o2 ON o1.customer_id = o2.customer_id;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" AS o1 JOIN "public"."orders" AS o2 ON o1.customer_id = o2.customer_id;
-- part: count ES(k)=201 + 2k S*=365.8377777 k*=282 scale=7316.755553 flex_scale=7316.755553
-- privacy: smooth sensitivity (2S*/ε), delta 1e-08
-- ----
-- self-join with filters on both sides
SELECT count(*) FROM orders o1 JOIN orders o2 ON o1.customer_id = o2.customer_id WHERE o1.product_id = 1 AND o2.product_id = 2;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" AS o1 JOIN "public"."orders" AS o2 ON o1.customer_id = o2.customer_id WHERE o1.product_id = 1 AND o2.product_id = 2;
-- part: count ES(k)=201 + 2k S*=365.8377777 k*=282 scale=7316.755553 flex_scale=7316.755553
-- privacy: smooth sensitivity (2S*/ε), delta 1e-08
