"""The proxy's own login to PostgreSQL: the startup message and the answers to
PostgreSQL's authentication requests (cleartext, MD5 or SCRAM-SHA-256), without I/O;
BackendConnection sends them and reads what comes back."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping

import scramp

from . import wire
from .codes import AuthRequest, Frontend


def startup_message(parameters: Mapping[str, str]) -> bytes:
    """The StartupMessage (protocol 3.0) with these parameters (user, database, …)."""
    body = struct.pack("!i", wire.PROTOCOL_3_0)
    body += b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in parameters.items())
    body += b"\0"
    return struct.pack("!i", len(body) + 4) + body


class UnsupportedAuthentication(Exception):
    """PostgreSQL asked for an authentication method dpgate does not speak."""


class PasswordExchange:
    """One login's answers to PostgreSQL's Authentication requests."""

    def __init__(self, user: str, password: str):
        self.user = user
        self.password = password
        self.scram: scramp.ScramClient | None = None

    def answer(self, payload: bytes) -> bytes | None:
        """The message answering one Authentication request (None: nothing to send);
        raises UnsupportedAuthentication for a method or step it cannot answer."""
        (code,) = struct.unpack_from("!i", payload)
        password = self.password.encode()
        if code == AuthRequest.OK:
            return None
        if code == AuthRequest.CLEARTEXT_PASSWORD:
            return wire.message(Frontend.PASSWORD, password + b"\0")
        if code == AuthRequest.MD5_PASSWORD:
            salt = payload[4:8]
            inner = hashlib.md5(password + self.user.encode()).hexdigest().encode()
            digest = b"md5" + hashlib.md5(inner + salt).hexdigest().encode()
            return wire.message(Frontend.PASSWORD, digest + b"\0")
        if code == AuthRequest.SASL:
            self.scram = scramp.ScramClient(["SCRAM-SHA-256"], self.user, self.password)
            first = self.scram.get_client_first().encode()
            return wire.message(
                Frontend.PASSWORD, b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first)
        if code == AuthRequest.SASL_CONTINUE and self.scram is not None:
            self.scram.set_server_first(payload[4:].decode())
            return wire.message(Frontend.PASSWORD, self.scram.get_client_final().encode())
        if code == AuthRequest.SASL_FINAL and self.scram is not None:
            self.scram.set_server_final(payload[4:].decode())
            return None
        raise UnsupportedAuthentication(f"unsupported backend authentication {code}")
