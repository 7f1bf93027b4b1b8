"""The demo: an embedded PostgreSQL (`demo`), its generated data (`demo_data`) and policy
(`demo_policy.toml`), the backend roles dpgate_reader and dpgate_relay (`roles`), and
creating analysts with their SCRAM verifier and secret shift (`analysts`).

May import: `proxy.pgwire`, `proxy.config`, accounting/, mechanisms/. Never
`proxy.engine`, `proxy.server` or `proxy.admin`.
"""
