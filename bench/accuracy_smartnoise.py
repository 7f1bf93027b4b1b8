"""SmartNoise SQL on bench/accuracy.py's single-table queries (run by bench/accuracy.py).

Run by a Python that has `smartnoise-sql` and `psycopg2-binary` (a separate virtualenv:
SmartNoise pins its own versions of SQLAlchemy and friends). Reads {"dsn", "epsilon",
"queries": {shape: [sql, …]}} as JSON on stdin and prints one JSON line: the median
absolute error per shape. SmartNoise gets the same protection as dpgate's unit mode: the
customer is the private id, max_ids = 10 (τ), the same column bounds, δ = 1e-8.
"""

from __future__ import annotations

import json
import statistics
import sys
import warnings

import psycopg2
from snsql import Privacy, from_connection

warnings.filterwarnings("ignore")

METADATA = {
    "engine": "postgres",
    "demo": {"public": {"orders": {
        "max_ids": 10, "row_privacy": False, "sample_max_ids": True, "censor_dims": False,
        "order_id": {"type": "int"},
        "customer_id": {"type": "int", "private_id": True},
        "product_id": {"type": "int"},
        "quantity": {"type": "int", "lower": 1, "upper": 10},
        "order_cost": {"type": "float", "lower": 0, "upper": 5000},
        "order_date": {"type": "datetime"},
    }}},
}


def main() -> None:
    request = json.load(sys.stdin)
    connection = psycopg2.connect(request["dsn"])
    reader = from_connection(connection, privacy=Privacy(epsilon=request["epsilon"],
                                                         delta=1e-8), metadata=METADATA)
    medians = {}
    for shape, queries in request["queries"].items():
        errors = []
        for sql in queries:
            with connection.cursor() as cursor:
                cursor.execute(sql)
                truth = float(cursor.fetchone()[0] or 0)
            for _ in range(request.get("draws", 1)):
                released = reader.execute(sql.replace("FROM orders", "FROM public.orders"))
                value = released[1][0]
                errors.append(abs(float(value if value is not None else 0) - truth))
        medians[shape] = statistics.median(errors)
    print(json.dumps(medians))


if __name__ == "__main__":
    main()
