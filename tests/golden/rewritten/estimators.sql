-- an average is a sum centred on the bounds' midpoint, clamped to the half-width, over a count [clinic]
SELECT avg(birth_year) FROM patients;
-- expect:
SELECT SUM(CASE WHEN (CAST(birth_year AS DECIMAL) - 1975.0) IS NULL THEN NULL ELSE LEAST(GREATEST(CAST((CAST(birth_year AS DECIMAL) - 1975.0) AS DECIMAL), -45.0), 45.0) END) AS "c0", COUNT(birth_year) AS "c1" FROM "public"."patients";
