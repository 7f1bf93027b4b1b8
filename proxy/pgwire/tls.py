"""TLS for client connections: the server context and the tls-server-end-point channel
binding data of SCRAM-SHA-256-PLUS."""

from __future__ import annotations

import hashlib
import ssl
from dataclasses import dataclass
from pathlib import Path

from asn1crypto import x509

# libpq 17+ offers this ALPN protocol; a client offering another gets no ALPN answer.
ALPN = "postgresql"


@dataclass(frozen=True)
class ServerTls:
    context: ssl.SSLContext
    # tls-server-end-point data (RFC 5929) of our certificate; None if its signature
    # algorithm names no hash (Ed25519), in which case SCRAM-SHA-256-PLUS is not offered.
    end_point: bytes | None

    @classmethod
    def load(cls, cert_path: str, key_path: str) -> ServerTls:
        """Read the certificate chain and key once, at start; errors name the bad file."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2  # PostgreSQL's default minimum
        context.set_alpn_protocols([ALPN])
        try:
            context.load_cert_chain(cert_path, key_path)
            return cls(context, server_end_point(Path(cert_path).read_text()))
        except (OSError, ValueError) as error:
            raise ValueError(f"cannot use the TLS certificate {cert_path} with the key "
                             f"{key_path}: {error}") from None


def server_end_point(pem_chain: str) -> bytes | None:
    """RFC 5929 §4.1: the hash of the server (first) certificate's DER, with the hash of its
    signature algorithm, except that MD5 and SHA-1 become SHA-256."""
    der = ssl.PEM_cert_to_DER_cert(pem_chain[:pem_chain.index(_PEM_END) + len(_PEM_END)])
    certificate = x509.Certificate.load(der)
    # libpq takes the hash from OpenSSL's signature NID, which has none for Ed25519, Ed448
    # and RSASSA-PSS: with those it cannot bind, so we must not offer to.
    if certificate.signature_algo not in _HASHED_SIGNATURES:
        return None
    algorithm = certificate.hash_algo
    return hashlib.new("sha256" if algorithm in ("md5", "sha1") else algorithm, der).digest()


_PEM_END = "-----END CERTIFICATE-----"
_HASHED_SIGNATURES = ("rsassa_pkcs1v15", "ecdsa", "dsa")
