-- without a unit the plan is FLEX exactly: no window [row]
SELECT count(*) FROM orders o JOIN customers c ON o.customer_id = c.customer_id;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" AS o JOIN "public"."customers" AS c ON o.customer_id = c.customer_id;
-- ----
-- a plain derived table passes its unit on [unit]
SELECT count(*) FROM (SELECT * FROM orders WHERE quantity > 2) AS s;
-- expect:
SELECT count(q."a0") AS "c0" FROM (SELECT b."a0" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT 1 AS "a0", "s"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM (SELECT * FROM "public"."orders" WHERE quantity > 2) AS s) AS b) AS b WHERE b."_dp_row" <= 10) AS q;
-- ----
-- a CTE passes its unit on through a join [unit]
WITH big AS (SELECT customer_id AS who, quantity FROM orders WHERE quantity > 5) SELECT b.quantity, count(*) FROM big b JOIN customers c ON b.who = c.customer_id GROUP BY 1;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 LEFT JOIN (SELECT b."k0", b."a0" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (WITH big AS (SELECT customer_id AS who, quantity FROM "public"."orders" WHERE quantity > 5) SELECT b.quantity AS "k0", 1 AS "a0", "c"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM big AS b JOIN "public"."customers" AS c ON b.who = c.customer_id) AS b) AS b WHERE b."_dp_row" <= 10) AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
