"""The asyncio glue: accepting clients, cancel requests, shutdown and each session's
message loop (`server`); a client's login, from its startup message through SCRAM and
admission to its open session (`login`); one session per client, which owns its protocol
Phase, answers the simple query protocol and holds the relay connection (`session`); the
one relay routine, which sends relayed statements and passes PostgreSQL's answers on in
the relay connection's callback (`relay`); the extended protocol, Parse/Bind/Describe/
Execute/Close/Sync/Flush (`extended`), and the session's prepared statements and portals
(`prepared`); the client transport's callback, which calls the relay routine for cached
relayed statements without waking the session's task (`fast_relay`); the event loop
(`event_loop`) and how late it runs (`loop_watch`), and the load balancer's health
endpoint (`health`).

A private COUNT: server (login, then its message loop) → session (Engine.plan, then
`match` on the plan kind) → proxy.engine.dispatch (Engine.answer) → back to session,
which sends the rows. A relayed statement: server → session → relay (or fast_relay →
relay, once its text is cached).

May import: `proxy.engine`, `proxy.pgwire`, `proxy.config`, rewriter/, accounting/,
mechanisms/. Never `proxy.demo` or `proxy.admin`.
"""
