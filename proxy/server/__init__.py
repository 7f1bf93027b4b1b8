"""The asyncio glue: accepting clients, cancel requests and shutdown (`server`), one
session per client with the simple query protocol and the relay connection (`session`),
the extended protocol, Parse/Bind/Describe/Execute/Close/Sync/Flush (`extended`), and the
session's prepared statements and portals (`prepared`), plain relayed traffic handled in
the transports' callbacks (`fast_relay`), the event loop (`event_loop`) and how late it
runs (`loop_watch`), and the load balancer's health endpoint (`health`). Statements
dpgate answers itself go to `proxy.engine.dispatch`; relayed ones travel as the client's
own messages.

May import: `proxy.engine`, `proxy.pgwire`, `proxy.config`, rewriter/, accounting/,
mechanisms/. Never `proxy.demo` or `proxy.admin`.
"""
