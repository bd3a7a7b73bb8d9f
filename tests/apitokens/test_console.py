"""The console's API tokens page (WebTest): create, see once, list, revoke."""

from __future__ import annotations

import datetime as dt
import hashlib

from helpers.apitokens import bearer, make_token
from helpers.clients import logged_in, new_client, page_client
from helpers.confirm import confirm, confirmation_of
from helpers.notices import flashed
from sqlalchemy import select

from cmsshop.models import ApiToken
from cmsshop.services.apitokens.scopes import SCOPE_DESCRIPTIONS


def rows(dbsession) -> list[ApiToken]:
    dbsession.rollback()
    dbsession.expire_all()
    return list(dbsession.scalars(select(ApiToken).order_by(ApiToken.id)))


def new_token_form(admin_pages):
    page = admin_pages.get("/admin/api-tokens")
    assert "no-store" in page.headers["Cache-Control"]
    return page, page.forms["new-token-form"]


def tick(form, *scopes):
    for field in form.fields["scopes"]:
        field.checked = field._value in scopes


def test_the_page_offers_every_scope_with_its_description(admin_pages):
    page, form = new_token_form(admin_pages)
    assert page.html.find("h1").get_text(strip=True) == "API tokens"
    assert [field._value for field in form.fields["scopes"]] == list(SCOPE_DESCRIPTIONS)
    text = page.html.get_text(" ", strip=True)
    for description in SCOPE_DESCRIPTIONS.values():
        assert description in text
    assert "No API token yet." in text


def test_create_shows_the_token_once_and_it_works(admin_pages, app, dbsession):
    _, form = new_token_form(admin_pages)
    form["name"] = "Bookkeeping"
    tick(form, "orders", "read")
    expires = (dt.datetime.now(dt.UTC) + dt.timedelta(days=40)).date()
    form["expires"] = expires.isoformat()
    created = form.submit(status=200)
    assert created.headers["Cache-Control"] == "private, no-store"
    value = created.html.find(id="new-token")["value"]
    assert value.startswith("cms_") and len(value) == 47
    assert "will not be shown again" in created.text
    (row,) = rows(dbsession)
    assert row.name == "Bookkeeping" and row.scopes == ["orders", "read"]
    assert row.token_hash == hashlib.sha256(value.encode()).hexdigest()
    assert row.expires_at == dt.datetime.combine(expires, dt.time(), tzinfo=dt.UTC)

    new_client(app).get("/api/admin/legal", headers=bearer(value), status=200)

    listing = admin_pages.get("/admin/api-tokens")
    assert value not in listing.text
    assert row.prefix in listing.text and "Bookkeeping" in listing.text
    assert "127.0.0.1" in listing.text  # its last use
    # Nothing shows the token again, wherever one looks.
    assert value not in admin_pages.get("/admin/api-tokens").text


def test_a_refused_form_keeps_what_was_typed_and_creates_nothing(admin_pages, dbsession):
    _, form = new_token_form(admin_pages)
    form["name"] = "Half done"
    tick(form)
    form["expires"] = "2020-01-01"
    refused = form.submit(status=422)
    errors = refused.html.select(".error")
    assert len(errors) >= 2, refused.text[:2000]
    assert refused.forms["new-token-form"]["name"].value == "Half done"
    assert rows(dbsession) == []
    form = refused.forms["new-token-form"]
    form["name"] = ""
    tick(form, "catalogue")
    form["expires"] = "not a date"
    again = form.submit(status=422)
    assert again.forms["new-token-form"].get("scopes", index=1).checked
    assert rows(dbsession) == []


def test_a_forged_scope_is_refused(admin_pages, dbsession):
    page = admin_pages.get("/admin/api-tokens")
    token = page.forms["new-token-form"]["csrf_token"].value
    admin_pages.post(
        "/admin/api-tokens",
        {"csrf_token": token, "name": "x", "scopes": "root"},
        status=422,
    )
    assert rows(dbsession) == []


def test_revoke_asks_first_then_revokes(admin_pages, admin, app, dbsession):
    token, value = make_token(dbsession, admin, ["read"], name="Old sync")
    page = admin_pages.get("/admin/api-tokens")
    revoke_form = page.forms[f"revoke-{token.id}"]
    asked = revoke_form.submit()
    assert "Revoke the API token Old sync?" in confirmation_of(asked)
    assert rows(dbsession)[0].revoked_at is None
    done = confirm(asked)
    assert done.headers["Location"].endswith("/admin/api-tokens")
    assert flashed(done) == "api_token_revoked"
    assert rows(dbsession)[0].revoked_at is not None
    new_client(app).get("/api/admin/legal", headers=bearer(value), status=401)
    listing = done.follow()
    assert "Revoked" in listing.text and f"revoke-{token.id}" not in listing.forms
    # Revoking again (a second tab) changes nothing.
    again = admin_pages.post(
        f"/admin/api-tokens/{token.id}/revoke",
        {"csrf_token": revoke_form["csrf_token"].value, "confirm": "1"},
        status=303,
    )
    assert flashed(again) == "api_token_already_revoked"


def test_revoke_needs_the_csrf_token_and_a_known_id(admin_pages, admin, dbsession):
    token, _ = make_token(dbsession, admin, ["read"])
    admin_pages.post(f"/admin/api-tokens/{token.id}/revoke", {"confirm": "1"}, status=403)
    assert rows(dbsession)[0].revoked_at is None
    csrf = admin_pages.get("/admin/api-tokens").forms["new-token-form"]["csrf_token"].value
    admin_pages.post("/admin/api-tokens/999999/revoke", {"csrf_token": csrf}, status=404)
    admin_pages.post("/admin/api-tokens/abc/revoke", {"csrf_token": csrf}, status=404)


def test_the_page_is_for_admins(app, customer):
    logged_in(app, customer).get("/admin/api-tokens", status=403)
    assert "/login" in page_client(app).get("/admin/api-tokens", status=303).headers["Location"]
