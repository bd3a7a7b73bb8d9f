"""The development PKI of the wallet provider's simulate-payment: a root, a TLS
certificate for localhost and a signing certificate, and a loopback https server for
the signing chain. Development only: imported lazily by simulate-payment, never by
what production imports."""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
import threading

import certifi
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import rsa

from cmsshop.services.payments.base import (
    NotConfigured,
)
from cmsshop.services.payments.walletprovider.certificates import parse_allowed
from cmsshop.services.payments.walletprovider.config import DEFAULT_CERT_SUBJECTS

DEV_CERT_VALIDITY = dt.timedelta(days=365)


def loopback_cert_host(cert_hosts: list[str]) -> tuple[str, int]:
    for host, port in parse_allowed(cert_hosts):
        if host in ("localhost", "127.0.0.1") and port != 443:
            return host, port
    raise NotConfigured(
        "certHosts has no loopback entry such as localhost:6546 for the development "
        "certificate server (development.ini has one)"
    )


class DevelopmentPKI:
    """Development root, TLS and signing certificates, created once in ``directory``."""

    def __init__(self, directory: str, ca_bundle: str):
        from cryptography.hazmat.primitives import serialization

        self._serialization = serialization
        self.directory = directory
        self.ca_bundle = ca_bundle
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self.root_key = self._key("dev-root.key")
        self.root = self._cert("dev-root.pem", self._make_root)
        self.tls_key = self._key("dev-tls.key")
        self.tls_chain_file = os.path.join(directory, "dev-tls.pem")
        self._cert(
            "dev-tls.pem",
            lambda: self._make_leaf(self.tls_key, [x509.DNSName("localhost")], ips=True),
        )
        self.signing_key = self._key("dev-signing.key")
        self.signing = self._cert(
            "dev-signing.pem",
            lambda: self._make_leaf(self.signing_key, [x509.DNSName(DEFAULT_CERT_SUBJECTS[0])]),
        )
        self.signing_chain = self.signing.public_bytes(serialization.Encoding.PEM)
        root_pem = self.root.public_bytes(serialization.Encoding.PEM)
        with open(certifi.where(), "rb") as fh:
            bundle = root_pem + b"\n" + fh.read()
        current = b""
        if os.path.exists(ca_bundle):
            with open(ca_bundle, "rb") as fh:
                current = fh.read()
        if current != bundle:
            with open(ca_bundle, "wb") as fh:
                fh.write(bundle)

    def _key(self, name: str) -> rsa.RSAPrivateKey:
        path = os.path.join(self.directory, name)
        ser = self._serialization
        if os.path.exists(path):
            with open(path, "rb") as fh:
                key = ser.load_pem_private_key(fh.read(), password=None)
            if isinstance(key, rsa.RSAPrivateKey):
                return key
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(
                key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption())
            )
        return key

    def _cert(self, name: str, make) -> x509.Certificate:
        """The certificate in ``name``, made anew when missing, expiring within a day,
        or no longer issued by the current root (the root was re-made)."""
        path = os.path.join(self.directory, name)
        now = dt.datetime.now(dt.UTC)
        if os.path.exists(path):
            with open(path, "rb") as fh:
                cert = x509.load_pem_x509_certificates(fh.read())[0]
            fresh = cert.not_valid_after_utc - now > dt.timedelta(days=1)
            root = getattr(self, "root", None)
            same_root = root is None or cert.issuer == root.subject and _signed_by(cert, root)
            if fresh and same_root:
                return cert
        cert = make()
        chain = [cert] if cert.issuer == cert.subject else [cert, self.root]
        with open(path, "wb") as fh:
            fh.write(b"".join(c.public_bytes(self._serialization.Encoding.PEM) for c in chain))
        return cert

    def _name(self, common_name: str) -> x509.Name:
        from cryptography.x509.oid import NameOID

        return x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cmsshop development"),
                x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            ]
        )

    def _make_root(self) -> x509.Certificate:
        now = dt.datetime.now(dt.UTC)
        key = self.root_key
        return (
            x509.CertificateBuilder()
            .subject_name(self._name("cmsshop development root (never trust in production)"))
            .issuer_name(self._name("cmsshop development root (never trust in production)"))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + 5 * DEV_CERT_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )

    def _make_leaf(self, key, names: list, ips: bool = False) -> x509.Certificate:
        from cryptography.x509.oid import ExtendedKeyUsageOID

        now = dt.datetime.now(dt.UTC)
        alt = list(names) + ([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))] if ips else [])
        return (
            x509.CertificateBuilder()
            .subject_name(self._name(names[0].value))
            .issuer_name(self.root.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + DEV_CERT_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.root_key.public_key()),
                critical=False,
            )
            .sign(self.root_key, hashes.SHA256())
        )


def _signed_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


# The certificate servers this process runs, by port: the sandbox page's button signs
# in the app's own process, again and again, so a port is bound once and its server
# reused (a second bind would fail while the first server still runs).
_SERVERS: dict[int, tuple[str, object]] = {}
_SERVERS_LOCK = threading.Lock()


def serve_development_certificate(pki: DevelopmentPKI, host: str, port: int) -> str:
    """Serve the signing chain over https on loopback from a daemon thread of this
    process (it ends with the process: the simulate-payment command, or the development
    server whose sandbox page simulated a payment); return its cert URL.

    A port already served by this process serves the chain too. A port another process
    holds is used when it already serves this chain: the development server, after its
    sandbox page's button, serves the same PKI that simulate-payment loads."""
    digest = hashlib.sha256(pki.signing_chain).hexdigest()[:16]
    path = f"/v1/notifications/certs/CERT-dev-{digest}"
    url = f"https://{host}:{port}{path}"
    with _SERVERS_LOCK:
        served = _SERVERS.get(port)
        if served is not None and served[0] == pki.tls_chain_file:
            served[1].chains[path] = pki.signing_chain
            return url
        if served is not None:  # another PKI's TLS certificate: start afresh
            served[1].shutdown()
            served[1].server_close()
            del _SERVERS[port]
        try:
            server = _start_server(pki, port)
        except OSError as exc:
            if _serves(url, pki):
                return url
            raise NotConfigured(
                f"cannot serve the development certificate on port {port}: {exc}"
            ) from exc
        server.chains[path] = pki.signing_chain
        _SERVERS[port] = (pki.tls_chain_file, server)
    return url


def _start_server(pki: DevelopmentPKI, port: int):
    import ssl
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            chain = self.server.chains.get(self.path)
            data = chain if chain is not None else b"not found"
            self.send_response(200 if chain is not None else 404)
            self.send_header("Content-Type", "application/x-pem-file")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.chains = {}
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.tls_chain_file, os.path.join(pki.directory, "dev-tls.key"))
    server.socket = context.wrap_socket(
        server.socket, server_side=True, do_handshake_on_connect=False
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _serves(url: str, pki: DevelopmentPKI) -> bool:
    """Whether ``url`` already answers this PKI's signing chain (over TLS it trusts)."""
    import requests

    try:
        response = requests.get(url, verify=pki.ca_bundle, timeout=5)
    except requests.RequestException:
        return False
    return response.status_code == 200 and response.content == pki.signing_chain
