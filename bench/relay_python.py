"""The relay's own Python per relayed transaction, in-process: what no other work on a
shared machine disturbs.

    .venv/bin/python -m bench.relay_python [--rounds 5] [--transactions 20000] [ROOT …]

For each checkout ROOT (default: this one), in a process of its own that imports that
checkout's code, one session's fast path is driven as the transports' callbacks drive it:
a pgbench-like transaction's bytes go into the client transport's hook
(`SELECT name, price FROM products WHERE product_id = 7`, a cached relayed statement, as a
Query; the same statement prepared as Bind/Describe/Execute/Sync), and PostgreSQL's
answer into the relay connection's. The transports take the bytes and do nothing, so the
figure is dpgate's Python alone, its report to operations (metrics, recent decisions)
included: no sockets, no event loop, no PostgreSQL (the end-to-end
figures are bench/private_latency.py's passthrough part). The checkouts take turns,
`--rounds` times; each prints the CPU time of its thread per transaction (best and
median of its rounds), and each round checks that every transaction was relayed the
fast way.

A checkout from before the one relay routine (7d53ae9: FastRelay relaying by itself) is
driven through its own constructors, so that before and after can be compared.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SQL = "SELECT name, price FROM products WHERE product_id = 7"


class _Transport(asyncio.Transport):
    """Takes what is written and counts the writes."""

    def __init__(self, protocol: asyncio.Protocol):
        super().__init__()
        self.protocol = protocol
        self.written = 0

    def write(self, data: Any) -> None:
        self.written += 1

    def is_closing(self) -> bool:
        return False

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.protocol

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _measure(transactions: int) -> dict[str, float]:
    """CPU µs per transaction of this process's checkout, simple and prepared."""
    from proxy.ops import Operations
    from proxy.pgwire import wire
    from proxy.pgwire.backend import BackendConnection
    from proxy.pgwire.client_stream import ClientReader
    from proxy.pgwire.codes import Target
    from proxy.pgwire.hooked import HookedStreamProtocol
    from proxy.pgwire.outbox import Outbox
    from proxy.pgwire.running import Running
    from proxy.server.extended import ExtendedProtocol
    from proxy.server.fast_relay import FastRelay
    from proxy.server.prepared import Prepared, PreparedStatements
    from proxy.server.session import Session
    from rewriter.plan import Relay
    try:
        from rewriter.analysis.classify import Statement
    except ImportError:  # before the rewriter's passes
        from rewriter.classify import Statement  # type: ignore[no-redef]

    plan = Relay(SQL)

    class Engine:  # the plan cache, holding the statement
        def cached(self, sql: str) -> list[Statement]:
            return [Statement(sql, 0, plan)]

    loop = asyncio.get_running_loop()

    def stream() -> tuple[ClientReader, asyncio.StreamWriter, HookedStreamProtocol,
                          _Transport]:
        reader = ClientReader()
        protocol = reader.protocol = HookedStreamProtocol(reader)
        transport = _Transport(protocol)
        protocol.connection_made(transport)
        return reader, asyncio.StreamWriter(transport, protocol, reader, loop), protocol, \
            transport

    reader, writer, client, client_transport = stream()
    backend_reader, backend_writer, backend, backend_transport = stream()
    relay = BackendConnection(backend_reader, backend_writer)
    outbox = Outbox(writer)
    engine: Any = Engine()
    if "reader" in inspect.signature(Session).parameters:  # the one relay routine
        # Reporting to a real Operations, as a proxy does (metrics, recent decisions).
        ops = Operations().session("analyst", "127.0.0.1:5000", "demo", "pgbench")
        session = Session(None, engine, relay, None,  # type: ignore[arg-type]
                          reader=reader, writer=writer, outbox=outbox,
                          prepared=PreparedStatements(), running=Running(), ops=ops)
        FastRelay(session, ExtendedProtocol(session), 1 << 20)
    else:  # 7d53ae9
        session = Session(None, engine, relay, None, outbox.send,  # type: ignore
                          lambda: None, PreparedStatements(), Running())
        FastRelay(session, ExtendedProtocol(session), reader, writer,  # type: ignore
                  outbox, 1 << 20)
    reader.waiting = True  # the session's task waits for its client
    session.prepared.statements["s"] = Prepared(SQL, plan, ())
    rows = (wire.row_description([("name", 25), ("price", 1700)])
            + wire.data_row(["Widget", "9.99"]) + wire.command_complete("SELECT 1"))
    ready = wire.ready_for_query(b"I")
    kinds = {
        "simple": (wire.message(b"Q", SQL.encode() + b"\0"), rows + ready),
        "prepared": (wire.bind_message("", "s", (), (), ())
                     + wire.describe_message(Target.PORTAL, "")
                     + wire.execute_message("") + wire.SYNC, wire.message(b"2") + rows + ready),
    }
    measured = {}
    for name, (sent, answer) in kinds.items():
        writes = client_transport.written, backend_transport.written
        gc.disable()
        started = time.thread_time()
        for _ in range(transactions):
            client.data_received(sent)
            backend.data_received(answer)
        elapsed = time.thread_time() - started
        gc.enable()
        if (backend_transport.written - writes[1], client_transport.written - writes[0]) != (
                transactions, transactions) or reader.pending() or backend_reader.pending():
            raise RuntimeError(f"{name}: not every transaction was relayed the fast way")
        measured[name] = elapsed / transactions * 1e6
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="*", type=Path, default=[ROOT],
                        help="checkouts to measure (default: this one)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--transactions", type=int, default=20000)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one round of the checkout first on sys.path
        print(json.dumps(asyncio.run(_measure(args.transactions))))
        return
    results: dict[Path, list[dict[str, float]]] = {root: [] for root in args.roots}
    for _ in range(args.rounds):
        for root in args.roots:
            # -c with the checkout as the working directory: its packages come first.
            output = subprocess.run(
                [sys.executable, "-c", "import sys, runpy; sys.argv[0] = 'relay_python'; "
                 f"runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')",
                 "--child", "--transactions", str(args.transactions)],
                cwd=root, capture_output=True, text=True, check=True).stdout
            results[root].append(json.loads(output.splitlines()[-1]))
    print(f"µs of CPU per relayed transaction, best / median of {args.rounds} rounds "
          f"({args.transactions:,} transactions each)")
    print(f"{'checkout':<40}{'simple':>18}{'prepared':>18}")
    for root, rounds in results.items():
        cells = [f"{min(r[kind] for r in rounds):.2f} / "
                 f"{statistics.median(r[kind] for r in rounds):.2f}"
                 for kind in ("simple", "prepared")]
        print(f"{str(root):<40}{cells[0]:>18}{cells[1]:>18}")


if __name__ == "__main__":
    main()
