"""What post-processing on the relay role's reset connections costs (issue 23).

    .venv/bin/python -m bench.post_processing [--runs 200] [--dpgate-root PATH]

Starts an embedded PostgreSQL (pgserver) with the demo dataset and dpgate (`dpgate serve`
from this checkout, or the one `--dpgate-root` names, to compare with an earlier commit),
then asks, taking turns question by question, fresh private counts
`SELECT count(*) FROM orders WHERE product_id = k` and fresh post-processed ones
`SELECT count(*) + 1 FROM orders WHERE product_id = k` (the second runs its expression over
the released value on a post-processing connection, reset before each use). Then, in
process, the reset alone: a pooled relay-role connection lent for `SELECT 1`, with and
without the reset, taking turns. Prints medians, p95s and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench.clients import DATABASE, demo_backend, p95, start_dpgate, time_fresh_questions
from proxy.demo.roles import RELAY
from proxy.pgwire.backend import BackendPool, Endpoint

QUESTIONS = {
    "plain": "SELECT count(*) FROM orders WHERE product_id = {k}",
    "post-processed": "SELECT count(*) + 1 FROM orders WHERE product_id = {k}",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="questions of each kind")
    parser.add_argument("--dpgate-root", type=Path, default=None,
                        help="run the dpgate of this checkout instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dpgate-bench-") as temporary, ExitStack() as stack:
        directory = Path(temporary)
        _, dsns = demo_backend(directory, stack)
        port, _ = start_dpgate(directory, dsns, stack, root=args.dpgate_root)
        times = time_fresh_questions(port, DATABASE, QUESTIONS, args.runs, warm=0)
        times.update(asyncio.run(_lends(Endpoint.from_dsn(dsns[RELAY]), args.runs * 5)))
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    print(f"{'question':<16}{'median ms':>11}{'p95 ms':>9}")
    for kind, values in times.items():
        print(f"{kind:<16}{medians[kind] * 1000:>11.2f}{p95(values) * 1000:>9.2f}")
    print(f"post-processed / plain (medians): "
          f"{medians['post-processed'] / medians['plain']:.2f}")
    print(f"lend with reset / without (medians): "
          f"{medians['lend, reset'] / medians['lend, no reset']:.2f}")


async def _lends(endpoint: Endpoint, runs: int) -> dict[str, list[float]]:
    """Seconds of a lend running `SELECT 1`, from pools with and without the reset."""
    pools = {"lend, no reset": BackendPool(endpoint, 1),
             "lend, reset": BackendPool(endpoint, 1, reset=True)}
    times: dict[str, list[float]] = {kind: [] for kind in pools}
    for _ in range(runs + 1):
        for kind, pool in pools.items():
            start = time.perf_counter()
            async with pool.connection() as backend:
                await backend.fetch("SELECT 1")
            times[kind].append(time.perf_counter() - start)
    for pool in pools.values():
        pool.close()
    return {kind: values[1:] for kind, values in times.items()}  # the first one connects


if __name__ == "__main__":
    main()
