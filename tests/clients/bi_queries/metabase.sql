-- Metabase (PostgreSQL driver, over pgjdbc): the database sync. Source:
-- metabase/metabase src/metabase/driver/postgres.clj (db-default-timezone, enum-types,
-- current-user-table-privileges, get-tables-sql, describe-fields-sql, describe-fks-sql,
-- describe-indexes-sql), HoneySQL rendered with ANSI quoting; Metabase binds the schema
-- names, here the literal 'public'.
-- Statements end with ";" at the end of a line; "-- expect: a, b" lists values that must
-- appear in the statement's result.

show timezone;

SELECT nspname, typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE t.oid IN (SELECT DISTINCT enumtypid FROM pg_enum e);

-- expect: customers, orders, products, recommendations
with table_privileges as (
 select
   NULL as role,
   t.schemaname as schema,
   t.objectname as table,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'update') as update,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'select') as select,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'insert') as insert,
   pg_catalog.has_table_privilege(     current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'delete') as delete
 from (
   select schemaname, tablename as objectname from pg_catalog.pg_tables
   union
   select schemaname, viewname as objectname from pg_catalog.pg_views
   union
   select schemaname, matviewname as objectname from pg_catalog.pg_matviews
 ) t
 where t.schemaname !~ '^pg_'
   and t.schemaname <> 'information_schema'
   and pg_catalog.has_schema_privilege(current_user, t.schemaname, 'usage')
)
select t.*
from table_privileges t;

-- expect: customers, orders, products, recommendations
SELECT "n"."nspname" AS "schema", "c"."relname" AS "name", CASE "c"."relkind" WHEN 'r' THEN 'TABLE' WHEN 'p' THEN 'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW' WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE NULL END AS "type", "d"."description" AS "description", "stat"."n_live_tup" AS "estimated_row_count"
FROM "pg_catalog"."pg_class" AS "c"
INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON "c"."relnamespace" = "n"."oid"
LEFT JOIN "pg_catalog"."pg_description" AS "d" ON ("c"."oid" = "d"."objoid") AND ("d"."objsubid" = 0) AND ("d"."classoid" = 'pg_class'::regclass)
LEFT JOIN "pg_stat_user_tables" AS "stat" ON ("n"."nspname" = "stat"."schemaname") AND ("c"."relname" = "stat"."relname")
WHERE ("c"."relnamespace" = "n"."oid") AND ("n"."nspname" !~ '^pg_') AND ("n"."nspname" <> 'information_schema') AND c.relkind in ('r', 'p', 'v', 'f', 'm') AND ("n"."nspname" IN ('public'))
ORDER BY "type" ASC, "schema" ASC, "name" ASC;

-- expect: orders, order_id, customer_id, product_id, quantity, order_cost, order_date
SELECT "c"."column_name" AS "name", CASE WHEN "c"."udt_schema" IN ('public', 'pg_catalog') THEN FORMAT('%s', "c"."udt_name") ELSE FORMAT('"%s"."%s"', "c"."udt_schema", "c"."udt_name") END AS "database-type", "c"."ordinal_position" - 1 AS "database-position", "c"."table_schema" AS "table-schema", "c"."table_name" AS "table-name", "pk"."column_name" IS NOT NULL AS "pk?", COL_DESCRIPTION(CAST(CAST(FORMAT('%I.%I', CAST("c"."table_schema" AS TEXT), CAST("c"."table_name" AS TEXT)) AS REGCLASS) AS OID), "c"."ordinal_position") AS "field-comment", (("column_default" IS NULL) OR (LOWER("column_default") = 'null')) AND ("is_nullable" = 'NO') AND NOT ((("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" <> 'NO')) AS "database-required", (("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" <> 'NO') AS "database-is-auto-increment"
FROM "information_schema"."columns" AS "c"
LEFT JOIN (SELECT "tc"."table_schema", "tc"."table_name", "kc"."column_name" FROM "information_schema"."table_constraints" AS "tc" INNER JOIN "information_schema"."key_column_usage" AS "kc" ON ("tc"."constraint_name" = "kc"."constraint_name") AND ("tc"."table_schema" = "kc"."table_schema") AND ("tc"."table_name" = "kc"."table_name") WHERE "tc"."constraint_type" = 'PRIMARY KEY') AS "pk" ON ("c"."table_schema" = "pk"."table_schema") AND ("c"."table_name" = "pk"."table_name") AND ("c"."column_name" = "pk"."column_name")
WHERE c.table_schema !~ '^information_schema|catalog_history|pg_' AND ("c"."table_schema" IN ('public'))
UNION ALL
SELECT "pa"."attname" AS "name", CASE WHEN "ptn"."nspname" IN ('public', 'pg_catalog') THEN FORMAT('%s', "pt"."typname") ELSE FORMAT('"%s"."%s"', "ptn"."nspname", "pt"."typname") END AS "database-type", "pa"."attnum" - 1 AS "database-position", "pn"."nspname" AS "table-schema", "pc"."relname" AS "table-name", FALSE AS "pk?", NULL AS "field-comment", FALSE AS "database-required", FALSE AS "database-is-auto-increment"
FROM "pg_catalog"."pg_class" AS "pc"
INNER JOIN "pg_catalog"."pg_namespace" AS "pn" ON "pn"."oid" = "pc"."relnamespace"
INNER JOIN "pg_catalog"."pg_attribute" AS "pa" ON "pa"."attrelid" = "pc"."oid"
INNER JOIN "pg_catalog"."pg_type" AS "pt" ON "pt"."oid" = "pa"."atttypid"
INNER JOIN "pg_catalog"."pg_namespace" AS "ptn" ON "ptn"."oid" = "pt"."typnamespace"
WHERE ("pc"."relkind" = 'm') AND ("pa"."attnum" >= 1) AND ("pn"."nspname" IN ('public'))
ORDER BY "table-schema" ASC, "table-name" ASC, "database-position" ASC;

-- expect: orders, customers, products, customer_id, product_id
SELECT "fk_ns"."nspname" AS "fk-table-schema", "fk_table"."relname" AS "fk-table-name", "fk_column"."attname" AS "fk-column-name", "pk_ns"."nspname" AS "pk-table-schema", "pk_table"."relname" AS "pk-table-name", "pk_column"."attname" AS "pk-column-name"
FROM "pg_constraint" AS "c"
INNER JOIN "pg_class" AS "fk_table" ON "c"."conrelid" = "fk_table"."oid"
INNER JOIN "pg_namespace" AS "fk_ns" ON "c"."connamespace" = "fk_ns"."oid"
INNER JOIN "pg_attribute" AS "fk_column" ON "c"."conrelid" = "fk_column"."attrelid"
INNER JOIN "pg_class" AS "pk_table" ON "c"."confrelid" = "pk_table"."oid"
INNER JOIN "pg_namespace" AS "pk_ns" ON "pk_table"."relnamespace" = "pk_ns"."oid"
INNER JOIN "pg_attribute" AS "pk_column" ON "c"."confrelid" = "pk_column"."attrelid"
WHERE fk_ns.nspname !~ '^information_schema|catalog_history|pg_' AND ("c"."contype" = 'f'::char) AND ("fk_column"."attnum" = ANY(c.conkey)) AND ("pk_column"."attnum" = ANY(c.confkey)) AND ("fk_ns"."nspname" IN ('public'))
ORDER BY "fk-table-schema" ASC, "fk-table-name" ASC;

-- expect: orders, order_id, customer_id, product_id
SELECT "tmp"."table-schema", "tmp"."table-name", TRIM(BOTH '"' FROM PG_CATALOG.PG_GET_INDEXDEF("tmp"."ci_oid", "tmp"."pos", FALSE)) AS "field-name"
FROM (SELECT "n"."nspname" AS "table-schema", "ct"."relname" AS "table-name", "ci"."oid" AS "ci_oid", (information_schema._pg_expandarray("i"."indkey"))."n" AS "pos" FROM "pg_catalog"."pg_class" AS "ct" INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON "ct"."relnamespace" = "n"."oid" INNER JOIN "pg_catalog"."pg_index" AS "i" ON "ct"."oid" = "i"."indrelid" INNER JOIN "pg_catalog"."pg_class" AS "ci" ON "ci"."oid" = "i"."indexrelid" WHERE (PG_CATALOG.PG_GET_EXPR("i"."indpred", "i"."indrelid") IS NULL) AND n.nspname !~ '^information_schema|catalog_history|pg_' AND ("n"."nspname" IN ('public'))) AS "tmp"
WHERE "tmp"."pos" = 1;
