"""A blind relay on uvloop: every byte from a client to PostgreSQL and back, looked at by
nothing. What relaying costs Python and uvloop at the least, beside which dpgate's relay
is measured (bench/private_latency.py's passthrough part).

    .venv/bin/python -m bench.bare_relay PORT PGHOST [PGPORT]

PGHOST is a host name or the directory of PostgreSQL's Unix socket. Each client gets a
connection of its own to PostgreSQL, opened when it connects; what it sends before that
is queued.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import uvloop


class _Side(asyncio.Protocol):
    """One connection; what it receives is written to its peer."""

    def __init__(self) -> None:
        self.transport: Any = None  # uvloop's transports are not asyncio.Transport
        self.peer: _Side | None = None
        self.queued: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.write(data)
        else:
            self.queued.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()


async def _serve(port: int, host: str, pg_port: int) -> None:
    loop = asyncio.get_running_loop()

    async def connect(client: _Side) -> None:
        if host.startswith("/"):
            _, backend = await loop.create_unix_connection(_Side, f"{host}/.s.PGSQL.{pg_port}")
        else:
            _, backend = await loop.create_connection(_Side, host, pg_port)
        backend.peer, client.peer = client, backend
        assert backend.transport is not None
        for data in client.queued:
            backend.transport.write(data)
        client.queued.clear()

    class Client(_Side):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # TCP_NODELAY: uvloop's default
            loop.create_task(connect(self))

    server = await loop.create_server(Client, "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(_serve(int(sys.argv[1]), sys.argv[2],
                      int(sys.argv[3]) if len(sys.argv) > 3 else 5432))
