-- Grafana (PostgreSQL data source; its Go backend sends plain simple queries): version and
-- TimescaleDB detection, then the query editor's schema, table and column pickers for
-- table orders. Source: grafana/grafana
-- public/app/plugins/datasource/grafana-postgresql-datasource/postgresMetaQuery.ts
-- (getVersion, getTimescaleDBVersion, showSchemas, showTables, getSchema).
-- Statements end with ";" at the end of a line; "-- expect: a, b" lists values that must
-- appear in the statement's result.

SELECT current_setting('server_version_num')::int/100 as version;

SELECT extversion FROM pg_extension WHERE extname = 'timescaledb';

-- expect: public
SELECT schema_name AS "name"
    FROM information_schema.schemata
    WHERE schema_name NOT IN ('information_schema',
                              'pg_catalog',
                              'pg_toast',
                              '_timescaledb_cache',
                              '_timescaledb_catalog',
                              '_timescaledb_internal',
                              '_timescaledb_config',
                              'timescaledb_information',
                              'timescaledb_experimental')
    ORDER BY schema_name;

-- expect: customers, orders, products, recommendations
SELECT
    CASE WHEN
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )
      THEN quote_ident(table_name)
      ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema',
                             'pg_catalog',
                             '_timescaledb_cache',
                             '_timescaledb_catalog',
                             '_timescaledb_internal',
                             '_timescaledb_config',
                             'timescaledb_information',
                             'timescaledb_experimental')
    ORDER BY CASE WHEN
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          ) THEN 0 ELSE 1 END, 1;

-- expect: customers, orders, products, recommendations
SELECT quote_ident(table_name) AS "table"
      FROM information_schema.tables
      WHERE quote_ident(table_schema) = 'public'
      ORDER BY 1;

-- expect: order_id, customer_id, product_id, quantity, order_cost, order_date, integer, date
SELECT quote_ident(column_name) AS "column", data_type AS "type"
    FROM information_schema.columns
    WHERE
      CASE WHEN array_length(parse_ident('orders'),1) = 2
        THEN quote_ident(table_schema) = (parse_ident('orders'))[1]
          AND quote_ident(table_name) = (parse_ident('orders'))[2]
        ELSE quote_ident(table_name) = 'orders'
          AND
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )
      END;
