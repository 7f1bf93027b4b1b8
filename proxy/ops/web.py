"""The operations HTTP endpoints on aiohttp, in the proxy's own event loop: /metrics
for Prometheus (server.metrics_port) and the dashboard (server.dashboard_port)."""

from __future__ import annotations

import hmac

from aiohttp import BasicAuth, web
from prometheus_client import CONTENT_TYPE_LATEST

from accounting import Ledger

from ..engine.workers import Workers
from .hub import Operations

METRICS_REALM = 'Basic realm="dpgate metrics", charset="UTF-8"'


def metrics_app(ops: Operations, ledger: Ledger, workers: Workers, token: str = ""
                ) -> web.Application:
    """GET /metrics: the counters, and the budget gauges read from the ledger now; with a
    `token`, only for a request that shows it (`authorized`)."""

    async def metrics(request: web.Request) -> web.Response:
        if token and not authorized(request.headers.get("Authorization", ""), token):
            return web.Response(status=401, text="dpgate metrics: show server.metrics_token "
                                "as a bearer token or a basic-auth password\n",
                                headers={"WWW-Authenticate": METRICS_REALM})
        try:
            ops.metrics.set_budgets(await workers.ledger_read(ledger.budgets))
        except Exception:  # a failing ledger must not take the counters down with it
            ops.metrics.ledger_errors.inc()
        return web.Response(body=ops.metrics.exposition(),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


def authorized(header: str, token: str) -> bool:
    """Whether an Authorization header shows `token`: `Bearer <token>`, or basic
    authentication with it as the password (Prometheus' `authorization` or `basic_auth`).
    Compared in constant time."""
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer":
        shown = value.strip()
    elif scheme.lower() == "basic":
        try:
            shown = BasicAuth.decode(header).password
        except ValueError:
            return False
    else:
        return False
    return hmac.compare_digest(shown.encode(), token.encode())


async def start_site(app: web.Application, host: str, port: int) -> web.AppRunner:
    """Serve `app` on host:port; cleanup() the returned runner to stop."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
