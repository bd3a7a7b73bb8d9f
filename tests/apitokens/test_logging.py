"""An API token never reaches a log line: not from the header, not from a query string
it was (wrongly) pasted into, not from an error message."""

from __future__ import annotations

import logging

from helpers.apitokens import bearer, make_token
from helpers.clients import new_client

from cmsshop.logs import redact


def logged(caplog) -> str:
    return "\n".join(record.getMessage() for record in caplog.records)


def test_a_token_in_the_header_or_the_query_string_is_not_logged(app, admin, dbsession, caplog):
    caplog.set_level(logging.DEBUG)
    _, value = make_token(dbsession, admin, ["read"])
    client = new_client(app)
    client.get("/api/admin/legal", headers=bearer(value), status=200)
    client.get(f"/api/admin/legal?token={value}", status=401)
    client.get(f"/api/admin/legal?access={value}&page=2", status=401)
    client.get(f"/api/store/products?{value}", expect_errors=True)
    client.get(f"/api/nowhere/{value}", expect_errors=True)
    client.get("/api/admin/legal", headers={"Authorization": f"Basic {value}"}, status=401)
    text = logged(caplog)
    assert "/api/admin/legal" in text, "the request log wrote nothing to check"
    assert value not in text
    assert value[4:] not in text


def test_a_revoked_token_sent_again_is_not_logged(app, admin, dbsession, caplog):
    caplog.set_level(logging.DEBUG)
    token, value = make_token(dbsession, admin, ["read"])
    admin_token = new_client(app)
    token.revoked_at = token.created_at
    dbsession.commit()
    admin_token.get("/api/admin/legal", headers=bearer(value), status=401)
    assert value not in logged(caplog)


def test_whatever_prints_a_token_or_an_authorization_value_is_redacted(caplog):
    caplog.set_level(logging.INFO)
    value = "cms_" + "Ab1-_" * 8 + "xyz"
    log = logging.getLogger("cmsshop.somewhere")
    log.info("headers %s", {"Authorization": f"Bearer {value}", "Accept": "*/*"})
    log.info("calling with %s", value)
    log.warning("HTTP_AUTHORIZATION=Basic dXNlcjpwYXNzd29yZA==")
    log.warning("Authorization: Bearer some-other-secret")
    text = logged(caplog)
    assert value not in text
    assert "dXNlcjpwYXNzd29yZA" not in text and "some-other-secret" not in text
    assert "'Accept': '*/*'" in text


def test_ordinary_text_is_left_alone():
    for text in (
        "The Authorization header is not 'Bearer <token>'.",
        "GET /api/admin/legal 200",
        "cms_short stays",
    ):
        assert redact(text) == text
