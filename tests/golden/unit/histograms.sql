-- histogram over a declared domain: cells by customer in one pass; τ chosen per query, at most κ·τ_g = 50
SELECT quantity, count(*) FROM orders GROUP BY quantity;
-- expect:
SELECT d0."k0", t."_dp_n", t."_dp_rows" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 LEFT JOIN (SELECT q."k0", u."_dp_n", count(*) AS "_dp_rows" FROM (SELECT quantity AS "k0", "orders"."customer_id" AS "_dp_unit" FROM "public"."orders" WHERE NOT "orders"."customer_id" IS NULL) AS q JOIN (SELECT r."_dp_unit", count(*) AS "_dp_n" FROM (SELECT quantity AS "k0", "orders"."customer_id" AS "_dp_unit" FROM "public"."orders" WHERE NOT "orders"."customer_id" IS NULL) AS r GROUP BY r."_dp_unit" ORDER BY r."_dp_unit") AS u ON u."_dp_unit" = q."_dp_unit" GROUP BY 1, 2) AS t ON t."k0" = d0."k0" ORDER BY d0."k0", t."_dp_n";
-- mode: unit
-- part: count L1=50 L2=50 scale=50 flex_scale=4
-- ----
-- histogram of a sum
SELECT quantity, sum(order_cost) FROM orders GROUP BY 1;
-- expect:
SELECT d0."k0", t."_dp_n", t."_dp_rows", t."b0", t."n0", t."c0", t."c1" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 LEFT JOIN (SELECT q."k0", u."_dp_n", count(*) AS "_dp_rows", width_bucket(q."a0", ARRAY[0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0]::numeric[]) AS "b0", count(q."a0") AS "n0", sum(q."a0") AS "c0", count(q."a1") AS "c1" FROM (SELECT quantity AS "k0", CASE WHEN order_cost IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(order_cost AS DECIMAL), 0.0), 5000.0) END AS "a0", order_cost AS "a1", "orders"."customer_id" AS "_dp_unit" FROM "public"."orders" WHERE NOT "orders"."customer_id" IS NULL OFFSET 0) AS q JOIN (SELECT r."_dp_unit", count(*) AS "_dp_n" FROM (SELECT quantity AS "k0", CASE WHEN order_cost IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(order_cost AS DECIMAL), 0.0), 5000.0) END AS "a0", order_cost AS "a1", "orders"."customer_id" AS "_dp_unit" FROM "public"."orders" WHERE NOT "orders"."customer_id" IS NULL) AS r GROUP BY r."_dp_unit" ORDER BY r."_dp_unit") AS u ON u."_dp_unit" = q."_dp_unit" GROUP BY 1, 2, 4) AS t ON t."k0" = d0."k0" ORDER BY d0."k0", t."_dp_n";
-- mode: unit
-- part: sum L1=250000 L2=250000 scale=277778 flex_scale=22222.2
-- part: count L1=50 L2=50 scale=500 flex_scale=40
-- ----
-- join histogram: a public table supplies the domain
SELECT p.category, count(*) FROM orders o JOIN products p ON o.product_id = p.product_id GROUP BY p.category;
-- expect:
SELECT d0."k0", t."_dp_n", t."_dp_rows" FROM (SELECT DISTINCT "category" AS "k0" FROM "public"."products" WHERE "category" IS NOT NULL) AS d0 LEFT JOIN (SELECT q."k0", u."_dp_n", count(*) AS "_dp_rows" FROM (SELECT p.category AS "k0", "o"."customer_id" AS "_dp_unit" FROM "public"."orders" AS o JOIN "public"."products" AS p ON o.product_id = p.product_id WHERE NOT "o"."customer_id" IS NULL) AS q JOIN (SELECT r."_dp_unit", count(*) AS "_dp_n" FROM (SELECT p.category AS "k0", "o"."customer_id" AS "_dp_unit" FROM "public"."orders" AS o JOIN "public"."products" AS p ON o.product_id = p.product_id WHERE NOT "o"."customer_id" IS NULL) AS r GROUP BY r."_dp_unit" ORDER BY r."_dp_unit") AS u ON u."_dp_unit" = q."_dp_unit" GROUP BY 1, 2) AS t ON t."k0" = d0."k0" ORDER BY d0."k0", t."_dp_n";
-- mode: unit
-- part: count L1=50 L2=50 scale=50 flex_scale=4
-- ----
-- join histogram over two private tables joined on the unit
SELECT o.quantity, count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id WHERE c.address LIKE '%Germany%' GROUP BY o.quantity;
-- expect:
SELECT d0."k0", t."_dp_n", t."_dp_rows" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 LEFT JOIN (SELECT q."k0", u."_dp_n", count(*) AS "_dp_rows" FROM (SELECT o.quantity AS "k0", "o"."customer_id" AS "_dp_unit" FROM "public"."orders" AS o JOIN "public"."customers" AS c ON o.customer_id = c.customer_id WHERE c.address LIKE '%Germany%' AND NOT "o"."customer_id" IS NULL) AS q JOIN (SELECT r."_dp_unit", count(*) AS "_dp_n" FROM (SELECT o.quantity AS "k0", "o"."customer_id" AS "_dp_unit" FROM "public"."orders" AS o JOIN "public"."customers" AS c ON o.customer_id = c.customer_id WHERE c.address LIKE '%Germany%' AND NOT "o"."customer_id" IS NULL) AS r GROUP BY r."_dp_unit" ORDER BY r."_dp_unit") AS u ON u."_dp_unit" = q."_dp_unit" GROUP BY 1, 2) AS t ON t."k0" = d0."k0" ORDER BY d0."k0", t."_dp_n";
-- mode: unit
-- part: count L1=50 L2=50 scale=50 flex_scale=400
-- ----
-- key selection: groups pass T = τ_g' + b·ln(κ'/δ)
SELECT customer_id, count(*) FROM orders GROUP BY customer_id;
-- expect:
SELECT q."k0" AS "k0", count(q."a0") AS "c0" FROM (SELECT b."k0", b."a0" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT b.* FROM (SELECT b.*, dense_rank() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_group_draw", b."k0") AS "_dp_group" FROM (SELECT b.*, min(b."_dp_draw") OVER (PARTITION BY b."_dp_unit", b."k0") AS "_dp_group_draw" FROM (SELECT customer_id AS "k0", 1 AS "a0", "orders"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM "public"."orders" WHERE NOT "orders"."customer_id" IS NULL) AS b) AS b) AS b WHERE b."_dp_group" <= 5) AS b) AS b WHERE b."_dp_row" <= 10) AS q GROUP BY q."k0";
-- mode: unit
-- part: count L1=10 L2=10 scale=10 flex_scale=4
-- threshold: 164.249485 (delta 1e-06)
-- ----
-- key selection over a join on the unit (FLEX refuses it)
SELECT o.customer_id, count(*) FROM orders o JOIN recommendations r ON o.customer_id = r.customer_id GROUP BY o.customer_id;
-- expect:
SELECT q."k0" AS "k0", count(q."a0") AS "c0" FROM (SELECT b."k0", b."a0" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT b.* FROM (SELECT b.*, dense_rank() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_group_draw", b."k0") AS "_dp_group" FROM (SELECT b.*, min(b."_dp_draw") OVER (PARTITION BY b."_dp_unit", b."k0") AS "_dp_group_draw" FROM (SELECT o.customer_id AS "k0", 1 AS "a0", "o"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM "public"."orders" AS o JOIN "public"."recommendations" AS r ON o.customer_id = r.customer_id WHERE NOT "o"."customer_id" IS NULL) AS b) AS b) AS b WHERE b."_dp_group" <= 5) AS b) AS b WHERE b."_dp_row" <= 10) AS q GROUP BY q."k0";
-- mode: unit
-- part: count L1=10 L2=10 scale=10 flex_scale=1000
-- threshold: 164.249485 (delta 1e-06)
-- ----
-- a computed key under key selection: κ counts a customer's buckets, read from the domain's mapping
SELECT quantity % 3 AS r, customer_id, count(*) FROM orders GROUP BY 1, 2;
-- expect:
SELECT q."k0" AS "k0", q."k1" AS "k1", count(q."a0") AS "c0" FROM (SELECT b."k0", b."k1", b."a0" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT b.* FROM (SELECT b.*, dense_rank() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_group_draw", b."k0", b."k1") AS "_dp_group" FROM (SELECT b.*, min(b."_dp_draw") OVER (PARTITION BY b."_dp_unit", b."k0", b."k1") AS "_dp_group_draw" FROM (SELECT "_dp_map0"."_dp_bucket" AS "k0", customer_id AS "k1", 1 AS "a0", "orders"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM "public"."orders" INNER JOIN (SELECT r._dp_raw, r._dp_raw % 3 AS _dp_bucket FROM (SELECT DISTINCT CAST("dom"."v" AS INT) AS _dp_raw FROM (SELECT g.v AS "v" FROM GENERATE_SERIES(1, 10, 1) AS g(v)) AS dom) AS r) AS "_dp_map0" ON "_dp_map0"."_dp_raw" = quantity AND NOT %(__dpgate_bucket_0)s IS NULL WHERE NOT "orders"."customer_id" IS NULL) AS b) AS b) AS b WHERE b."_dp_group" <= 5) AS b) AS b WHERE b."_dp_row" <= 10) AS q GROUP BY q."k0", q."k1";
-- mode: unit
-- part: count L1=10 L2=10 scale=10 flex_scale=4
-- threshold: 164.249485 (delta 1e-06)
