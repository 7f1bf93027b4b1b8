-- orders ⋈ recommendations: ES = 250 + k, the smooth path (the FLEX reference: k* = 132, scale 5409.18…)
SELECT count(*) FROM orders o JOIN recommendations r ON o.customer_id = r.customer_id;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" AS o JOIN "public"."recommendations" AS r ON o.customer_id = r.customer_id;
-- part: count ES(k)=250 + 1k S*=270.4590928 k*=132 scale=5409.181856 flex_scale=5409.181856
-- privacy: smooth sensitivity (2S*/ε), delta 1e-08
-- ----
-- a join written in WHERE: ES = 100 + k
SELECT count(*) FROM orders o, customers c WHERE o.customer_id = c.customer_id;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" AS o, "public"."customers" AS c WHERE o.customer_id = c.customer_id;
-- part: count ES(k)=100 + 1k S*=182.6797792 k*=282 scale=3653.595583 flex_scale=3653.595583
-- privacy: smooth sensitivity (2S*/ε), delta 1e-08
-- ----
-- USING: the same join, the same sensitivity
SELECT count(*) FROM orders o JOIN customers c USING (customer_id) WHERE c.address LIKE '%France%';
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" AS o JOIN "public"."customers" AS c USING (customer_id) WHERE c.address LIKE '%France%';
-- part: count ES(k)=100 + 1k S*=182.6797792 k*=282 scale=3653.595583 flex_scale=3653.595583
-- privacy: smooth sensitivity (2S*/ε), delta 1e-08
-- ----
-- a public table: no k, a global sensitivity of maxFreq
SELECT count(*) FROM orders o JOIN products p ON o.product_id = p.product_id WHERE p.category = 'Books';
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" AS o JOIN "public"."products" AS p ON o.product_id = p.product_id WHERE p.category = 'Books';
-- part: count ES(k)=300 S*=300 k*=0 scale=3000 flex_scale=6000
-- privacy: global sensitivity (ES/ε), delta 0
-- ----
-- three tables: the frequencies multiply
SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id JOIN recommendations r ON r.customer_id = c.customer_id;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" AS o JOIN "public"."customers" AS c ON o.customer_id = c.customer_id JOIN "public"."recommendations" AS r ON r.customer_id = c.customer_id;
-- part: count ES(k)=25000 + 350k + 1k^2 S*=123845.4269 k*=597 scale=2476908.538 flex_scale=2476908.538
-- privacy: smooth sensitivity (2S*/ε), delta 1e-08
-- ----
-- several equalities: the minimum over the conjuncts
SELECT count(*) FROM orders o JOIN recommendations r ON o.customer_id = r.customer_id AND o.product_id = r.product_id;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" AS o JOIN "public"."recommendations" AS r ON o.customer_id = r.customer_id AND o.product_id = r.product_id;
-- part: count ES(k)=250 + 1k S*=270.4590928 k*=132 scale=5409.181856 flex_scale=5409.181856
-- privacy: smooth sensitivity (2S*/ε), delta 1e-08
-- ----
-- a CTE joined like a table
WITH o AS (SELECT customer_id FROM orders WHERE quantity > 1) SELECT count(*) FROM o JOIN customers c ON o.customer_id = c.customer_id;
-- expect:
WITH o AS (SELECT customer_id FROM "public"."orders" WHERE quantity > 1) SELECT COUNT(*) AS "c0" FROM o JOIN "public"."customers" AS c ON o.customer_id = c.customer_id;
-- part: count ES(k)=100 + 1k S*=182.6797792 k*=282 scale=3653.595583 flex_scale=3653.595583
-- privacy: smooth sensitivity (2S*/ε), delta 1e-08
-- ----
-- orders ⟕ customers: ES = max(1 + k, 2·(100 + k)), an order's customer flips matched/padded
SELECT count(*) FROM orders o LEFT JOIN customers c ON o.customer_id = c.customer_id;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" AS o LEFT JOIN "public"."customers" AS c ON o.customer_id = c.customer_id;
-- part: count ES(k)=200 + 2k S*=365.3595583 k*=282 scale=7307.191167 flex_scale=7307.191167
-- privacy: smooth sensitivity (2S*/ε), delta 1e-08
-- ----
-- a count over an INTERSECT of two private branches: S1 + S2 = 2
SELECT count(*) FROM (SELECT customer_id FROM orders INTERSECT SELECT customer_id FROM recommendations) AS s;
-- expect:
SELECT COUNT(*) AS "c0" FROM (SELECT customer_id FROM "public"."orders" INTERSECT SELECT customer_id FROM "public"."recommendations") AS s;
-- part: count ES(k)=2 S*=2 k*=0 scale=20 flex_scale=40
-- privacy: global sensitivity (ES/ε), delta 0
-- ----
-- FULL JOIN … USING: FULL JOIN … ON's stability; the merged column COALESCE(o.x, c.x)
SELECT count(customer_id) FROM orders o FULL JOIN customers c USING (customer_id) WHERE customer_id > 5;
-- expect:
SELECT COUNT(customer_id) AS "c0" FROM "public"."orders" AS o FULL JOIN "public"."customers" AS c USING (customer_id) WHERE customer_id > 5;
-- part: count ES(k)=200 + 2k S*=365.3595583 k*=282 scale=7307.191167 flex_scale=7307.191167
-- privacy: smooth sensitivity (2S*/ε), delta 1e-08
