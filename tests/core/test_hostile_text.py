"""NUL bytes, lone surrogates, control characters and over-long digit
strings are refused at the edge (400/422 JSON), never a 500, whatever the route."""

from __future__ import annotations

import pytest

NUL_JSON = "a\\u0000b"  # JSON text that decodes to a NUL
SURROGATE_JSON = "a\\ud800b"  # JSON text that decodes to a lone surrogate


def raw_json(client, path: str, body: str, status):
    return client.post(
        path, body.encode(), headers={"Content-Type": "application/json"}, status=status
    )


def assert_json_error(response, status: int, code: str | None = None) -> None:
    assert response.status_int == status, response.body
    assert response.content_type == "application/json"
    if code:
        assert response.json["code"] == code, response.json
    assert response.json["supportCode"]


@pytest.mark.parametrize("bad", [NUL_JSON, SURROGATE_JSON])
@pytest.mark.parametrize("field", ["email", "password"])
def test_login_refuses_unstorable_text(testapp, customer, bad, field):
    values = {"email": "alice@example.com", "password": "correct horse battery"}
    values[field] = bad
    body = "{" + ", ".join(f'"{k}": "{v}"' for k, v in values.items()) + "}"
    response = raw_json(testapp, "/api/auth/login", body, 422)
    assert_json_error(response, 422, "validation_failed")
    assert field in response.json["errors"]


@pytest.mark.parametrize("bad", [NUL_JSON, SURROGATE_JSON])
def test_register_refuses_unstorable_text(testapp, bad):
    body = f'{{"email": "x@example.com", "password": "a long password", "name": "{bad}"}}'
    response = raw_json(testapp, "/api/auth/register", body, 422)
    assert_json_error(response, 422, "validation_failed")


@pytest.mark.parametrize("bad", [NUL_JSON, SURROGATE_JSON])
def test_license_key_with_nul_or_surrogate_is_refused(testapp, bad):
    body = f'{{"licenseKey": "{bad}", "domain": "example.com"}}'
    response = raw_json(testapp, "/api/license/activate", body, 422)
    assert_json_error(response, 422, "validation_failed")


@pytest.mark.parametrize("bad", [NUL_JSON, SURROGATE_JSON])
def test_checkout_product_slug_with_nul_or_surrogate_is_refused(customer_app, bad):
    body = f'{{"billing": {{"country": "US"}}, "items": [{{"product": "{bad}"}}]}}'
    response = raw_json(customer_app, "/api/store/checkout", body, 422)
    assert_json_error(response, 422, "validation_failed")


@pytest.mark.parametrize(
    "path",
    [
        "/api/store/products/%00x",
        "/api/docs/articles/a%00",
        "/api/admin/products/%0a",
        "/api/admin/articles/%00",
        "/api/admin/currencies/%00",
        "/api/downloads/tok%00en",
        "/api/admin/errors/CS-%00",
        "/api/store/checkout/sandbox/ORD-%00",
        "/api/admin/payment-events/%00",
        "/api/admin/tickets/1%00",
        "/api/nope/%1b[31m",
    ],
)
def test_control_characters_in_path_segments_are_400_at_the_edge(admin_app, path):
    # Refused before routing, for every route (and for paths no route matches), so no
    # view or database ever sees them.
    for method in (admin_app.get, admin_app.delete):
        response = method(path, status=400)
        assert response.content_type == "application/json"
        assert response.json["code"] == "malformed_request"
        assert response.json["supportCode"]


@pytest.mark.parametrize("query", ["status=%00", "status=paid%00", "page=1%00", "perPage=%1b"])
def test_control_characters_in_admin_filters_are_422(admin_app, query):
    name = query.split("=")[0]
    for path in ("/api/admin/payment-events", "/api/admin/tickets", "/api/admin/products"):
        response = admin_app.get(f"{path}?{query}", status=422)
        assert_json_error(response, 422, "validation_failed")
        assert name in response.json["errors"]


def test_control_characters_in_any_query_are_422_even_where_unread(testapp):
    for path in ("/api/openapi.json", "/api/health", "/api/auth/session", "/api/nope"):
        response = testapp.get(f"{path}?x%00=1&utm=%07", status=422)
        assert_json_error(response, 422, "validation_failed")


def test_query_strings_that_are_not_utf8_are_400(admin_app):
    for path in ("/api/admin/payment-events", "/api/admin/tickets", "/api/store/products"):
        response = admin_app.get(f"{path}?status=%ED%A0%80", status=400)
        assert response.json["code"] in ("malformed_request", "malformed_query")


@pytest.mark.parametrize(
    "path",
    [
        "/api/admin/payment-events/99999999999999999999",
        "/api/admin/payment-events/" + "9" * 5000,
        "/api/admin/tickets/" + "9" * 5000,
        "/api/dashboard/downloads/" + "9" * 5000 + "/license",
    ],
)
def test_over_long_ids_in_paths_are_not_500(admin_app, path):
    response = admin_app.get(path, expect_errors=True)
    assert response.status_int in (404, 405, 422), response.body
    assert response.content_type == "application/json"


@pytest.mark.parametrize("name", ["page", "perPage"])
def test_over_long_digit_strings_in_paging_are_422(admin_app, name):
    for path in ("/api/admin/payment-events", "/api/admin/products", "/api/store/products"):
        response = admin_app.get(f"{path}?{name}={'9' * 5000}", status=422)
        assert_json_error(response, 422, "validation_failed")


def test_over_long_integers_in_json_bodies_are_not_500(customer_app):
    body = '{"items": [{"product": "x"}], "currency": ' + "9" * 5000 + "}"
    response = raw_json(customer_app, "/api/store/checkout", body, "*")
    assert response.status_int in (400, 422), response.body
    assert response.content_type == "application/json"


@pytest.mark.parametrize("value", ["a\x00b", "a\nb", "x\x1b[2J"])
def test_control_characters_in_headers_are_400(testapp, value):
    for path in ("/api/auth/session", "/api/store/products", "/api/openapi.json"):
        response = testapp.get(path, headers={"X-Anything": value}, status=400)
        assert_json_error(response, 400, "malformed_request")


@pytest.mark.parametrize("value", ["a\x00b", "x\x1b[2J"])
def test_control_characters_in_form_bodies_are_422(testapp, value):
    # Licensing takes url-encoded forms too; their fields go through StrictString.
    body = {"licenseKey": value, "domain": "example.com"}
    response = testapp.post("/api/license/activate", body, status=422, expect_errors=True)
    assert_json_error(response, 422, "validation_failed")


def test_ordinary_text_still_passes(testapp, customer):
    body = '{"email": "alice@example.com", "password": "correct horse battery"}'
    assert raw_json(testapp, "/api/auth/login", body, 200).json["user"]
    testapp.get("/api/store/products?x=caf%C3%A9%09tab", status=200)
