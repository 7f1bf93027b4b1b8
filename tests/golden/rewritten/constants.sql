-- constant date arithmetic is computed first, written in once [reference]
SELECT count(*) FROM orders WHERE order_date > current_date - interval '30 days';
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE order_date > %(__dpgate_constant_0)s;
-- constant: %(__dpgate_constant_0)s = (CURRENT_DATE - INTERVAL '30 DAYS')
-- ----
-- an IN subquery becomes = ANY of an array [reference]
SELECT count(*) FROM orders WHERE product_id NOT IN (SELECT product_id FROM products WHERE category = 'x');
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE NOT product_id = ANY %(__dpgate_constant_0)s;
-- constant: %(__dpgate_constant_0)s = ARRAY(SELECT product_id FROM "public"."products" WHERE category = 'x')
-- ----
-- a failing public subquery in a CASE branch is computed first [reference]
SELECT count(*) FROM orders WHERE CASE WHEN order_cost > 100 THEN quantity IN (SELECT 1 / (product_id - product_id) FROM products) END;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE CASE WHEN order_cost > 100 THEN quantity = ANY %(__dpgate_constant_0)s END;
-- constant: %(__dpgate_constant_0)s = ARRAY(SELECT 1 / (product_id - product_id) FROM "public"."products")
