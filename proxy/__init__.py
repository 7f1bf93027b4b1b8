"""dpgate's front: PostgreSQL's protocol on the outside, the answering engine inside.

Sub-packages, lowest layer first. Each may import only sub-packages listed before it
(its own `__init__` says exactly which, and which of the pure packages rewriter/,
accounting/, mechanisms/):

- `proxy.pgwire`  the PostgreSQL v3 protocol: messages and their codes, startup, TLS,
                  SCRAM, the backend client, the outbox, what to cancel. Of dpgate it
                  imports only `rewriter.sqlstate` (the SQLSTATE enum, a leaf module).
- `proxy.config`  the settings (one module, read by every layer above pgwire).
- `proxy.engine`  what to answer: the dispatcher from plan kind to action, planning,
                  private answers and their release, dp.* settings, errors, caches.
- `proxy.server`  the asyncio glue: accept, sessions, the simple and extended protocol.
- `proxy.demo`    the embedded demo: PostgreSQL, data, roles, analysts (pgwire and
                  config only).
- `proxy.ops`     running it as a service: metrics, audit log, admin console, dashboard.
- `proxy.admin`   the `dpgate` command line (also `python -m proxy`, `proxy.__main__`).

Beside them `proxy.native` (no dpgate imports, installed first, below): the relay's hot
modules compiled with mypyc, served instead of their .py only while the build matches
the source.

tests/test_layers.py enforces this order and the absence of import cycles.
"""

from .native import install

install()
