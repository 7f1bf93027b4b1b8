"""TLS: SSLRequest upgrades the connection when a certificate is configured; psql and
psycopg connect with sslmode=require and verify-full, SCRAM-SHA-256-PLUS binds the
channel (tls-server-end-point), and passwords are refused over plain TCP."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import os
import ssl
import struct
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import scramp
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID

from proxy.pgwire import wire
from proxy.pgwire.tls import server_end_point
from tests.conftest import DemoDatabase
from tests.proxies import (
    PASSWORD,
    USER,
    OwnProxy,
    connect_raw,
    errors,
    read_until_closed,
    scram,
    send_startup,
    start_own_proxy,
)

pytestmark = pytest.mark.end_to_end


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the root a client trusts (sslrootcert)
    cert: Path
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_certificates(directory: Path, kind: str = "rsa-sha256") -> Certificates:
    """A CA and a server certificate for localhost and 127.0.0.1 signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    if kind == "ecdsa-sha384":
        ca_key, key, digest = ec.generate_private_key(ec.SECP384R1()), \
            ec.generate_private_key(ec.SECP384R1()), hashes.SHA384()
    elif kind == "ed25519":
        ca_key, key, digest = ed25519.Ed25519PrivateKey.generate(), \
            ed25519.Ed25519PrivateKey.generate(), None
    else:
        ca_key, key, digest = rsa.generate_private_key(65537, 2048), \
            rsa.generate_private_key(65537, 2048), hashes.SHA256()
    ca = (x509.CertificateBuilder().subject_name(_name("dpgate test CA"))
          .issuer_name(_name("dpgate test CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, digest))
    server = (x509.CertificateBuilder().subject_name(_name("localhost"))
              .issuer_name(ca.subject).public_key(key.public_key())
              .serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(days=1))
              .not_valid_after(now + datetime.timedelta(days=30))
              .add_extension(x509.SubjectAlternativeName([
                  x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                  critical=False)
              .sign(ca_key, digest))
    paths = Certificates(directory / "ca.pem", directory / "server.pem", directory / "key.pem")
    paths.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths.cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    paths.key.chmod(0o600)
    return paths


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture(scope="module")
def tls_proxy(demo_database: DemoDatabase, certificates: Certificates,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnProxy]:
    """TLS configured; require_tls_for_password left at its default (true)."""
    running = start_own_proxy(tmp_path_factory.mktemp("tls"), demo_database,
                              tls_cert=str(certificates.cert), tls_key=str(certificates.key))
    yield running
    running.stop()


def _tls_dsn(proxy: OwnProxy, certificates: Certificates, **options: str) -> str:
    return proxy.dsn(sslrootcert=str(certificates.ca), **options).replace(
        "@127.0.0.1:", "@localhost:")


@pytest.mark.parametrize("sslmode", ["require", "verify-full"])
@pytest.mark.parametrize("channel_binding", ["prefer", "require", "disable"])
def test_psycopg_connects_over_tls(tls_proxy: OwnProxy, certificates: Certificates,
                                   sslmode: str, channel_binding: str):
    dsn = _tls_dsn(tls_proxy, certificates, sslmode=sslmode, channel_binding=channel_binding)
    with psycopg.connect(dsn, autocommit=True) as connection:
        assert connection.pgconn.ssl_in_use
        assert connection.execute("SELECT count(*) FROM products").fetchone() == (1000,)


@pytest.mark.parametrize("channel_binding", ["prefer", "require"])
def test_psql_connects_with_verify_full(tls_proxy: OwnProxy, certificates: Certificates,
                                        channel_binding: str):
    dsn = _tls_dsn(tls_proxy, certificates, sslmode="verify-full",
                   channel_binding=channel_binding)
    result = subprocess.run(["psql", dsn, "-X", "-c", r"\conninfo", "-c", "SELECT 41 + 1"],
                            check=False, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PGCONNECT_TIMEOUT": "10"})
    assert result.returncode == 0, result.stderr
    assert "SSL connection" in result.stdout and "42" in result.stdout


def test_verify_full_rejects_a_name_the_certificate_does_not_carry(
        tls_proxy: OwnProxy, certificates: Certificates):
    dsn = _tls_dsn(tls_proxy, certificates, sslmode="verify-full").replace(
        "@localhost:", "@elsewhere.invalid:") + "&hostaddr=127.0.0.1"
    with pytest.raises(psycopg.OperationalError, match="does not match host name"):
        psycopg.connect(dsn)


def test_password_over_plain_tcp_is_refused(tls_proxy: OwnProxy):
    with pytest.raises(psycopg.OperationalError, match="unencrypted connection is refused"):
        psycopg.connect(tls_proxy.dsn(sslmode="disable"))


def test_unencrypted_bytes_after_ssl_request_are_refused(tls_proxy: OwnProxy):
    with connect_raw(tls_proxy.port) as sock:
        sock.sendall(struct.pack("!ii", 8, wire.SSL_REQUEST) + b"injected startup")
        (error,) = errors(read_until_closed(sock))
    assert (error["C"], error["M"]) == ("08P01", "received unencrypted data after SSL request")


def _tls_socket(proxy: OwnProxy, certificates: Certificates) -> ssl.SSLSocket:
    sock = connect_raw(proxy.port)
    sock.sendall(struct.pack("!ii", 8, wire.SSL_REQUEST))
    assert sock.recv(1) == b"S"
    context = ssl.create_default_context(cafile=str(certificates.ca))
    return context.wrap_socket(sock, server_hostname="localhost")


def test_tls_offers_plus_and_binds_the_certificate(tls_proxy: OwnProxy,
                                                   certificates: Certificates):
    with _tls_socket(tls_proxy, certificates) as sock:
        assert send_startup(sock) == ["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"]
        client = scramp.ScramClient(["SCRAM-SHA-256-PLUS"], USER, PASSWORD,
                                    channel_binding=("tls-server-end-point", sock))
        assert scram(sock, client, "SCRAM-SHA-256-PLUS")[-1] == (b"Z", b"I")


def test_binding_to_another_certificate_fails(tls_proxy: OwnProxy, certificates: Certificates):
    with _tls_socket(tls_proxy, certificates) as sock:
        send_startup(sock)
        client = scramp.ScramClient(["SCRAM-SHA-256-PLUS"], USER, PASSWORD,
                                    channel_binding=("tls-server-end-point", b"\0" * 32))
        (error,) = errors(scram(sock, client, "SCRAM-SHA-256-PLUS"))
    assert (error["C"], error["M"]) == ("08P01", "SCRAM channel binding check failed")


def test_the_y_flag_is_refused_when_plus_was_offered(tls_proxy: OwnProxy,
                                                     certificates: Certificates):
    # 'y' says "I can bind, but you cannot": the offer of PLUS was stripped on the way.
    with _tls_socket(tls_proxy, certificates) as sock:
        send_startup(sock)
        def client() -> scramp.ScramClient:
            return scramp.ScramClient(["SCRAM-SHA-256"], USER, PASSWORD,
                                      channel_binding=("tls-server-end-point", sock))

        assert client().get_client_first().startswith("y,,")
        (error,) = errors(scram(sock, client()))
    assert (error["C"], error["M"]) == ("28000", "SCRAM channel binding negotiation error")


def test_plus_is_refused_over_plain_tcp(demo_database: DemoDatabase, certificates: Certificates,
                                        tmp_path: Path):
    running = start_own_proxy(tmp_path, demo_database, tls_cert=str(certificates.cert),
                              tls_key=str(certificates.key), require_tls_for_password=False)
    try:
        with psycopg.connect(running.dsn(sslmode="disable")) as connection:
            assert not connection.pgconn.ssl_in_use
            assert connection.execute("SELECT 1").fetchone() == (1,)
        with connect_raw(running.port) as sock:
            assert send_startup(sock) == ["SCRAM-SHA-256"]
            client = scramp.ScramClient(["SCRAM-SHA-256-PLUS"], USER, PASSWORD,
                                        channel_binding=("tls-server-end-point", b"\0" * 32))
            (error,) = errors(scram(sock, client, "SCRAM-SHA-256-PLUS"))
        assert error["C"] == "08P01"
    finally:
        running.stop()


def test_channel_binding_with_a_sha384_certificate(demo_database: DemoDatabase, tmp_path: Path):
    # RFC 5929: the certificate's own signature hash when it is stronger than SHA-256;
    # libpq computes the same on its side, so a wrong choice fails channel_binding=require.
    certificates = make_certificates(tmp_path, "ecdsa-sha384")
    running = start_own_proxy(tmp_path, demo_database, tls_cert=str(certificates.cert),
                              tls_key=str(certificates.key))
    try:
        dsn = _tls_dsn(running, certificates, sslmode="verify-full", channel_binding="require")
        with psycopg.connect(dsn) as connection:
            assert connection.execute("SELECT 1").fetchone() == (1,)
    finally:
        running.stop()


@pytest.mark.unit
@pytest.mark.parametrize(("kind", "expected"), [
    ("rsa-sha256", "sha256"), ("ecdsa-sha384", "sha384"), ("ed25519", None)])
def test_server_end_point_hash(tmp_path: Path, kind: str, expected: str | None):
    certificates = make_certificates(tmp_path, kind)
    pem = certificates.cert.read_text()
    if expected is None:  # no hash in the signature: PLUS is not offered at all
        assert server_end_point(pem) is None
    else:
        der = ssl.PEM_cert_to_DER_cert(pem)
        assert server_end_point(pem + certificates.ca.read_text()) == \
            hashlib.new(expected, der).digest()


def test_without_a_certificate_ssl_is_declined(demo_database: DemoDatabase, tmp_path: Path):
    running = start_own_proxy(tmp_path, demo_database)
    try:
        with psycopg.connect(running.dsn(sslmode="prefer")) as connection:
            assert not connection.pgconn.ssl_in_use
        with pytest.raises(psycopg.OperationalError, match="does not support SSL"):
            psycopg.connect(running.dsn(sslmode="require"))
    finally:
        running.stop()


