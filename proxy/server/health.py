"""An HTTP health endpoint for load balancers: is this proxy's ledger reachable, and its
backend? (`server.health_port`; 0, the default, serves none.)

GET /health answers 200 when both answer within `TIMEOUT` seconds, else 503, with a small
JSON body saying which one failed; 503 also while the proxy is shutting down, so that the
load balancer drains it before its port closes. Nothing in it depends on private data.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from aiohttp import web

from ..pgwire.backend import BackendConnection

if TYPE_CHECKING:
    from .server import Proxy

log = logging.getLogger(__name__)

TIMEOUT = 3.0


async def check(proxy: Proxy) -> dict[str, str]:
    """'ok' or a short reason, for the ledger, the backend and the proxy itself."""
    results = {"proxy": "stopping" if proxy.stopping else "ok"}

    async def ledger() -> None:
        await proxy.workers.ledger_read(proxy.ledger.ping)

    async def backend() -> None:
        # A connection of its own (the relay role's): the reader pool may be busy with
        # long aggregates, which says nothing about whether the backend is up.
        connection = await BackendConnection.connect(proxy.relay_endpoint,
                                                     application_name="dpgate-health")
        try:
            await connection.fetch("SELECT 1")
        finally:
            connection.close()

    for name, probe in (("ledger", ledger), ("backend", backend)):
        try:
            await asyncio.wait_for(probe(), TIMEOUT)
            results[name] = "ok"
        except TimeoutError:
            results[name] = f"no answer within {TIMEOUT:g} s"
        except Exception as error:  # any failure means: do not send clients here
            results[name] = type(error).__name__
    return results


async def start_health(proxy: Proxy, host: str, port: int) -> web.AppRunner:
    """Serve GET /health on host:port; stop it with `await runner.cleanup()`."""
    async def health(_: web.Request) -> web.Response:
        results = await check(proxy)
        healthy = all(value == "ok" for value in results.values())
        if not healthy:
            log.warning("health check failing: %s", results)
        return web.json_response(results, status=200 if healthy else 503)

    app = web.Application()
    app.router.add_get("/health", health)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
