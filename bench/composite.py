"""What answering a statement in several releases under one charge costs (issue 28).

    .venv/bin/python -m bench.composite [--runs 100] [--dpgate-root PATH]

Starts an embedded PostgreSQL (pgserver) with the demo dataset and dpgate (`dpgate serve`
from this checkout, or the one `--dpgate-root` names), then asks, taking turns question by
question with a fresh product k each time (no stored answer), a statement answered in
several releases (a quantile beside a count and an average; a UNION ALL of two private
counts) and the same releases asked as statements of their own. Prints medians, p95s and
the ratio of the composite to the sum of its parts; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from contextlib import ExitStack
from pathlib import Path

from bench.clients import DATABASE, demo_backend, p95, start_dpgate, time_fresh_questions

WHERE = " FROM orders WHERE product_id = {k}"
QUANTILE = "percentile_cont(0.5) WITHIN GROUP (ORDER BY order_cost)"
QUESTIONS = {
    "mixed": f"SELECT count(*), avg(quantity), {QUANTILE}{WHERE}",
    "  its noisy part": f"SELECT count(*), avg(quantity){WHERE}",
    "  its quantile": f"SELECT {QUANTILE}{WHERE}",
    "union": f"SELECT count(*){WHERE} UNION ALL "
             "SELECT count(*) FROM recommendations WHERE product_id = {k}",
    "  its first count": f"SELECT count(*){WHERE}",
    "  its second count": "SELECT count(*) FROM recommendations WHERE product_id = {k}",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="questions of each kind")
    parser.add_argument("--dpgate-root", type=Path, default=None,
                        help="run the dpgate of this checkout instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dpgate-bench-") as temporary, ExitStack() as stack:
        directory = Path(temporary)
        _, dsns = demo_backend(directory, stack)
        port, _ = start_dpgate(directory, dsns, stack, root=args.dpgate_root)
        times = time_fresh_questions(port, DATABASE, QUESTIONS, args.runs, warm=1000)
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print(f"{'question':<20}{'median ms':>11}{'p95 ms':>9}")
    for kind, values in times.items():
        print(f"{kind:<20}{medians[kind] * 1000:>11.2f}{p95(values) * 1000:>9.2f}")
    for whole, parts in (("mixed", ("  its noisy part", "  its quantile")),
                         ("union", ("  its first count", "  its second count"))):
        print(f"{whole} / its parts asked one by one (medians): "
              f"{medians[whole] / sum(medians[part] for part in parts):.2f}")


if __name__ == "__main__":
    main()
