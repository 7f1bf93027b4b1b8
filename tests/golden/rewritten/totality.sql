-- date_trunc on rows is guarded to the years it accepts (ISFINITE) [reference typed]
SELECT count(*) FROM orders WHERE date_trunc('month', order_date) = '2024-03-01';
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE CASE WHEN NOT ISFINITE(order_date) OR order_date BETWEEN '0100-01-01' AND '9899-12-31' THEN DATE_TRUNC('MONTH', order_date) END = '2024-03-01';
-- ----
-- a parameter in arithmetic is rounded to bounded digits [reference typed]
SELECT count(*) FROM orders WHERE order_cost * $1 > 0;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE CAST(order_cost AS DECIMAL) * CASE WHEN CASE WHEN SCALE(CAST($1 AS DECIMAL)) > 40 THEN ROUND(CAST($1 AS DECIMAL), 40) ELSE CAST($1 AS DECIMAL) END < -1e40 THEN -1e40 WHEN CASE WHEN SCALE(CAST($1 AS DECIMAL)) > 40 THEN ROUND(CAST($1 AS DECIMAL), 40) ELSE CAST($1 AS DECIMAL) END > 1e40 THEN 1e40 ELSE CASE WHEN SCALE(CAST($1 AS DECIMAL)) > 40 THEN ROUND(CAST($1 AS DECIMAL), 40) ELSE CAST($1 AS DECIMAL) END END > 0;
