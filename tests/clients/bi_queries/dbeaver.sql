-- DBeaver (PostgreSQL plugin, over pgjdbc): connecting and expanding the navigator down to
-- a table's columns, keys, indexes, triggers and rules. Texts as DBeaver 23 sends them
-- (org.jkiss.dbeaver.ext.postgresql.model: PostgreDataSource, PostgreDatabase,
-- PostgreSchema caches), recorded in YottaDB Octo's DBeaver test TDCQ01. DBeaver binds the
-- object ids as parameters; here they are literals (2200 is the OID of schema public in
-- every PostgreSQL database). The keyword list of pg_get_keywords() is shortened.
-- Statements end with ";" at the end of a line; "-- expect: a, b" lists values that must
-- appear in the statement's result.

SELECT current_schema(),session_user;

SHOW TRANSACTION ISOLATION LEVEL;

SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE datname=current_database();

select string_agg(word, ',') from pg_catalog.pg_get_keywords() where word <> ALL ('{a,abs,absolute,action,ada,add,admin,after,all}'::text[]);

SELECT c.contoencoding as encid,pg_catalog.pg_encoding_to_char(c.contoencoding) as encname FROM pg_catalog.pg_conversion c GROUP BY c.contoencoding ORDER BY 2;

-- expect: public
SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n
LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=n.oid AND d.objsubid=0 AND d.classoid='pg_namespace'::regclass
ORDER BY nspname;

-- expect: customers, orders, products, recommendations
SELECT c.oid,c.*,d.description,pg_catalog.pg_get_expr(c.relpartbound, c.oid) as partition_expr,  pg_catalog.pg_get_partkeydef(c.oid) as partition_key , dep.objid, dep.refobjsubid
FROM pg_catalog.pg_class c
LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND d.classoid='pg_class'::regclass
LEFT OUTER JOIN pg_depend dep on dep.refobjid = c."oid" AND dep.deptype = 'i' and dep.refobjsubid <> 0 and dep.classid = dep.refclassid
WHERE c.relnamespace=2200 AND c.relkind not in ('i','I','c');

-- expect: order_id, customer_id, product_id, quantity, order_cost, order_date, address, price
SELECT c.relname,a.*,pg_catalog.pg_get_expr(ad.adbin, ad.adrelid, true) as def_value,dsc.description
FROM pg_catalog.pg_attribute a
INNER JOIN pg_catalog.pg_class c ON (a.attrelid=c.oid)
LEFT OUTER JOIN pg_catalog.pg_attrdef ad ON (a.attrelid=ad.adrelid AND a.attnum = ad.adnum)
LEFT OUTER JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)
WHERE NOT a.attisdropped AND c.relkind not in ('i','I','c') AND c.relnamespace=2200
ORDER BY a.attnum;

-- expect: orders_pkey, orders_customer_id_fkey, orders_product_id_fkey
SELECT c.oid,c.*,t.relname as tabrelname,rt.relnamespace as refnamespace,d.description, case when c.contype='c' then "substring"(pg_get_constraintdef(c.oid), 7) else null end consrc_copy
FROM pg_catalog.pg_constraint c
INNER JOIN pg_catalog.pg_class t ON t.oid=c.conrelid
LEFT OUTER JOIN pg_catalog.pg_class rt ON rt.oid=c.confrelid
LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND d.classoid='pg_constraint'::regclass
WHERE c.conrelid='public.orders'::regclass
ORDER BY c.oid;

-- expect: orders_pkey, orders_customer_id_idx, orders_product_id_idx
SELECT i.*,i.indkey as keys,c.relname,c.relnamespace,c.relam,c.reltablespace,tc.relname as tabrelname,dsc.description,pg_catalog.pg_get_expr(i.indpred, i.indrelid) as pred_expr,pg_catalog.pg_get_expr(i.indexprs, i.indrelid, true) as expr,pg_catalog.pg_relation_size(i.indexrelid) as index_rel_size,pg_catalog.pg_stat_get_numscans(i.indexrelid) as index_num_scans
FROM pg_catalog.pg_index i
INNER JOIN pg_catalog.pg_class c ON c.oid=i.indexrelid
INNER JOIN pg_catalog.pg_class tc ON tc.oid=i.indrelid
LEFT OUTER JOIN pg_catalog.pg_description dsc ON i.indexrelid=dsc.objoid
WHERE i.indrelid='public.orders'::regclass ORDER BY c.relname;

SELECT i.*,c.relnamespace FROM pg_catalog.pg_inherits i,pg_catalog.pg_class c WHERE i.inhrelid='public.orders'::regclass AND c.oid=i.inhparent ORDER BY i.inhseqno;

SELECT x.oid,x.*,p.pronamespace as func_schema_id,d.description FROM pg_catalog.pg_trigger x LEFT OUTER JOIN pg_catalog.pg_proc p ON p.oid=x.tgfoid LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=x.oid AND d.objsubid=0 WHERE x.tgrelid = 'public.orders'::regclass AND NOT x.tgisinternal;

SELECT r.oid,r.*, pg_get_ruledef(r.oid) AS definition FROM pg_rewrite r WHERE r.ev_class='public.orders'::regclass AND r.rulename <> '_RETURN'::name;

select * from pg_catalog.pg_policies where schemaname='public' and tablename='orders';
