-- modulo on private rows is written total (MOD, NULLIF) [reference typed]
SELECT count(*) FROM orders WHERE order_id % 97 <> 1;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE MOD(CAST(order_id AS DECIMAL), NULLIF(CAST(97 AS DECIMAL), 0)) <> 1;
-- ----
-- a product on private rows is computed in DECIMAL [reference typed]
SELECT count(*) FROM orders WHERE order_cost * quantity > 100;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE CAST(order_cost AS DECIMAL) * CAST(quantity AS DECIMAL) > 100;
-- ----
-- integer division on private rows is written total (DIV, NULLIF) [reference typed]
SELECT count(*) FROM orders WHERE quantity / 2 = 1;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE DIV(CAST(quantity AS DECIMAL), NULLIF(CAST(2 AS DECIMAL), 0)) = 1;
-- ----
-- division on private rows is written total (NULLIF) [reference typed]
SELECT count(*) FROM orders WHERE order_cost / quantity > 3;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE CAST(order_cost AS DECIMAL) / NULLIF(CAST(quantity AS DECIMAL), 0) > 3;
-- ----
-- a negation on private rows is computed in DECIMAL [reference typed]
SELECT count(*) FROM orders WHERE -order_id < 0;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE -CAST(order_id AS DECIMAL) < 0;
-- ----
-- a widening cast on private rows is written out [reference typed]
SELECT count(*) FROM orders WHERE quantity::bigint > 1;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE CAST(quantity AS BIGINT) > 1;
-- ----
-- a cast to text on private rows is written out [reference typed]
SELECT count(*) FROM orders WHERE order_id::text LIKE '1%';
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE CAST(order_id AS TEXT) LIKE '1%';
