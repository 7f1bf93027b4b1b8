"""Scripted check that Apache Superset works through dpgate. Run it with Superset's own
Python (Superset pins packages of its own: keep it in a virtualenv of its own):

    SUPERSET_CONFIG_PATH=examples/superset/superset_config.py SUPERSET_HOME=$(mktemp -d) \\
        /path/to/superset-venv/bin/python examples/superset/check.py \\
        postgresql+psycopg2://alice:alice@127.0.0.1:6432/demo [report.json]

It builds Superset's metadata in SUPERSET_HOME, registers dpgate as a database the way
the "Connect a database" form does, lists its tables through Superset's inspector, then
asks Superset's SQLAlchemy model (SqlaTable, as the Explore view does) for the queries of
two charts — a bar chart of orders per product and a monthly time series of order
counts — and runs them through dpgate. It writes one JSON object (to report.json, else to
stdout after Superset's own output): the tables, the columns of orders, and per chart
the SQL Superset generated and the rows dpgate answered (noisy counts).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path


def main(uri: str) -> dict:
    import superset
    from flask_migrate import upgrade
    from superset.app import create_app

    app = create_app()
    with app.app_context():
        from superset import db
        from superset.connectors.sqla.models import SqlaTable
        from superset.models.core import Database

        # Superset's metadata tables, as `superset db upgrade` makes them.
        upgrade(directory=str(Path(superset.__file__).parent / "migrations"))
        database = Database(database_name="dpgate", sqlalchemy_uri=uri)
        db.session.add(database)
        db.session.commit()
        with database.get_sqla_engine() as engine, engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1").fetchall()  # "Test connection"
        tables = sorted(name for name, _, _ in database.get_all_table_names_in_schema(
            catalog=None, schema="public"))

        orders = SqlaTable(table_name="orders", schema="public", database=database)
        db.session.add(orders)
        orders.fetch_metadata()  # column names and types, through the inspector
        db.session.commit()
        columns = sorted(column.column_name for column in orders.columns)
        count = {"expressionType": "SQL", "sqlExpression": "COUNT(*)", "label": "count"}
        charts = {
            # Bar chart: orders per product, the 10 largest.
            "orders_per_product": dict(
                groupby=["product_id"], metrics=[count], is_timeseries=False,
                orderby=[(count, False)], row_limit=10, filter=[], extras={}),
            # Time series: order counts per month of 2024.
            "orders_per_month": dict(
                columns=[{"label": "order_date", "sqlExpression": "order_date",
                          "columnType": "BASE_AXIS", "timeGrain": "P1M",
                          "expressionType": "SQL"}],
                groupby=[], metrics=[count], is_timeseries=False,
                granularity="order_date",
                from_dttm=datetime(2024, 1, 1), to_dttm=datetime(2025, 1, 1),
                orderby=[({"label": "order_date", "sqlExpression": "order_date",
                           "expressionType": "SQL"}, True)],
                row_limit=100, filter=[], extras={"time_grain_sqla": "P1M"}),
        }
        results = {}
        for name, query in charts.items():
            sql = orders.get_query_str(query)
            frame = database.get_df(sql, None, "public")
            results[name] = {"sql": sql, "columns": list(frame.columns),
                             "rows": json.loads(frame.to_json(orient="values",
                                                              date_format="iso"))}
        return {"tables": tables, "orders_columns": columns, "charts": results}


if __name__ == "__main__":
    report = json.dumps(main(sys.argv[1]), indent=2, default=str)
    if len(sys.argv) > 2:  # Superset's migrations print to stdout: a file keeps it clean
        Path(sys.argv[2]).write_text(report + "\n")
    else:
        print(report)
