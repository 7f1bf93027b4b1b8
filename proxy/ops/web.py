"""The operations HTTP endpoints on aiohttp, in the proxy's own event loop: /metrics
for Prometheus (server.metrics_port) and the dashboard (server.dashboard_port)."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from accounting import Ledger

from ..engine.workers import Workers
from .hub import Operations


def metrics_app(ops: Operations, ledger: Ledger, workers: Workers) -> web.Application:
    """GET /metrics: the counters, and the budget gauges read from the ledger now."""

    async def metrics(_: web.Request) -> web.Response:
        try:
            ops.metrics.set_budgets(await workers.ledger_read(ledger.budgets))
        except Exception:  # a failing ledger must not take the counters down with it
            ops.metrics.ledger_errors.inc()
        return web.Response(body=ops.metrics.exposition(),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


async def start_site(app: web.Application, host: str, port: int) -> web.AppRunner:
    """Serve `app` on host:port; cleanup() the returned runner to stop."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
