"""TLS with the standard library's `ssl`: the server's certificate and key from files, or a throwaway CA and a
server certificate made at start (trustme) and written to a directory the user can point a client at; the
client-certificate modes of Kafka's ssl.client.auth; the principal of a client certificate as Kafka's default
principal builder gives it ("User:" and the subject's distinguished name, most specific part first, RFC 2253)."""
from __future__ import annotations

import logging
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:                      # cryptography is imported when TLS is used, not with the server
    from cryptography import x509

log = logging.getLogger("tenure.security")
CLIENT_AUTH = ("none", "requested", "required")      # Kafka's ssl.client.auth values
CA_FILE, CA_KEY_FILE, CERT_FILE, KEY_FILE = "ca.pem", "ca-key.pem", "server.pem", "server-key.pem"


def pkcs8(key_pem: bytes) -> bytes:
    """A PEM private key as unencrypted PKCS#8 (what Java's PEM key stores read)."""
    from cryptography.hazmat.primitives import serialization
    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write(path: Path, data: bytes, private: bool = False) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


@dataclass
class ClientCert:
    """A client certificate issued by the server's generated CA: `cert_file` (certificate chain, PEM),
    `key_file` (PKCS#8 key, PEM), `keystore_file` (both in one file: Java's ssl.keystore.type=PEM)."""
    cert_file: str
    key_file: str
    keystore_file: str
    principal: str


class ServerTls:
    """The server's certificate and the CA clients trust (`ca_file`). `generated`: made at start by a throwaway CA
    (whose key stays in `directory`, so a restart on the same directory keeps it and `issue_client_cert` works);
    otherwise from the user's files (`cert_file`, `key_file`), `trust_file` being the CA that signs client
    certificates."""

    def __init__(self, cert_file: str, key_file: str | None, ca_file: str | None, trust_file: str | None,
                 directory: Path | None = None, ca=None) -> None:
        self.cert_file, self.key_file, self.ca_file, self.trust_file = cert_file, key_file, ca_file, trust_file
        self.directory, self._ca = directory, ca
        self.generated = ca is not None
        self._contexts: dict[str, ssl.SSLContext] = {}

    @classmethod
    def from_files(cls, cert_file: str, key_file: str | None, trust_file: str | None) -> ServerTls:
        """The user's certificate (and its chain) and key (None: in the certificate's file); `trust_file`: the CA
        of client certificates, which is also the CA clients are told to trust."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert_file, key_file)           # fails at start for a wrong file, not at a handshake
        return cls(cert_file, key_file, trust_file, trust_file)

    @classmethod
    def generate(cls, directory: str | None, hosts: list[str]) -> ServerTls:
        """A CA (kept from an earlier start in `directory` if one is there) and a server certificate for `hosts`
        (localhost and the loopback addresses always), written to `directory` (default: a new temporary one)."""
        import trustme
        d = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="tenure-tls-"))
        d.mkdir(parents=True, exist_ok=True)
        if (d / CA_FILE).is_file() and (d / CA_KEY_FILE).is_file():
            ca = trustme.CA.from_pem((d / CA_FILE).read_bytes(), (d / CA_KEY_FILE).read_bytes())
        else:
            ca = trustme.CA(organization_name="tenure", organization_unit_name="tenure test CA")
            _write(d / CA_KEY_FILE, pkcs8(ca.private_key_pem.bytes()), private=True)
            _write(d / CA_FILE, ca.cert_pem.bytes())
        names = list(dict.fromkeys(h for h in ["localhost", "127.0.0.1", "::1", *hosts] if h and h not in ("0.0.0.0", "::")))
        leaf = ca.issue_cert(*names, common_name=names[0], organization_name="tenure",
                             organization_unit_name="tenure server")
        _write(d / CERT_FILE, b"".join(b.bytes() for b in leaf.cert_chain_pems))
        _write(d / KEY_FILE, pkcs8(leaf.private_key_pem.bytes()), private=True)
        log.info("TLS: generated a server certificate for %s; clients trust %s", ", ".join(names), d / CA_FILE)
        return cls(str(d / CERT_FILE), str(d / KEY_FILE), str(d / CA_FILE), str(d / CA_FILE), d, ca)

    def context(self, client_auth: str = "none") -> ssl.SSLContext:
        """The server-side context of a listener: `client_auth` none (no certificate asked), requested (verified
        if given) or required (a handshake without one fails), as Kafka's ssl.client.auth."""
        if client_auth not in CLIENT_AUTH:
            raise ValueError(f"ssl client auth must be one of {CLIENT_AUTH}, not {client_auth!r}")
        ctx = self._contexts.get(client_auth)
        if ctx is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(self.cert_file, self.key_file)
            if client_auth != "none":
                if not self.trust_file:
                    raise ValueError("--ssl-client-auth needs the CA that signs client certificates (--ssl-ca-file)")
                ctx.load_verify_locations(self.trust_file)
                ctx.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
            self._contexts[client_auth] = ctx
        return ctx

    def issue_client_cert(self, common_name: str, directory: str | None = None, *,
                          organization_unit: str = "tenure client") -> ClientCert:
        """A client certificate for `common_name` signed by the generated CA, written to `directory` (default: the
        TLS directory's clients/ folder)."""
        if self._ca is None:
            raise RuntimeError("client certificates are issued by the CA tenure generates; this server uses the "
                               "certificate files it was given")
        leaf = self._ca.issue_cert(f"{common_name}.client.tenure", common_name=common_name,
                                   organization_name="tenure", organization_unit_name=organization_unit)
        assert self.directory is not None
        d = Path(directory) if directory else self.directory / "clients"
        d.mkdir(parents=True, exist_ok=True)
        chain = b"".join(b.bytes() for b in leaf.cert_chain_pems)
        key = pkcs8(leaf.private_key_pem.bytes())
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in common_name)
        cert_file, key_file, store = d / f"{safe}.pem", d / f"{safe}-key.pem", d / f"{safe}-keystore.pem"
        _write(cert_file, chain)
        _write(key_file, key, private=True)
        _write(store, key + chain, private=True)
        from cryptography import x509
        return ClientCert(str(cert_file), str(key_file), str(store),
                          principal_of_cert(x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes())))


def principal_of_cert(cert: x509.Certificate) -> str:
    """Kafka's default principal of a TLS client: "User:" + the subject's RFC 2253 name."""
    return "User:" + cert.subject.rfc4514_string()


def peer_principal(ssl_object) -> str | None:
    """The principal of a TLS connection's client certificate, or None when it sent none."""
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    from cryptography import x509
    return principal_of_cert(x509.load_der_x509_certificate(der))
