"""SCRAM-SHA-256 authentication of analysts against verifiers stored in the ledger."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
import struct
from collections.abc import Callable

import scramp

from accounting import Analyst, ScramVerifier

from . import wire

MECHANISM = "SCRAM-SHA-256"
ITERATIONS = 4096
_SCRAM = scramp.ScramMechanism(MECHANISM)


class AuthenticationFailed(Exception):
    pass


def make_verifier(password: str) -> ScramVerifier:
    """Derive the stored SCRAM verifier; the password itself is never kept."""
    salt, stored_key, server_key, iterations = _SCRAM.make_auth_info(
        password, iteration_count=ITERATIONS
    )
    return ScramVerifier(salt, stored_key, server_key, iterations)


def _decoy_verifier() -> ScramVerifier:
    # An unknown user goes through the same exchange and fails at the same step, so the
    # reply does not tell which analyst names exist.
    return make_verifier(secrets.token_hex(16))


class ScramExchange:
    """The server side of SCRAM-SHA-256 (RFC 5802, RFC 7677) against a stored verifier.

    Written out rather than delegated because PostgreSQL clients send an empty SCRAM user
    name (the user comes from the startup packet), which scramp's server rejects.
    """

    def __init__(self, verifier: ScramVerifier):
        self.verifier = verifier
        self.nonce = ""
        self.auth_prefix = ""
        self.gs2_header = ""

    def server_first(self, client_first: str) -> str:
        flag, _, rest = client_first.partition(",")
        authzid, _, bare = rest.partition(",")
        if flag not in ("n", "y") or not bare:
            raise AuthenticationFailed("unsupported SCRAM channel binding")
        client_nonce = _attributes(bare).get("r", "")
        if not client_nonce:
            raise AuthenticationFailed("SCRAM client nonce missing")
        self.gs2_header = f"{flag},{authzid},"
        self.nonce = client_nonce + base64.b64encode(secrets.token_bytes(18)).decode()
        salt = base64.b64encode(self.verifier.salt).decode()
        first = f"r={self.nonce},s={salt},i={self.verifier.iterations}"
        self.auth_prefix = f"{bare},{first}"
        return first

    def server_final(self, client_final: str) -> str:
        without_proof, _, proof = client_final.rpartition(",p=")
        attributes = _attributes(without_proof)
        binding = base64.b64encode(self.gs2_header.encode()).decode()
        if attributes.get("c") != binding or attributes.get("r") != self.nonce:
            raise AuthenticationFailed("SCRAM nonce or channel binding mismatch")
        message = f"{self.auth_prefix},{without_proof}".encode()
        signature = hmac.digest(self.verifier.stored_key, message, "sha256")
        try:
            client_proof = base64.b64decode(proof, validate=True)
        except ValueError:
            raise AuthenticationFailed("malformed SCRAM proof") from None
        if len(client_proof) != len(signature):
            raise AuthenticationFailed("malformed SCRAM proof")
        client_key = bytes(a ^ b for a, b in zip(client_proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), self.verifier.stored_key):
            raise AuthenticationFailed("wrong password")
        server_signature = hmac.digest(self.verifier.server_key, message, "sha256")
        return "v=" + base64.b64encode(server_signature).decode()


def _attributes(text: str) -> dict[str, str]:
    return {part[0]: part[2:] for part in text.split(",") if len(part) >= 2 and part[1] == "="}


async def authenticate(
    user: str,
    lookup: Callable[[str], Analyst | None],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    max_size: int,
) -> Analyst:
    """Run the SASL exchange; return the analyst or raise AuthenticationFailed."""
    analyst = await asyncio.to_thread(lookup, user)
    exchange = ScramExchange(analyst.verifier if analyst else _decoy_verifier())
    writer.write(wire.authentication_sasl([MECHANISM]))
    await writer.drain()

    kind, payload = await wire.read_message(reader, max_size)
    if kind != b"p":
        raise wire.ProtocolError("expected SASLInitialResponse")
    mechanism, offset = wire.cstring(payload)
    if mechanism != MECHANISM:
        raise AuthenticationFailed(f"unsupported SASL mechanism {mechanism}")
    (length,) = struct.unpack_from("!i", payload, offset)
    client_first = payload[offset + 4: offset + 4 + length].decode("utf-8", "replace")
    writer.write(wire.authentication(11, exchange.server_first(client_first).encode()))
    await writer.drain()
    kind, payload = await wire.read_message(reader, max_size)
    if kind != b"p":
        raise wire.ProtocolError("expected SASLResponse")
    final = exchange.server_final(payload.decode("utf-8", "replace"))
    if analyst is None:
        raise AuthenticationFailed(user)
    writer.write(wire.authentication(12, final.encode()))
    writer.write(wire.authentication(0))
    return analyst
