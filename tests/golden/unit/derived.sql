-- a plain derived table passes its unit column on through *
SELECT count(*) FROM (SELECT * FROM orders WHERE quantity > 2) AS s;
-- expect:
SELECT count(q."a0") AS "c0" FROM (SELECT b."a0" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT 1 AS "a0", "s"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM (SELECT * FROM "public"."orders" WHERE quantity > 2) AS s WHERE NOT "s"."customer_id" IS NULL) AS b) AS b WHERE b."_dp_row" <= 10) AS q;
-- mode: unit
-- part: count L1=10 L2=10 scale=10 flex_scale=2
-- ----
-- a CTE renaming the unit column, joined on it
WITH big AS (SELECT customer_id AS who, quantity FROM orders WHERE quantity > 5) SELECT b.quantity, count(*) FROM big b JOIN customers c ON b.who = c.customer_id GROUP BY 1;
-- expect:
SELECT d0."k0", count(q."a0") AS "c0" FROM (SELECT g.v AS "k0" FROM generate_series(1, 10, 1) AS g(v)) AS d0 LEFT JOIN (SELECT b."k0", b."a0" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (WITH big AS (SELECT customer_id AS who, quantity FROM "public"."orders" WHERE quantity > 5) SELECT b.quantity AS "k0", 1 AS "a0", "c"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM big AS b JOIN "public"."customers" AS c ON b.who = c.customer_id WHERE NOT "c"."customer_id" IS NULL) AS b) AS b WHERE b."_dp_row" <= 10) AS q ON q."k0" = d0."k0" GROUP BY d0."k0" ORDER BY d0."k0";
-- mode: unit
-- part: count L1=10 L2=10 scale=10 flex_scale=400
-- ----
-- a derived table that hides the unit is refused
SELECT sum(s.q) FROM (SELECT quantity AS q FROM orders) AS s;
-- expect:
-- refused: 42501 the derived table or CTE s does not pass on one unit per row: none of its output columns is the unit; unit mode cannot tell whose its rows are, so dpgate cannot protect each public.customers.customer_id here (policy setting privacy_unit; row_level_fallback = false)
-- ----
-- count(*) over a subquery grouped by the unit: each group is one unit's, bounded after it
SELECT count(*) FROM (SELECT customer_id, count(*) AS n FROM orders GROUP BY 1) AS s;
-- expect:
SELECT count(q."a0") AS "c0" FROM (SELECT b."a0" FROM (SELECT b.*, row_number() OVER (PARTITION BY b."_dp_unit" ORDER BY b."_dp_draw") AS "_dp_row" FROM (SELECT 1 AS "a0", "s"."customer_id" AS "_dp_unit", RANDOM() AS "_dp_draw" FROM (SELECT customer_id, COUNT(*) AS n FROM "public"."orders" GROUP BY 1) AS s WHERE NOT "s"."customer_id" IS NULL) AS b) AS b WHERE b."_dp_row" <= 10) AS q;
-- mode: unit
-- part: count L1=10 L2=10 scale=10 flex_scale=4
