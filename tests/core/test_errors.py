"""Every error under /api is the JSON error body; 5xx are recorded with a support code."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from cmsshop.config import configure
from cmsshop.models import ErrorRecord

SUPPORT_CODE = re.compile(r"^CS-[0-9A-Z]{4}-[0-9A-Z]{4}$")


def assert_error_body(response, status: int, code: str):
    assert response.status_int == status, response.text
    assert response.content_type == "application/json"
    body = response.json
    assert set(body) >= {"code", "title", "message", "hints", "supportCode"}
    assert body["code"] == code
    assert isinstance(body["hints"], list)
    assert SUPPORT_CODE.match(body["supportCode"])
    assert "Traceback" not in response.text and "<html" not in response.text.lower()
    return body


def test_unknown_route_is_json_404(testapp):
    assert_error_body(testapp.get("/api/no/such/route", status=404), 404, "not_found")


def test_unknown_path_outside_api_is_an_html_page(testapp):
    """Outside /api live the web pages: their errors are pages (tests/test_pages_core)."""
    response = testapp.get("/favicon.ico", status=404)
    assert response.content_type == "text/html"
    assert "Not found" in response.html.title.text


def test_wrong_method_is_405_with_allow(testapp):
    response = testapp.delete("/api/auth/session", status=405)
    assert_error_body(response, 405, "method_not_allowed")
    assert response.headers["Allow"] == "GET"


def test_malformed_json_is_400(testapp):
    response = testapp.post(
        "/api/auth/login", b'{"email": "a@b.c", "pass', status=400, content_type="application/json"
    )
    assert_error_body(response, 400, "malformed_json")


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b"[1, 2", b"\xff\xfe{}", b'{"email": NaN}', b"nul", b'{"a": "\xc3"}'],
)
def test_truncated_and_non_utf8_json_is_400(testapp, raw):
    response = testapp.post("/api/auth/login", raw, status=400, content_type="application/json")
    assert_error_body(response, 400, "malformed_json")


def test_wrong_content_type_is_415(testapp):
    response = testapp.post(
        "/api/auth/login",
        "email=a&password=b",
        status=415,
        content_type="application/x-www-form-urlencoded",
    )
    assert_error_body(response, 415, "unsupported_media_type")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"email": 5, "password": "x"}, "email"),
        ({"email": "a@b.c"}, "password"),
        ({"email": "a@b.c", "password": ["x"]}, "password"),
        ({"email": "a@b.c", "password": "x", "admin": True}, "body"),
    ],
)
def test_wrong_types_missing_and_unknown_fields_are_422(testapp, body, field):
    response = testapp.post_json("/api/auth/login", body, status=422)
    error = assert_error_body(response, 422, "validation_failed")
    assert field in error["errors"], error


def test_body_not_an_object_is_422(testapp):
    response = testapp.post_json("/api/auth/login", ["email", "password"], status=422)
    assert assert_error_body(response, 422, "validation_failed")["errors"]


def test_huge_body_is_413(make_app):
    from helpers.clients import new_client

    client = new_client(make_app(**{"cmsshop.max_body_bytes": "1024"}))
    client.refresh_csrf()
    response = client.post(
        "/api/auth/login", b"{" + b" " * 5000 + b"}", status=413, content_type="application/json"
    )
    assert_error_body(response, 413, "payload_too_large")


def test_huge_chunked_body_without_length_is_413(make_app):
    import io

    from webob import Request

    app = make_app(**{"cmsshop.max_body_bytes": "1024"})
    request = Request.blank("/api/auth/login", method="POST")
    request.content_type = "application/json"
    request.body_file_raw = io.BytesIO(b'{"email": "' + b"a" * 5000 + b'"}')
    request.environ.pop("CONTENT_LENGTH", None)
    request.environ["wsgi.input_terminated"] = True
    request.environ["REMOTE_ADDR"] = "127.0.0.1"
    # Anonymous CSRF: give the request a cookie and its matching token.
    from helpers.clients import new_client

    client = new_client(app)
    token = client.refresh_csrf()
    request.headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    request.headers["X-CSRF-Token"] = token
    response = request.get_response(app)
    assert response.status_int == 413
    assert response.json["code"] == "payload_too_large"


def test_not_logged_in_is_401(testapp):
    response = testapp.get("/api/admin/errors/CS-AAAA-BBBB", status=401)
    assert_error_body(response, 401, "not_authenticated")


def test_customer_on_admin_route_is_403(customer_app):
    response = customer_app.get("/api/admin/errors/CS-AAAA-BBBB", status=403)
    assert_error_body(response, 403, "forbidden")


@pytest.mark.parametrize("token", [None, "", "stale-or-forged"])
def test_missing_or_wrong_csrf_token_is_403(customer_app, token):
    headers = {} if token is None else {"X-CSRF-Token": token}
    customer_app.csrf_token = None
    response = customer_app.post_json("/api/auth/logout", {}, headers=headers, status=403)
    assert_error_body(response, 403, "csrf_failed")
    # Still logged in: the rejected request changed nothing.
    assert customer_app.get("/api/auth/session").json["user"] is not None


def test_csrf_token_of_another_session_is_403(customer_app, other_customer_app):
    response = customer_app.post_json(
        "/api/auth/logout",
        {},
        headers={"X-CSRF-Token": other_customer_app.csrf_token},
        status=403,
    )
    assert_error_body(response, 403, "csrf_failed")


def test_csrf_token_is_stale_after_login(testapp, customer):
    anonymous_token = testapp.csrf_token
    testapp.post_json(
        "/api/auth/login", {"email": customer.email, "password": "correct horse battery"}
    )
    response = testapp.post_json(
        "/api/auth/logout", {}, headers={"X-CSRF-Token": anonymous_token}, status=403
    )
    assert_error_body(response, 403, "csrf_failed")


def _app_with_boom_route(settings, exc):
    config = configure(dict(settings))

    def boom(request):
        request.db.execute(select(1))
        raise exc

    config.add_route("test.boom", "/api/test/boom")
    config.add_view(boom, route_name="test.boom", require_csrf=False)
    return config.make_wsgi_app()


def test_unexpected_error_is_generic_500_and_recorded(settings, dbsession, admin_app):
    from helpers.clients import new_client

    client = new_client(_app_with_boom_route(settings, RuntimeError("secret internals")))
    response = client.get("/api/test/boom", status=500, headers={"X-Request-ID": "req-42"})
    body = assert_error_body(response, 500, "internal_error")
    assert "secret internals" not in response.text
    assert response.headers["X-Request-ID"] == "req-42"
    record = dbsession.scalar(
        select(ErrorRecord).where(ErrorRecord.support_code == body["supportCode"])
    )
    assert record is not None
    assert record.status == 500 and record.method == "GET" and record.path == "/api/test/boom"
    assert record.exception_type == "builtins.RuntimeError"
    assert "secret internals" in record.traceback
    assert record.request_id == "req-42"
    assert record.created_at is not None
    # Admins can read it back by support code; 4xx are not recorded.
    lookup = admin_app.get(f"/api/admin/errors/{body['supportCode']}").json
    assert lookup["status"] == 500 and "RuntimeError" in lookup["traceback"]
    missing = admin_app.get("/api/admin/errors/CS-0000-0000", status=404)
    assert_error_body(missing, 404, "support_code_not_found")


def test_error_record_survives_request_rollback(settings, dbsession):
    """The request's own writes roll back; the 5xx record (own transaction) stays."""
    from helpers.clients import new_client

    from cmsshop.models import Currency

    config = configure(dict(settings))

    def write_then_fail(request):
        request.db.add(Currency(code="XTS", name="Test", symbol="T", decimals=2))
        request.db.flush()
        raise RuntimeError("after a write")

    config.add_route("test.boom", "/api/test/boom")
    config.add_view(write_then_fail, route_name="test.boom", require_csrf=False)
    client = new_client(config.make_wsgi_app())
    code = client.get("/api/test/boom", status=500).json["supportCode"]
    assert dbsession.get(Currency, "XTS") is None
    assert dbsession.scalar(select(ErrorRecord).where(ErrorRecord.support_code == code))


def test_database_down_is_503_json(make_app):
    from helpers.clients import new_client

    client = new_client(
        make_app(
            **{
                "cmsshop.database_url": "postgresql+psycopg://nobody@127.0.0.1:9/none?connect_timeout=2"
            }
        )
    )
    assert_error_body(client.get("/api/health", status=503), 503, "database_unavailable")
    response = client.get("/api/bootstrap", status=503)
    assert_error_body(response, 503, "database_unavailable")
    assert response.headers["Retry-After"]


def test_each_error_gets_a_fresh_support_code(testapp):
    codes = {testapp.get("/api/nope", status=404).json["supportCode"] for _ in range(5)}
    assert len(codes) == 5


@pytest.mark.parametrize(
    "path",
    ["/api/docs/articles/%ff%fe", "/api/%c3%28", "/api/dashboard/downloads/%80/license"],
)
def test_non_utf8_path_over_http_is_json(live_server, path):
    import http.client
    import json
    from urllib.parse import urlsplit

    parts = urlsplit(live_server)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    connection.request("GET", path)
    response = connection.getresponse()
    body = json.loads(response.read())
    assert response.status == 400 and body["code"] == "malformed_request"
    assert response.getheader("Content-Type").startswith("application/json")
