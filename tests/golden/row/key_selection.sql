-- a column with key_selection: τ-thresholding, δ charged
SELECT customer_id, count(*) FROM orders GROUP BY customer_id;
-- expect:
SELECT customer_id AS "k0", COUNT(*) AS "c0" FROM "public"."orders" GROUP BY customer_id;
-- part: count ES(k)=2 S*=2 k*=0 scale=20 flex_scale=40
-- privacy: global sensitivity (ES/ε), delta 1e-08
-- groups: key selection, threshold 369.413615
-- ----
-- key selection with a sum beside the count
SELECT customer_id, count(*), sum(quantity) FROM orders GROUP BY customer_id;
-- expect:
SELECT q."k0" AS "k0", count(q."a0") AS "c0", ARRAY[count(q."a1") FILTER (WHERE q."a1" < 2.0), count(q."a1") FILTER (WHERE q."a1" >= 2.0 AND q."a1" < 4.0), count(q."a1") FILTER (WHERE q."a1" >= 4.0 AND q."a1" < 8.0), count(q."a1") FILTER (WHERE q."a1" >= 8.0), COALESCE(sum(q."a1") FILTER (WHERE q."a1" < 2.0), 0), COALESCE(sum(q."a1") FILTER (WHERE q."a1" >= 2.0 AND q."a1" < 4.0), 0), COALESCE(sum(q."a1") FILTER (WHERE q."a1" >= 4.0 AND q."a1" < 8.0), 0), COALESCE(sum(q."a1") FILTER (WHERE q."a1" >= 8.0), 0)]::numeric[] AS "c1", count(q."a2") AS "c2" FROM (SELECT customer_id AS "k0", 1 AS "a0", CASE WHEN quantity IS NULL THEN NULL ELSE LEAST(GREATEST(CAST(quantity AS DECIMAL), 1.0), 10.0) END AS "a1", quantity AS "a2" FROM "public"."orders") AS q GROUP BY q."k0";
-- part: count ES(k)=2 S*=2 k*=0 scale=40 flex_scale=80
-- part: sum ES(k)=2 × 10 S*=20 k*=0 scale=444.4444444 flex_scale=888.8888889
-- part: count ES(k)=2 S*=2 k*=0 scale=400 flex_scale=800
-- privacy: global sensitivity (ES/ε), delta 1e-08
-- groups: key selection, threshold 737.827230
