-- a range domain: every key listed, empty ones with noise; ES = 2
SELECT quantity, count(*) FROM orders WHERE customer_id = 42 GROUP BY 1;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 LEFT JOIN (SELECT quantity AS "k0", 1 AS "a0" FROM "public"."orders" WHERE customer_id = 42) AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
-- part: count ES(k)=2 S*=2 k*=0 scale=20 flex_scale=40
-- privacy: global sensitivity (ES/ε), delta 0
-- groups: the whole declared domain (10 keys)
-- ----
-- a date range domain (366 keys)
SELECT order_date, count(*) FROM orders GROUP BY 1;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT g.v::date AS "k0" FROM generate_series(DATE '2024-01-01', DATE '2024-12-31', INTERVAL '1 day') AS g(v)) AS d0 LEFT JOIN (SELECT order_date AS "k0", 1 AS "a0" FROM "public"."orders") AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
-- part: count ES(k)=2 S*=2 k*=0 scale=20 flex_scale=40
-- privacy: global sensitivity (ES/ε), delta 0
-- groups: the whole declared domain (366 keys)
-- ----
-- a domain from a public table's column
SELECT product_id, count(*) FROM orders GROUP BY product_id;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT DISTINCT "product_id" AS "k0" FROM "public"."products" WHERE "product_id" IS NOT NULL) AS d0 LEFT JOIN (SELECT product_id AS "k0", 1 AS "a0" FROM "public"."orders") AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
-- part: count ES(k)=2 S*=2 k*=0 scale=20 flex_scale=40
-- privacy: global sensitivity (ES/ε), delta 0
-- groups: the whole declared domain (from a public table)
-- ----
-- a public table's own column as the key
SELECT p.category, count(*) FROM orders o JOIN products p ON o.product_id = p.product_id GROUP BY p.category;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT DISTINCT "category" AS "k0" FROM "public"."products" WHERE "category" IS NOT NULL) AS d0 LEFT JOIN (SELECT p.category AS "k0", 1 AS "a0" FROM "public"."orders" AS o JOIN "public"."products" AS p ON o.product_id = p.product_id) AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
-- part: count ES(k)=600 S*=600 k*=0 scale=6000 flex_scale=12000
-- privacy: global sensitivity (ES/ε), delta 0
-- groups: the whole declared domain (from a public table)
-- ----
-- date_trunc of a declared date range: released over the domain's image
SELECT date_trunc('month', order_date) AS month, count(*) FROM orders GROUP BY 1 ORDER BY 1;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT DISTINCT m._dp_bucket AS "k0" FROM (SELECT r._dp_raw, DATE_TRUNC('MONTH', r._dp_raw) AS _dp_bucket FROM (SELECT DISTINCT CAST("dom"."v" AS DATE) AS _dp_raw FROM (SELECT g.v::date AS "v" FROM generate_series(DATE '2024-01-01', DATE '2024-12-31', INTERVAL '1 day') AS g(v)) AS dom) AS r) AS m WHERE m._dp_bucket IS NOT NULL) AS d0 LEFT JOIN (SELECT "_dp_map0"."_dp_bucket" AS "k0", 1 AS "a0" FROM "public"."orders" INNER JOIN (SELECT r._dp_raw, DATE_TRUNC('MONTH', r._dp_raw) AS _dp_bucket FROM (SELECT DISTINCT CAST("dom"."v" AS DATE) AS _dp_raw FROM (SELECT CAST(g.v AS DATE) AS "v" FROM GENERATE_SERIES(CAST('2024-01-01' AS DATE), CAST('2024-12-31' AS DATE), INTERVAL '1 DAY') AS g(v)) AS dom) AS r) AS "_dp_map0" ON "_dp_map0"."_dp_raw" = order_date AND NOT %(__dpgate_bucket_0)s IS NULL) AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
-- part: count ES(k)=2 S*=2 k*=0 scale=20 flex_scale=40
-- privacy: global sensitivity (ES/ε), delta 0
-- groups: the whole declared domain (366 keys)
-- after noise: PostProcess(having=None, order=((0, False),), limit=None, offset=0)
-- ----
-- HAVING, ORDER BY and LIMIT run after noise
SELECT quantity, count(*) AS n FROM orders GROUP BY quantity HAVING count(*) > 10 ORDER BY n DESC LIMIT 3;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 LEFT JOIN (SELECT quantity AS "k0", 1 AS "a0" FROM "public"."orders") AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
-- part: count ES(k)=2 S*=2 k*=0 scale=20 flex_scale=40
-- privacy: global sensitivity (ES/ε), delta 0
-- groups: the whole declared domain (10 keys)
-- after noise: PostProcess(having=Comparison(op='>', left=1, right=10.0, left_is_column=True, right_is_column=False), order=((1, True),), limit=3, offset=0)
-- ----
-- HAVING over two noisy comparisons is kept for the proxy, not sent to PostgreSQL
SELECT quantity, count(*) AS n FROM orders GROUP BY quantity HAVING count(*) > 10 AND NOT count(*) < 3;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 LEFT JOIN (SELECT quantity AS "k0", 1 AS "a0" FROM "public"."orders") AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
-- part: count ES(k)=2 S*=2 k*=0 scale=20 flex_scale=40
-- privacy: global sensitivity (ES/ε), delta 0
-- groups: the whole declared domain (10 keys)
-- after noise: PostProcess(having=Condition(op='and', items=(Comparison(op='>', left=1, right=10.0, left_is_column=True, right_is_column=False), Condition(op='not', items=(Comparison(op='<', left=1, right=3.0, left_is_column=True, right_is_column=False),)))), order=(), limit=None, offset=0)
-- ----
-- ORDER BY a count not selected: a hidden noisy column, sorted after noise
SELECT quantity FROM orders GROUP BY quantity ORDER BY count(*) DESC LIMIT 2;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 LEFT JOIN (SELECT quantity AS "k0", 1 AS "a0" FROM "public"."orders") AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
-- part: count ES(k)=2 S*=2 k*=0 scale=20 flex_scale=40
-- privacy: global sensitivity (ES/ε), delta 0
-- groups: the whole declared domain (10 keys)
-- hidden outputs (for HAVING / ORDER BY only): [1]
-- after noise: PostProcess(having=None, order=((1, True),), limit=2, offset=0)
-- ----
-- keys without an aggregate: the domain, free
SELECT quantity FROM orders GROUP BY quantity;
-- expect:
SELECT d0."k0" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 ORDER BY d0."k0";
-- privacy: nothing charged (public values only)
-- groups: the whole declared domain (10 keys)
