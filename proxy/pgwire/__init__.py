"""The PostgreSQL v3 wire protocol, both sides: message encoding and decoding (`wire`)
and its codes as enums (`codes`), every error a client is sent, statement, fatal or the
console's, with one `to_response` (`errors`), the startup handshake (`startup`), TLS (`tls`),
SCRAM-SHA-256(-PLUS) (`auth`), the client's stream with its idle timeout
(`client_stream`) and the hook that may take its bytes first (`hooked`), batched writes
(`outbox`), a small protocol-level client for the backend PostgreSQL (`backend`) with its
login (`backend_login`), and the statement a CancelRequest cancels (`running`).

May import: the standard library, third-party libraries and, of dpgate, only the leaf
module `rewriter.sqlstate` (the SQLSTATEs). The ledger's verifiers are described by a
Protocol in `auth`, so the ledger is not imported.
"""
