"""The proxy's login to PostgreSQL (proxy/pgwire/backend_login.py): each password answer
checked against what PostgreSQL computes, SCRAM-SHA-256 against scramp's server side."""

from __future__ import annotations

import hashlib
import struct

import pytest
import scramp

from proxy.pgwire import wire
from proxy.pgwire.backend_login import (
    PasswordExchange,
    UnsupportedAuthentication,
    startup_message,
)
from proxy.pgwire.codes import AuthRequest, Frontend

pytestmark = pytest.mark.unit


def request(code: AuthRequest | int, data: bytes = b"") -> bytes:
    return struct.pack("!i", code) + data


def body(message: bytes) -> bytes:
    assert message[:1] == Frontend.PASSWORD
    (length,) = struct.unpack_from("!i", message, 1)
    assert length == len(message) - 1
    return message[5:]


def test_the_startup_message_is_protocol_3_with_its_parameters():
    message = startup_message({"user": "ann", "database": "shop"})
    (length, version) = struct.unpack_from("!ii", message)
    assert length == len(message) and version == wire.PROTOCOL_3_0
    assert message[8:] == b"user\0ann\0database\0shop\0\0"


def test_cleartext_and_md5_answers_are_postgresqls():
    exchange = PasswordExchange("ann", "s3cret")
    assert body(exchange.answer(request(AuthRequest.CLEARTEXT_PASSWORD))) == b"s3cret\0"
    salt = b"\x01\x02\x03\x04"
    inner = hashlib.md5(b"s3cretann").hexdigest().encode()
    expected = b"md5" + hashlib.md5(inner + salt).hexdigest().encode() + b"\0"
    assert body(exchange.answer(request(AuthRequest.MD5_PASSWORD, salt))) == expected
    assert exchange.answer(request(AuthRequest.OK)) is None


def scram_until_final(password: str) -> tuple[PasswordExchange, scramp.ScramServer, str]:
    """A SCRAM-SHA-256 login with `password` to a server that knows "s3cret", up to the
    client's final message (its proof)."""
    mechanism = scramp.ScramMechanism("SCRAM-SHA-256")
    stored = mechanism.make_auth_info("s3cret", iteration_count=4096)
    server = mechanism.make_server(lambda user: stored)
    exchange = PasswordExchange("ann", password)
    first = body(exchange.answer(request(AuthRequest.SASL, b"SCRAM-SHA-256\0\0")))
    name, rest = first.split(b"\0", 1)
    assert name == b"SCRAM-SHA-256"
    (size,) = struct.unpack_from("!i", rest)
    server.set_client_first(rest[4:4 + size].decode())
    final = exchange.answer(request(AuthRequest.SASL_CONTINUE,
                                    server.get_server_first().encode()))
    return exchange, server, body(final).decode()


def test_scram_sha_256_completes_against_a_server_that_knows_the_password():
    exchange, server, final = scram_until_final("s3cret")
    server.set_client_final(final)  # raises if the proof is wrong
    assert exchange.answer(request(AuthRequest.SASL_FINAL,
                                   server.get_server_final().encode())) is None


def test_a_wrong_password_fails_the_servers_check():
    _, server, final = scram_until_final("wrong")
    with pytest.raises(scramp.ScramException):
        server.set_client_final(final)


@pytest.mark.parametrize("code", [7, AuthRequest.SASL_CONTINUE, AuthRequest.SASL_FINAL])
def test_a_method_or_step_it_cannot_answer_is_refused(code):
    """GSSAPI (7), or a SCRAM step before SCRAM began."""
    with pytest.raises(UnsupportedAuthentication, match=f"authentication {int(code)}"):
        PasswordExchange("ann", "s3cret").answer(request(code, b"x"))
