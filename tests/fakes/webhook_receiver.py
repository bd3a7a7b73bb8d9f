"""A webhook receiver on loopback: what a shop's integrator runs, verifying each delivery
with the stripe package's verifier, as our docs tell them to.

``WebhookReceiver`` answers each POST with the next of ``answers`` (the last one
repeats; 200 when none): ``Answer(status, body)``, ``Answer(sleep=s)`` (wait before
answering, past the sender's deadline), ``Answer(endless=True)`` (a 200 whose body
never ends; with ``drip=s``, one byte every s seconds), ``Answer(status=302,
location=...)``. ``received`` lists each request: the path, the raw body, its headers,
and which of ``secrets`` verified its signature. With ``tls``, it answers HTTPS and
notes the SNI names asked for. Written apart from production code: it must not share
the sender's bugs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import ipaddress
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import stripe
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SIGNATURE_HEADER = "Cmsshop-Signature"
TOLERANCE = 300


@dataclasses.dataclass
class Answer:
    status: int = 200
    body: bytes = b'{"ok":true}'
    sleep: float = 0.0
    endless: bool = False
    drip: float = 0.0  # seconds between the bytes of an endless body
    location: str | None = None


@dataclasses.dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    verified_with: list[str]

    @property
    def event(self) -> dict:
        return json.loads(self.body)


def make_certificate(folder, name: str) -> tuple[str, str]:
    """A self-signed certificate for ``name`` (its own trust anchor): (cert, key) paths."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / f"{name}.pem", folder / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


class WebhookReceiver:
    def __init__(self, host: str = "127.0.0.1", tls: tuple[str, str] | None = None):
        """``tls``: (certificate, key) files to answer HTTPS with."""
        self.host = host
        self.tls = tls
        self.server_names: list[str | None] = []
        self.answers: list[Answer] = []
        self.secrets: list[str] = []
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._answered = 0
        self._server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def url(self, path: str = "/hook", host: str | None = None) -> str:
        scheme = "https" if self.tls else "http"
        host = host or self.host
        if ":" in host and ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
        return f"{scheme}://{host}:{self.port}{path}"

    def verify(self, body: bytes, header: str | None) -> list[str]:
        verified = []
        for secret in self.secrets:
            try:
                stripe.WebhookSignature.verify_header(body, header, secret, TOLERANCE)
            except stripe.SignatureVerificationError:
                continue
            verified.append(secret)
        return verified

    def next_answer(self) -> Answer:
        with self._lock:
            index = self._answered
            self._answered += 1
        if not self.answers:
            return Answer()
        return self.answers[min(index, len(self.answers) - 1)]

    def _handler(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 - the http.server hook
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                headers = {name: value for name, value in self.headers.items()}
                with receiver._lock:
                    receiver.received.append(
                        Received(
                            self.path,
                            headers,
                            body,
                            receiver.verify(body, self.headers.get(SIGNATURE_HEADER)),
                        )
                    )
                answer = receiver.next_answer()
                if answer.sleep:
                    time.sleep(answer.sleep)
                self.send_response(answer.status)
                if answer.location:
                    self.send_header("Location", answer.location)
                self.send_header("Content-Type", "application/json")
                if answer.endless:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    chunk = b"x" if answer.drip else b"x" * 65536
                    try:
                        while True:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                            self.wfile.flush()
                            time.sleep(answer.drip)
                    except OSError:
                        pass  # the sender stopped reading and hung up, as it should
                    self.close_connection = True
                    return
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(answer.body)

            def log_message(self, format, *args):
                pass

        return Handler

    def start(self) -> WebhookReceiver:
        self._server = ThreadingHTTPServer((self.host, 0), self._handler())
        self._server.daemon_threads = True
        if self.tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            context.sni_callback = lambda sock, name, ctx: self.server_names.append(name)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@pytest.fixture
def webhook_receiver():
    """A receiver on loopback for the test, stopped after it."""
    receiver = WebhookReceiver().start()
    yield receiver
    receiver.stop()
