"""SmartNoise SQL on bench/accuracy.py's queries (run by bench/accuracy.py).

Run by a Python that has `smartnoise-sql` and `psycopg2-binary` (a separate virtualenv:
SmartNoise pins its own versions of SQLAlchemy and friends). Reads {"dsn", "epsilon",
"draws", "max_ids", "row_privacy", "queries": {shape: [sql, …]}} as JSON on stdin and
prints one JSON line: per shape, the absolute and relative error of every released cell
against PostgreSQL's answer to the same text ({"absolute": […], "relative": […]}).

Person level, SmartNoise gets dpgate's protection: the customer is the private id and
`max_ids` (its fixed contribution bound, dpgate's τ) as asked, the same column bounds,
δ = 1e-8; at row level (`row_privacy`) each row is its own id. `censor_dims` is off:
SmartNoise then releases the groups present in the data without thresholding (dpgate
releases a declared domain whole), which spends no δ on them and favours SmartNoise. A
cell SmartNoise leaves out counts as released 0. SmartNoise answers single tables only
(a join fails: "We only know how to handle tables with one key").
"""

from __future__ import annotations

import json
import sys
import warnings

import psycopg2
from snsql import Privacy, from_connection

warnings.filterwarnings("ignore")


def metadata(max_ids: int, row_privacy: bool) -> dict:
    return {
        "engine": "postgres",
        "demo": {"public": {"orders": {
            "max_ids": max_ids, "row_privacy": row_privacy, "sample_max_ids": True,
            "censor_dims": False,
            "order_id": {"type": "int"},
            "customer_id": {"type": "int", "private_id": not row_privacy},
            "product_id": {"type": "int"},
            "quantity": {"type": "int", "lower": 1, "upper": 10},
            "order_cost": {"type": "float", "lower": 0, "upper": 5000},
            "order_date": {"type": "datetime"},
        }}},
    }


def _cells(rows) -> dict[tuple, float]:
    """{key: value} of a result (keys as text of their number: '8' and 8.0 agree)."""
    return {tuple(_key(k) for k in row[:-1]): float(row[-1] or 0) for row in rows}


def _key(value: object) -> str:
    try:
        return str(int(float(str(value))))
    except ValueError:
        return str(value)


def main() -> None:
    request = json.load(sys.stdin)
    connection = psycopg2.connect(request["dsn"])
    reader = from_connection(connection, privacy=Privacy(epsilon=request["epsilon"],
                                                         delta=1e-8),
                             metadata=metadata(request.get("max_ids", 10),
                                               request.get("row_privacy", False)))
    errors: dict[str, dict[str, list[float]]] = {}
    for shape, queries in request["queries"].items():
        found = errors.setdefault(shape, {"absolute": [], "relative": []})
        for sql in queries:
            with connection.cursor() as cursor:
                cursor.execute(sql)
                truth = _cells(cursor.fetchall())
            for _ in range(request.get("draws", 1)):
                released = _cells(reader.execute(sql.replace("FROM orders",
                                                             "FROM public.orders"))[1:])
                for key, value in truth.items():
                    error = abs(released.get(key, 0.0) - value)
                    found["absolute"].append(error)
                    found["relative"].append(error / value if value else 0.0)
    print(json.dumps(errors))


if __name__ == "__main__":
    main()
