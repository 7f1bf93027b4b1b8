"""The answering engine: what a planned statement turns into. Releases with noise, key
selection and HAVING/ORDER BY/LIMIT after noise (`release`), exponential-mechanism answers
(`choices`), the plan cache (`plan_cache`), PostgreSQL's check of a rewritten plan before
the charge (`plan_check`), metrics and column names measured on the backend
(`knowledge`), the work limits of one statement (`limits`) and worker threads
(`workers`).

May import: `proxy.pgwire`, `proxy.config`, rewriter/, accounting/, mechanisms/. Never
`proxy.server`, `proxy.demo` or `proxy.admin`.
"""
