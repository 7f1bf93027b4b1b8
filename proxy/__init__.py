"""dpgate's front: PostgreSQL's protocol on the outside, the answering engine inside.

Sub-packages, lowest layer first; each may import only the ones above it in this list
(and the pure packages rewriter/, accounting/, mechanisms/ where its docstring says so):

- `proxy.pgwire`  the PostgreSQL v3 protocol: messages, startup, TLS, SCRAM, the backend
                  client, the outbox. Imports nothing else of dpgate.
- `proxy.config`  the settings (one module, read by every layer above pgwire).
- `proxy.engine`  what to answer: releases with noise, choices, plan cache and check,
                  measured knowledge, limits, worker threads.
- `proxy.server`  the asyncio glue: accept, sessions, the simple and extended protocol.
- `proxy.demo`    the embedded demo: PostgreSQL, data, roles, analysts.
- `proxy.admin`   the `dpgate` command line (also `python -m proxy`).

tests/test_layers.py enforces this order.
"""
