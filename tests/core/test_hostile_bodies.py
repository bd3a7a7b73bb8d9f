"""Body limits and slow clients."""

from __future__ import annotations

import configparser
import io
import json
import os
import re
import socket
import time
import urllib.parse

import pytest
from helpers.app import ROOT, serve
from webob import Request

INIS = ("development.ini", "production.ini")


class ExplodingBody(io.RawIOBase):
    """A body that fails the test if anyone reads it."""

    def readinto(self, buffer):
        raise AssertionError("the body was read")


def post_unread(app, path: str, content_type: str, length: int, **environ):
    """POST declaring ``length`` bytes, straight to the WSGI app (WebTest would set the
    Content-Length from the body it sends)."""
    request = Request.blank(path, method="POST")
    request.environ.update(
        {
            "CONTENT_TYPE": content_type,
            "CONTENT_LENGTH": str(length),
            "wsgi.input": ExplodingBody(),
            "REMOTE_ADDR": "127.0.0.1",
            **environ,
        }
    )
    return request.get_response(app)


def read_ini(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(os.path.join(ROOT, name))
    return parser


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/api/auth/login", "application/json"),
        ("/api/auth/register", "application/json"),
        ("/api/license/activate", "application/json"),
        ("/api/store/checkout", "application/json"),
        ("/api/nope", "application/json"),
        ("/api/auth/login", "text/plain"),
    ],
)
def test_declared_50_mb_body_is_413_json_before_reading(app, path, content_type):
    # ExplodingBody fails the test if a single byte is read.
    response = post_unread(app, path, content_type, 50 * 1024 * 1024)
    assert response.status_int == 413
    assert response.content_type == "application/json"
    assert response.json["code"] == "payload_too_large"


def test_an_admins_uploads_have_their_own_larger_limit(app, admin_app):
    # An admin's release upload may be larger than a JSON body, up to max_upload_bytes.
    path, content_type = "/api/admin/products/x/releases", "multipart/form-data; boundary=b"
    cookie = f"cmsshop_session={admin_app.cookies['cmsshop_session']}"
    response = post_unread(app, path, content_type, 600 * 1024 * 1024, HTTP_COOKIE=cookie)
    assert response.status_int == 413
    assert response.json["code"] == "payload_too_large"
    assert "536870912" in response.json["message"]


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/api/admin/products/x/releases", 401, "not_authenticated"),
        ("/admin/products/x/releases", 401, None),
    ],
)
def test_an_anonymous_upload_is_401_before_its_body_is_read(app, path, status, code):
    response = post_unread(app, path, "multipart/form-data; boundary=b", 100 * 1024 * 1024)
    assert response.status_int == status
    if code:
        assert response.json["code"] == code
    else:
        assert response.content_type == "text/html"


def test_a_customers_upload_is_403_before_its_body_is_read(app, customer_app):
    cookie = f"cmsshop_session={customer_app.cookies['cmsshop_session']}"
    path, content_type = "/api/admin/products/x/releases", "multipart/form-data; boundary=b"
    response = post_unread(app, path, content_type, 100 * 1024 * 1024, HTTP_COOKIE=cookie)
    assert response.status_int == 403
    assert response.json["code"] == "forbidden"


def test_a_chunked_body_is_held_to_the_limit_by_the_app_too(app):
    # For servers that pass a chunked body through (wsgi.input_terminated, no length).
    body = io.BytesIO(b"x" * (5 * 1024 * 1024))
    request = Request.blank("/api/auth/login", method="POST")
    request.environ.update(
        {
            "CONTENT_TYPE": "application/json",
            "wsgi.input": body,
            "wsgi.input_terminated": True,
            "REMOTE_ADDR": "127.0.0.1",
        }
    )
    request.environ.pop("CONTENT_LENGTH", None)
    response = request.get_response(app)
    assert response.status_int == 413
    assert response.json["code"] == "payload_too_large"
    assert body.tell() <= 1024 * 1024 + 1


@pytest.mark.parametrize("name", INIS)
def test_waitress_body_limit_is_the_upload_limit(name):
    ini = read_ini(name)
    server, app = ini["server:main"], ini["app:main"]
    assert int(server["max_request_body_size"]) == int(app["cmsshop.max_upload_bytes"])
    assert int(app["cmsshop.max_body_bytes"]) < int(app["cmsshop.max_upload_bytes"])


@pytest.mark.parametrize("name", INIS)
def test_slow_clients_are_bounded(name):
    server = read_ini(name)["server:main"]
    assert 0 < int(server["channel_timeout"]) <= 120
    assert 0 < int(server["connection_limit"]) <= 1000


def test_both_inis_agree_on_limits():
    dev, prod = (read_ini(name) for name in INIS)
    for key in ("max_request_body_size", "channel_timeout", "connection_limit"):
        assert dev["server:main"][key] == prod["server:main"][key]
    for key in ("cmsshop.max_body_bytes", "cmsshop.max_upload_bytes"):
        assert dev["app:main"][key] == prod["app:main"][key]


def send_headers_only(base_url: str, path: str, content_type: str, length: int, extra=""):
    """Send a request's headers declaring ``length`` body bytes, and none of the body;
    return the raw answer and the seconds it took."""
    parts = urllib.parse.urlsplit(base_url)
    started = time.perf_counter()
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(
            (
                f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {length}\r\n{extra}\r\n"
            ).encode()
        )
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    return answer, time.perf_counter() - started


@pytest.mark.parametrize(
    ("path", "content_type", "length"),
    [
        ("/api/auth/login", "application/json", 50 * 1024 * 1024),
        ("/api/license/activate", "application/json", 2 * 1024 * 1024),
        ("/api/nope", "text/plain", 50 * 1024 * 1024),
        ("/api/admin/products/x/releases", "multipart/form-data; boundary=b", 600 * 1024 * 1024),
    ],
)
def test_real_server_refuses_a_declared_body_over_the_limit_without_reading_it(
    app, admin_app, path, content_type, length
):
    # The admin's session cookie: only an admin's upload may be larger than a JSON body.
    cookie = f"Cookie: cmsshop_session={admin_app.cookies['cmsshop_session']}\r\n"
    with serve(app) as url:
        answer, seconds = send_headers_only(url, path, content_type, length, cookie)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"application/json" in head.lower()
    assert b"x-content-type-options: nosniff" in head.lower()
    assert b'"code": "payload_too_large"' in body
    # Answered from the headers alone: not a byte of the body was sent.
    assert seconds < 2, seconds


def test_real_server_still_takes_bodies_within_the_limit(app):
    import http.client

    with serve(app) as url:
        conn = http.client.HTTPConnection(urllib.parse.urlsplit(url).netloc, timeout=10)
        conn.request(
            "POST", "/api/auth/login", body=b"{}", headers={"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        response.read()
        conn.close()
    # Through to the app: CSRF refuses it (403), not the body limit.
    assert response.status == 403


@pytest.mark.parametrize("name", INIS)
def test_the_inis_serve_with_the_limiting_server(name):
    from paste.deploy import loadserver

    assert read_ini(name)["server:main"]["use"] == "call:cmsshop.server:server_factory"
    assert callable(loadserver(f"config:{os.path.join(ROOT, name)}"))


def test_a_wrapped_app_gets_waitress_limit_for_every_body(app):
    from cmsshop.server import app_limits

    assert app_limits(app) == (1024 * 1024, app.registry.settings["cmsshop.max_upload_bytes"])

    def wrapped(environ, start_response):  # e.g. a paste filter around the app
        return app(environ, start_response)

    assert app_limits(wrapped, 4096) == (4096, 4096)


# --- bodies streamed to the real server ------------------------------------------------
#
# The server must stop reading a body as soon as it passes the route's limit, and must not
# read an upload's body at all unless the headers carry an admin's session. Loopback socket
# buffers hold megabytes, so the client sends in paced chunks and watches for the answer
# between them: an answer that comes while most of the body is unsent was given early.

MIB = 1024 * 1024
UPLOAD_PATH = "/api/admin/products/x/releases"


def spooled_bytes(folder: str) -> int:
    """Bytes of the temporary files this process holds open in ``folder`` (waitress
    spools a body past ``inbuf_overflow`` to an unlinked temporary file)."""
    total = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(folder):
                total += os.stat(f"/proc/self/fd/{fd}").st_size
        except OSError:
            continue
    return total


class SpoolWatch:
    """Samples :func:`spooled_bytes` in a thread; ``peak`` is the largest seen."""

    def __init__(self, folder: str):
        import threading

        self.folder, self.peak, self.running = folder, 0, True
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while self.running:
            self.peak = max(self.peak, spooled_bytes(self.folder))
            time.sleep(0.002)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


def stream_body(base_url, path, headers: dict, total: int, chunked: bool = False):
    """POST ``total`` body bytes in paced 64 KiB pieces (chunked transfer coding if
    ``chunked``), reading the answer as soon as it comes. Returns (status line, answer
    body, body bytes sent when the answer began)."""
    import select

    parts = urllib.parse.urlsplit(base_url)
    lines = [f"POST {path} HTTP/1.1", f"Host: {parts.netloc}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}")
    piece = b"x" * 65536
    answer, sent, sent_at_answer = b"", 0, None
    with socket.create_connection((parts.hostname, parts.port), timeout=20) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        try:
            while sent < total:
                readable, _, _ = select.select([sock], [], [], 0.003)
                if readable:
                    break
                data = piece[: total - sent]
                framed = b"%x\r\n%s\r\n" % (len(data), data) if chunked else data
                sock.sendall(framed)
                sent += len(data)
            else:
                if chunked:
                    sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed: read what it said
        sent_at_answer = sent
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            length = re.search(rb"(?i)content-length: *(\d+)", head)
            if length and len(body) >= int(length.group(1)):
                break
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body, sent_at_answer


@pytest.fixture
def spool_dir(tmp_path, monkeypatch):
    """A temporary-file folder of its own, so the test sees only its server's spool."""
    import tempfile

    folder = tmp_path / "spool"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return str(folder)


def test_a_chunked_body_over_the_limit_is_413_before_it_ends(live_server, spool_dir):
    with SpoolWatch(spool_dir) as watch:
        status, body, sent = stream_body(
            live_server,
            "/api/auth/login",
            {"Content-Type": "application/json"},
            5 * MIB,
            chunked=True,
        )
    assert status.startswith("HTTP/1.1 413"), (status, body[:200])
    assert json.loads(body)["code"] == "payload_too_large"
    assert sent < 4 * MIB, sent
    # Never more spooled than the route's own limit (and its framing).
    assert watch.peak <= 1.1 * MIB, watch.peak


def test_a_multipart_body_to_a_json_route_has_the_json_limit(live_server, spool_dir):
    with SpoolWatch(spool_dir) as watch:
        status, body, sent = stream_body(
            live_server,
            "/api/auth/login",
            {"Content-Type": "multipart/form-data; boundary=b"},
            50 * MIB,
        )
    assert status.startswith("HTTP/1.1 413"), (status, body[:200])
    assert json.loads(body)["code"] == "payload_too_large"
    assert sent < 4 * MIB, sent
    assert watch.peak == 0, watch.peak


@pytest.mark.parametrize(
    ("path", "status_line", "content_type"),
    [
        (UPLOAD_PATH, "HTTP/1.1 401", "application/json"),
        ("/admin/products/x/releases", "HTTP/1.1 401", "text/html"),
    ],
)
def test_an_anonymous_upload_is_refused_unread(
    live_server, spool_dir, path, status_line, content_type
):
    with SpoolWatch(spool_dir) as watch:
        status, body, sent = stream_body(
            live_server,
            path,
            {"Content-Type": "multipart/form-data; boundary=b", "X-CSRF-Token": "x"},
            100 * MIB,
        )
    assert status.startswith(status_line), (status, body[:200])
    assert sent < 8 * MIB, sent
    assert watch.peak == 0, watch.peak
    if content_type == "application/json":
        assert json.loads(body)["code"] == "not_authenticated"


def test_a_customer_upload_is_refused_unread(live_server, spool_dir, customer_app):
    cookie = customer_app.cookies["cmsshop_session"]
    with SpoolWatch(spool_dir) as watch:
        status, body, sent = stream_body(
            live_server,
            UPLOAD_PATH,
            {
                "Content-Type": "multipart/form-data; boundary=b",
                "Cookie": f"cmsshop_session={cookie}",
                "X-CSRF-Token": customer_app.csrf_token,
            },
            100 * MIB,
            chunked=True,
        )
    assert status.startswith("HTTP/1.1 403"), (status, body[:200])
    assert json.loads(body)["code"] == "forbidden"
    assert sent < 8 * MIB, sent
    assert watch.peak == 0, watch.peak


def test_an_admin_uploads_past_the_json_limit_over_the_real_server(
    live_server, admin_app, dbsession
):
    import http.client

    from helpers.store import add_currencies, add_product

    add_currencies(dbsession)
    add_product(dbsession, "site-guard")
    boundary = "b0undary"
    content = os.urandom(3 * MIB)
    raw = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="version"\r\n\r\n1.0\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.zip"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    cookie = admin_app.cookies["cmsshop_session"]
    headers = {
        "Content-Type": f"multipart/form-data; boundary={boundary}",
        "Cookie": f"cmsshop_session={cookie}",
        "X-CSRF-Token": admin_app.csrf_token,
    }
    netloc = urllib.parse.urlsplit(live_server).netloc
    for version, chunked in (("1.0", False), ("1.1", True)):
        conn = http.client.HTTPConnection(netloc, timeout=20)
        body = raw.replace(b"\r\n1.0\r\n", f"\r\n{version}\r\n".encode())
        conn.request(
            "POST",
            "/api/admin/products/site-guard/releases",
            body=iter([body]) if chunked else body,
            headers=headers,
            encode_chunked=chunked,
        )
        response = conn.getresponse()
        answer = json.loads(response.read())
        conn.close()
        assert response.status == 201, answer
        assert (answer["version"], answer["size"]) == (version, len(content))
