"""The asyncio glue: accepting clients, cancel requests and shutdown (`server`), one
session per client running each statement per its plan (`session`) and the extended
protocol, Parse/Bind/Describe/Execute/Close/Sync/Flush (`extended`), and the load
balancer's health endpoint (`health`).

May import: `proxy.engine`, `proxy.pgwire`, `proxy.config`, rewriter/, accounting/,
mechanisms/. Never `proxy.demo` or `proxy.admin`.
"""
