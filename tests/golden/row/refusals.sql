-- raw rows
SELECT customer_id FROM orders;
-- expect:
-- refused: 42501 only aggregates of private tables are answered: output column 1 (customer_id) would reveal rows
-- ----
-- a cross join
SELECT count(*) FROM orders o CROSS JOIN customers c;
-- expect:
-- refused: 0A000 cross join of c: no equality of columns links it to the tables before it (cross, non-equi and OR joins are refused, but for a public table crossed with the rest)
-- ----
-- a non-equality join
SELECT count(*) FROM orders o JOIN customers c ON o.customer_id < c.customer_id;
-- expect:
-- refused: 0A000 cross join of c: no equality of columns links it to the tables before it (cross, non-equi and OR joins are refused, but for a public table crossed with the rest)
-- ----
-- USING after FULL JOIN … USING joins on the merged column, computed from both sides
SELECT count(*) FROM orders o FULL JOIN customers c USING (customer_id) JOIN recommendations r USING (customer_id);
-- expect:
-- refused: 0A000 USING (customer_id) here joins on the merged column of a FULL JOIN … USING, COALESCE of both sides' customer_id: a join key must be a plain column
-- ----
-- a sum without bounds
SELECT sum(customer_id) FROM orders;
-- expect:
-- refused: 42501 SUM(customer_id) needs declared bounds for the column
-- ----
-- a key with neither domain nor key selection
SELECT address, count(*) FROM customers GROUP BY address;
-- expect:
-- refused: 42501 GROUP BY address would reveal which groups exist: public.customers.address has no declared public domain (policy setting domain, or key_selection)
-- ----
-- a computed key of two columns: its groups are the image of no one domain
SELECT count(*) FROM orders GROUP BY quantity + product_id;
-- expect:
-- refused: 0A000 GROUP BY a computed expression is supported only as a function of one column with a declared domain
-- ----
-- too many cells
SELECT order_date, quantity, count(*) FROM orders GROUP BY 1, 2;
-- expect:
-- refused: 42501 the histogram would have 3660 cells, more than the 1000 the policy allows
-- ----
-- NOT IN over private rows: one NULL among them would make it NULL for every row
SELECT count(*) FROM orders o WHERE o.customer_id NOT IN (SELECT c.customer_id FROM customers c);
-- expect:
-- refused: 0A000 NOT IN over a subquery of private tables is not supported: one NULL among its values makes it NULL for every row, so one changed row could change them all
-- ----
-- a division in WHERE is made total (NULLIF), not refused: it cannot fail on some rows only
SELECT count(*) FROM orders WHERE 1 / quantity > 0;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE DIV(CAST(1 AS DECIMAL), NULLIF(CAST(quantity AS DECIMAL), 0)) > 0;
-- part: count ES(k)=1 S*=1 k*=0 scale=10 flex_scale=20
-- privacy: global sensitivity (ES/ε), delta 0
-- ----
-- a window function
SELECT count(*) OVER () FROM orders;
-- expect:
-- refused: 0A000 window functions are not supported over private tables
-- ----
-- a function that sleeps
SELECT count(*) FROM orders WHERE pg_sleep(1) IS NULL;
-- expect:
SELECT COUNT(*) AS "c0" FROM "public"."orders" WHERE %(__dpgate_constant_0)s;
-- part: count ES(k)=1 S*=1 k*=0 scale=10 flex_scale=20
-- privacy: global sensitivity (ES/ε), delta 0
-- ----
-- key selection over a join of private tables
SELECT customer_id, count(*) FROM orders o JOIN recommendations r USING (customer_id) GROUP BY 1;
-- expect:
-- refused: 0A000 key selection over joins of private tables is not supported
