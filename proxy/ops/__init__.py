"""Running dpgate as a service: Prometheus metrics, the audit log, the admin console and
the data owner's dashboard. None of them ever sees a released or a private value: they
are told what was decided about a statement (kind, outcome, SQLSTATE, ε and δ charged,
time taken), never its answer, and read budgets and charges from the ledger.

Modules: `hub` (sessions report their decisions here), `decision`, `metrics`
(prometheus_client), `audit` (JSON lines), `console` (the admin console database),
`views` (its tables), `dashboard` and `plots` (the web page), `web` (aiohttp sites),
`progress` (bars of long CLI commands).

May import: `proxy.engine`, `proxy.pgwire`, `proxy.config`, rewriter/, accounting/,
mechanisms/. Never `proxy.server`, `proxy.demo` or `proxy.admin` (which import it).
"""

from .decision import Decision
from .hub import Operations, SessionOps

__all__ = ["Decision", "Operations", "SessionOps"]
