"""The PostgreSQL v3 wire protocol, both sides: message encoding and decoding (`wire`),
the startup handshake (`startup`), TLS (`tls`), SCRAM-SHA-256(-PLUS) (`auth`), the
client's stream with its idle timeout (`client_stream`), batched writes (`outbox`) and a
small protocol-level client for the backend PostgreSQL (`backend`).

May import: the standard library and third-party libraries only, nothing else of dpgate
(the ledger's verifiers are described by a Protocol in `auth`).
"""
