-- mode counts every key of the domain (generate_series, LEFT JOIN) with the WHERE [reference]
SELECT mode() WITHIN GROUP (ORDER BY quantity) FROM orders WHERE order_cost > 10;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 LEFT JOIN (SELECT quantity AS "k0", 1 AS "a0" FROM "public"."orders" WHERE order_cost > 10) AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
-- ----
-- quantiles share one grid histogram of the column (2^20 cells) [reference]
SELECT min(order_cost), max(order_cost), median(order_cost), percentile_disc(0.9) WITHIN GROUP (ORDER BY order_cost DESC) AS p FROM orders;
-- expect:
SELECT min(q.v) FILTER (WHERE FALSE) AS k0, CAST(LEAST(GREATEST(ROUND((q.v::numeric - 0.0) * 1048576 / (5000.0 - 0.0)), 0), 1048576) AS int8) AS k1, count(*) AS c0 FROM (SELECT order_cost AS "v" FROM "public"."orders") AS q WHERE q.v IS NOT NULL GROUP BY 2 ORDER BY 2;
