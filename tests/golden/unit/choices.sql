-- median by the exponential mechanism: a unit moves ranks by at most τ, Δu = τ
SELECT median(quantity) FROM orders;
-- expect:
SELECT min(q.v) FILTER (WHERE FALSE) AS k0, CAST(LEAST(GREATEST(ROUND((q.v::numeric - 1.0) * 1048576 / (10.0 - 1.0)), 0), 1048576) AS int8) AS k1, count(*) AS c0 FROM (SELECT b."v" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT quantity AS "v", "orders"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM "public"."orders" WHERE NOT "orders"."customer_id" IS NULL) AS b) AS b WHERE b."_dp_row" <= 10) AS q WHERE q.v IS NOT NULL GROUP BY 2 ORDER BY 2;
-- mode: unit
-- part: quantile L1=10 L2=0 scale=20 flex_scale=20
-- ----
-- mode over a declared domain: Δu = min(τ, τ_g)
SELECT mode() WITHIN GROUP (ORDER BY quantity) FROM orders;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 LEFT JOIN (SELECT b."k0", b."a0" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT quantity AS "k0", 1 AS "a0", "orders"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM "public"."orders" WHERE NOT "orders"."customer_id" IS NULL) AS b) AS b WHERE b."_dp_row" <= 10) AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
-- mode: unit
-- part: mode L1=10 L2=0 scale=20 flex_scale=20
-- ----
-- a quantile over a join on the unit (FLEX refuses it)
SELECT max(o.quantity) FROM orders o JOIN customers c ON o.customer_id = c.customer_id WHERE c.address LIKE '%Spain%';
-- expect:
SELECT min(q.v) FILTER (WHERE FALSE) AS k0, CAST(LEAST(GREATEST(ROUND((q.v::numeric - 1.0) * 1048576 / (10.0 - 1.0)), 0), 1048576) AS int8) AS k1, count(*) AS c0 FROM (SELECT b."v" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT o.quantity AS "v", "o"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM "public"."orders" AS o JOIN "public"."customers" AS c ON o.customer_id = c.customer_id WHERE c.address LIKE '%Spain%' AND NOT "o"."customer_id" IS NULL) AS b) AS b WHERE b."_dp_row" <= 10) AS q WHERE q.v IS NOT NULL GROUP BY 2 ORDER BY 2;
-- mode: unit
-- part: quantile L1=10 L2=0 scale=20 flex_scale=20
