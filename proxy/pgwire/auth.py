"""SCRAM-SHA-256 (and SCRAM-SHA-256-PLUS over TLS) authentication of analysts against
stored verifiers (the ledger's, passed in through `lookup`)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
import struct
from collections.abc import Callable
from typing import NamedTuple, Protocol, TypeVar

import scramp

from rewriter.sqlstate import SqlState

from . import wire
from .codes import AuthRequest, Frontend
from .errors import FatalError

MECHANISM = "SCRAM-SHA-256"
MECHANISM_PLUS = "SCRAM-SHA-256-PLUS"
CHANNEL_BINDING = "tls-server-end-point"
ITERATIONS = 4096
_SCRAM = scramp.ScramMechanism(MECHANISM)


class AuthenticationFailed(Exception):
    pass


class Verifier(Protocol):
    """What SCRAM needs to check a password (the ledger's ScramVerifier is one); declared
    here so that the protocol layer does not import the ledger."""

    @property
    def salt(self) -> bytes: ...
    @property
    def stored_key(self) -> bytes: ...
    @property
    def server_key(self) -> bytes: ...
    @property
    def iterations(self) -> int: ...


class Account(Protocol):
    """Whoever logs in: anything with a stored verifier (the ledger's Analyst)."""

    @property
    def verifier(self) -> Verifier: ...


AccountT = TypeVar("AccountT", bound=Account)


class ScramKeys(NamedTuple):
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def scram_keys(password: str) -> ScramKeys:
    """Derive the stored SCRAM keys; the password itself is never kept."""
    salt, stored_key, server_key, iterations = _SCRAM.make_auth_info(
        password, iteration_count=ITERATIONS
    )
    return ScramKeys(salt, stored_key, server_key, iterations)


def _decoy_verifier() -> Verifier:
    # An unknown user goes through the same exchange and fails at the same step, so the
    # reply does not tell which analyst names exist.
    return scram_keys(secrets.token_hex(16))


class ScramExchange:
    """The server side of SCRAM-SHA-256 and SCRAM-SHA-256-PLUS (RFC 5802, RFC 7677) against
    a stored verifier.

    Written out rather than delegated because PostgreSQL clients send an empty SCRAM user
    name (the user comes from the startup packet), which scramp's server rejects.
    `end_point` is the tls-server-end-point data when PLUS was offered (the client is on
    TLS), None when it was not; `mechanism` is the one the client chose.
    """

    def __init__(self, verifier: Verifier, mechanism: str = MECHANISM,
                 end_point: bytes | None = None):
        self.verifier = verifier
        self.plus = mechanism == MECHANISM_PLUS
        self.end_point = end_point
        self.nonce = ""
        self.auth_prefix = ""
        self.binding = b""  # what the client's c= attribute must carry, base64-decoded

    def server_first(self, client_first: str) -> str:
        flag, _, rest = client_first.partition(",")
        authzid, _, bare = rest.partition(",")
        self._check_binding_flag(flag)
        client_nonce = _attributes(bare).get("r", "")
        if not client_nonce:
            raise _malformed("the client nonce is missing")
        gs2_header = f"{flag},{authzid},".encode()
        self.binding = gs2_header + (self.end_point or b"") if self.plus else gs2_header
        self.nonce = client_nonce + base64.b64encode(secrets.token_bytes(18)).decode()
        salt = base64.b64encode(self.verifier.salt).decode()
        first = f"r={self.nonce},s={salt},i={self.verifier.iterations}"
        self.auth_prefix = f"{bare},{first}"
        return first

    def _check_binding_flag(self, flag: str) -> None:
        # The checks of PostgreSQL's read_client_first_message, with its messages.
        if flag.startswith("p="):
            if not self.plus:
                raise _malformed("The client selected SCRAM-SHA-256 without channel binding, "
                                 "but the SCRAM message includes channel binding data.")
            if flag != f"p={CHANNEL_BINDING}":
                raise FatalError(SqlState.PROTOCOL_VIOLATION,
                                 f"unsupported SCRAM channel-binding type \"{flag[2:]}\"")
        elif flag in ("n", "y"):
            if self.plus:
                raise _malformed("The client selected SCRAM-SHA-256-PLUS, but the SCRAM "
                                 "message does not include channel binding data.")
            # 'y': the client can bind but believes we cannot. We offered PLUS, so someone
            # removed it from the offer on the way: refuse the downgrade (RFC 5802 §6).
            if flag == "y" and self.end_point is not None:
                raise FatalError(
                    SqlState.INVALID_AUTHORIZATION, "SCRAM channel binding negotiation error",
                    hint="The client supports SCRAM channel binding but thinks the server "
                         "does not.  However, this server does support channel binding.")
        else:
            raise _malformed(f"unexpected channel-binding flag \"{flag[:8]}\"")

    def server_final(self, client_final: str) -> str:
        without_proof, _, proof = client_final.rpartition(",p=")
        attributes = _attributes(without_proof)
        if attributes.get("c") != base64.b64encode(self.binding).decode():
            raise FatalError(SqlState.PROTOCOL_VIOLATION, "SCRAM channel binding check failed")
        if attributes.get("r") != self.nonce:
            raise AuthenticationFailed("SCRAM nonce mismatch")
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


def _malformed(detail: str) -> FatalError:
    return FatalError(SqlState.PROTOCOL_VIOLATION, "malformed SCRAM message", hint=detail)


def _attributes(text: str) -> dict[str, str]:
    return {part[0]: part[2:] for part in text.split(",") if len(part) >= 2 and part[1] == "="}


async def authenticate(
    user: str,
    lookup: Callable[[str], AccountT | None],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    max_size: int,
    end_point: bytes | None = None,
) -> AccountT:
    """Run the SASL exchange; return the analyst or raise AuthenticationFailed.

    `end_point` is the tls-server-end-point data of a TLS connection: SCRAM-SHA-256-PLUS
    is then offered too. Malformed or refused exchanges raise FatalError.
    """
    analyst = await asyncio.to_thread(lookup, user)
    verifier = analyst.verifier if analyst else _decoy_verifier()
    offered = [MECHANISM_PLUS, MECHANISM] if end_point is not None else [MECHANISM]
    writer.write(wire.authentication_sasl(offered))
    await writer.drain()

    kind, payload = await wire.read_message(reader, max_size)
    if kind != Frontend.PASSWORD:
        raise wire.ProtocolError("expected SASLInitialResponse")
    mechanism, offset = wire.cstring(payload)
    if mechanism not in offered:
        raise FatalError(SqlState.PROTOCOL_VIOLATION,
                         "client selected an invalid SASL authentication mechanism")
    if len(payload) < offset + 4:
        raise wire.ProtocolError("invalid SASLInitialResponse")
    (length,) = struct.unpack_from("!i", payload, offset)
    if length != len(payload) - offset - 4:
        raise wire.ProtocolError("invalid SASLInitialResponse")
    exchange = ScramExchange(verifier, mechanism, end_point)
    client_first = payload[offset + 4:].decode("utf-8", "replace")
    writer.write(wire.authentication(AuthRequest.SASL_CONTINUE,
                                     exchange.server_first(client_first).encode()))
    await writer.drain()
    kind, payload = await wire.read_message(reader, max_size)
    if kind != Frontend.PASSWORD:
        raise wire.ProtocolError("expected SASLResponse")
    final = exchange.server_final(payload.decode("utf-8", "replace"))
    if analyst is None:
        raise AuthenticationFailed(user)
    writer.write(wire.authentication(AuthRequest.SASL_FINAL, final.encode()))
    writer.write(wire.authentication(AuthRequest.OK))
    return analyst
