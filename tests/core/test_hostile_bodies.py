"""Body limits and slow clients."""

from __future__ import annotations

import configparser
import io
import os
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


def post_unread(app, path: str, content_type: str, length: int):
    """POST declaring ``length`` bytes, straight to the WSGI app (WebTest would set the
    Content-Length from the body it sends)."""
    request = Request.blank(path, method="POST")
    request.environ.update(
        {
            "CONTENT_TYPE": content_type,
            "CONTENT_LENGTH": str(length),
            "wsgi.input": ExplodingBody(),
            "REMOTE_ADDR": "127.0.0.1",
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


def test_uploads_have_their_own_larger_limit(app):
    # Multipart (release uploads) may be larger than a JSON body, up to max_upload_bytes.
    path, content_type = "/api/admin/products/x/releases", "multipart/form-data; boundary=b"
    response = post_unread(app, path, content_type, 600 * 1024 * 1024)
    assert response.status_int == 413
    assert response.json["code"] == "payload_too_large"
    assert "536870912" in response.json["message"]


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


def send_headers_only(base_url: str, path: str, content_type: str, length: int):
    """Send a request's headers declaring ``length`` body bytes, and none of the body;
    return the raw answer and the seconds it took."""
    parts = urllib.parse.urlsplit(base_url)
    started = time.perf_counter()
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(
            (
                f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n"
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
    app, path, content_type, length
):
    with serve(app) as url:
        answer, seconds = send_headers_only(url, path, content_type, length)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"application/json" in head.lower()
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
