"""Connecting a payment provider from the console (/admin/payments): the connect forms
(save, keep on empty, remove, refusals that change nothing, CSRF), Test connection
against the fake Stripe and PayPal APIs (ok, bad key, down, timeout), the webhook URL
and events to register, seller-facing names, and secrets never shown back or logged."""

from __future__ import annotations

import json
import logging
import re

import pytest
from fakes.paypal import CLIENT_SECRET
from fakes.stripe_api import API_KEY, PREVIOUS_SECRET, SECRET, closed_port_url
from helpers.app import PASSWORD, serve
from helpers.browser import check_page
from helpers.clients import logged_in, new_client
from helpers.notices import flashed, wait_for_notice
from sqlalchemy import select

from cmsshop.db import own_transaction
from cmsshop.models import PaymentSetting
from cmsshop.services.payments import settings as ps
from cmsshop.services.payments.connect import paypal_mode
from cmsshop.services.payments.registry import REGISTRY_KEY

NEW_KEY = "sk_test_new_key_0123456789wxyz"
NEW_WHSEC = "whsec_new_signing_0123456789qrst"
PAYPAL_SECRET = "EPaypalClientSecret0123456789mnop"
ALL_SECRETS = (API_KEY, SECRET, PREVIOUS_SECRET, NEW_KEY, NEW_WHSEC, PAYPAL_SECRET, CLIENT_SECRET)


def connect_form(page, provider: str = "cardprovider"):
    return next(f for f in page.forms.values() if f.action.endswith(f"/connect/{provider}"))


def check_form(page, provider: str = "cardprovider"):
    return next(f for f in page.forms.values() if f.action.endswith(f"/test/{provider}"))


def section(page, provider: str = "cardprovider"):
    return page.html.find("section", attrs={"aria-labelledby": f"provider-{provider}"})


def assert_no_secret(text: str) -> None:
    for secret in ALL_SECRETS:
        assert secret not in text


def saved(app, provider: str = "cardprovider") -> dict:
    """The admin-saved values, decrypted (what the webhook and checkout code read)."""
    registered = app.registry[REGISTRY_KEY]
    with own_transaction(app.registry) as session:
        return ps.saved_values(session, app.registry.settings, registered.get(provider))


def rows(dbsession) -> list[PaymentSetting]:
    dbsession.commit()
    return list(dbsession.scalars(select(PaymentSetting).order_by(PaymentSetting.field)))


# --- the page -------------------------------------------------------------------------------


def test_page_speaks_the_sellers_language(card_admin_pages, card_app):
    page = card_admin_pages.get("/admin/payments")
    headings = [h.get_text(strip=True) for h in page.html.find_all("h2")]
    assert headings == ["Card payments (Stripe)", "PayPal"]
    main = page.html.find("main").get_text(" ")
    for internal in ("cardprovider", "walletprovider", "webhookSecrets", "apiKey", "clientSecret"):
        assert internal not in main
    assert "Secret key" in main and "Webhook signing secrets" in main and "Client ID" in main
    assert_no_secret(page.text)
    # The webhook URL in a readonly input (selectable without JavaScript), a copy button
    # the script shows, and the events the webhook code acts on.
    base = card_app.registry.settings["cmsshop.base_url"].rstrip("/")
    url = page.html.find("input", id="webhook-url-cardprovider")
    assert url.has_attr("readonly") and url["value"] == f"{base}/api/webhooks/cardprovider"
    assert page.html.find("input", id="webhook-url-walletprovider")["value"].endswith(
        "/api/webhooks/walletprovider"
    )
    assert page.html.find("button", attrs={"data-copy-target": "webhook-url-cardprovider"})
    assert page.html.find("script", src=re.compile(r"copy-button\.js"))
    events = [c.get_text() for c in section(page).select("ul.webhook-events code")]
    assert "checkout.session.completed" in events and "charge.refunded" in events
    paypal_events = [c.get_text() for c in section(page, "walletprovider").select("ul code")]
    assert "PAYMENT.CAPTURE.COMPLETED" in paypal_events
    # Secret inputs are password inputs and never filled in.
    key = page.html.find("input", id="connect-cardprovider-apiKey")
    assert key["type"] == "password" and "value" not in key.attrs
    assert card_admin_pages.get("/static/copy-button.js").status_int == 200


# --- saving ---------------------------------------------------------------------------------


def test_save_keep_on_empty_and_remove(card_admin_pages, card_app, dbsession):
    form = connect_form(card_admin_pages.get("/admin/payments"))
    form["apiKey"] = NEW_KEY
    form["webhookSecrets"] = f"{NEW_WHSEC} {SECRET}"
    done = form.submit(status=303)
    assert done.location.endswith("/admin/payments#provider-cardprovider")
    assert flashed(done) == "provider_saved"
    shown = done.follow()
    assert "The provider settings are saved." in shown.text
    assert_no_secret(shown.text)
    assert "****wxyz" in section(shown).get_text(" ")
    stored = rows(dbsession)
    assert {row.field for row in stored} == {"apiKey", "webhookSecrets"}
    for row in stored:
        assert row.encrypted and NEW_KEY not in row.value and NEW_WHSEC not in row.value
    assert saved(card_app) == {"apiKey": NEW_KEY, "webhookSecrets": [NEW_WHSEC, SECRET]}

    # Empty fields keep what is saved.
    connect_form(shown).submit(status=303)
    assert saved(card_app) == {"apiKey": NEW_KEY, "webhookSecrets": [NEW_WHSEC, SECRET]}

    # "Remove" deletes the saved value: the server configuration applies again.
    form = connect_form(card_admin_pages.get("/admin/payments"))
    form.get("remove", index=0).checked = True  # the secret key's
    form.submit(status=303)
    assert saved(card_app) == {"webhookSecrets": [NEW_WHSEC, SECRET]}
    body = card_admin_pages.get("/api/admin/settings/payments").json
    assert body["cardprovider"]["sources"]["apiKey"] == "ini"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("webhookSecrets", "not-a-signing-secret-0123", "whsec_"),
        ("webhookSecrets", "whsec_" + "x" * 2100, "2000"),
        ("apiKey", "sk_test_\x01bad", "printable"),
        ("apiKey", "pk_test_0123456789abcdef", "publishable key"),
        ("apiKey", "sk_short", "secret key (sk_live_"),
        ("apiKey", "whsec_0123456789abcdef", "secret key (sk_live_"),
    ],
)
def test_bad_input_is_refused_and_nothing_changes(
    card_admin_pages, dbsession, field, value, message
):
    form = connect_form(card_admin_pages.get("/admin/payments"))
    form["apiKey"] = NEW_KEY
    form[field] = value
    response = form.submit(status=422)
    error = response.html.find(id=f"connect-cardprovider-{field}-error")
    assert error is not None and message in error.get_text()
    assert response.html.find(id=f"connect-cardprovider-{field}")["aria-invalid"] == "true"
    assert "Nothing was saved" in response.text
    assert value not in response.text
    assert_no_secret(response.text)
    assert rows(dbsession) == []


def test_remove_and_a_new_value_together_is_refused(card_admin_pages, dbsession):
    form = connect_form(card_admin_pages.get("/admin/payments"))
    form["apiKey"] = NEW_KEY
    form.submit(status=303)
    form = connect_form(card_admin_pages.get("/admin/payments"))
    form["apiKey"] = "sk_test_another_0123456789"
    form.get("remove", index=0).checked = True
    response = form.submit(status=422)
    assert "not both" in response.html.find(id="connect-cardprovider-apiKey-error").get_text()
    assert [row.field for row in rows(dbsession)] == ["apiKey"]


def test_connect_needs_csrf_and_a_known_provider(card_admin_pages, dbsession):
    response = card_admin_pages.post(
        "/admin/payments/connect/cardprovider", {"apiKey": NEW_KEY}, status=403
    )
    assert NEW_KEY not in response.text
    token = card_admin_pages.get("/admin/payments").forms[0]["csrf_token"].value
    card_admin_pages.post(
        "/admin/payments/connect/nosuch", {"csrf_token": token, "apiKey": NEW_KEY}, status=404
    )
    card_admin_pages.post("/admin/payments/test/cardprovider", {}, status=403)
    card_admin_pages.post("/admin/payments/test/nosuch", {"csrf_token": token}, status=404)
    assert rows(dbsession) == []


def test_paypal_credentials_and_environment(card_admin_pages, card_app, dbsession):
    page = card_admin_pages.get("/admin/payments")
    # The server's API address is neither live nor sandbox here (the default is live).
    form = connect_form(page, "walletprovider")
    assert form["environment"].value == "live"
    form["clientId"] = "AbcClientId0123"
    form["clientSecret"] = PAYPAL_SECRET
    form["webhookId"] = "WH-0123456789"
    form["environment"] = "sandbox"
    form.submit(status=303)
    assert saved(card_app, "walletprovider") == {
        "clientId": "AbcClientId0123",
        "clientSecret": PAYPAL_SECRET,
        "webhookId": "WH-0123456789",
        "apiBase": "https://api-m.sandbox.paypal.com",
    }
    shown = card_admin_pages.get("/admin/payments")
    assert connect_form(shown, "walletprovider")["environment"].value == "sandbox"
    assert_no_secret(shown.text)
    assert "****mnop" in section(shown, "walletprovider").get_text(" ")
    # A forged environment is refused, nothing changes.
    token = shown.forms[0]["csrf_token"].value
    response = card_admin_pages.post(
        "/admin/payments/connect/walletprovider",
        {"csrf_token": token, "environment": "staging", "clientId": "Other"},
        status=422,
    )
    assert response.html.find(id="connect-walletprovider-environment-error")
    assert saved(card_app, "walletprovider")["clientId"] == "AbcClientId0123"


# --- Test connection ------------------------------------------------------------------------


def result_of(response, provider: str = "cardprovider") -> str:
    return response.html.find(id=f"test-{provider}-result").get_text(" ", strip=True)


def test_card_connection_reports_the_account(card_admin_pages, fake_stripe, caplog):
    caplog.set_level(logging.DEBUG)
    response = check_form(card_admin_pages.get("/admin/payments")).submit(status=200)
    text = result_of(response)
    assert text.startswith("Connection works.")
    assert "Fake Shop GmbH (acct_fake0123456789), DE, test mode" in text
    assert ("GET", "/v1/account") in fake_stripe.requests
    assert_no_secret(response.text)
    assert_no_secret(caplog.text)


def test_card_restricted_key_is_checked_with_the_balance(card_admin_pages, fake_stripe):
    fake_stripe.account_forbidden = True
    response = check_form(card_admin_pages.get("/admin/payments")).submit(status=200)
    assert "restricted key" in result_of(response)
    assert ("GET", "/v1/balance") in fake_stripe.requests


def test_card_bad_key_is_named(card_admin_pages, caplog):
    caplog.set_level(logging.DEBUG)
    form = connect_form(card_admin_pages.get("/admin/payments"))
    form["apiKey"] = NEW_KEY  # not the key the fake knows
    form.submit(status=303)
    response = check_form(card_admin_pages.get("/admin/payments")).submit(status=200)
    text = result_of(response)
    assert text.startswith("Connection failed.")
    assert "Stripe refused the secret key (HTTP 401)" in text
    assert response.html.find(id="test-cardprovider-result")["role"] == "alert"
    assert_no_secret(response.text)
    assert_no_secret(caplog.text)


def test_card_provider_down(make_app, card_settings, admin):
    down = make_app(**{**card_settings, "cmsshop.cardprovider.api_base": closed_port_url()})
    client = logged_in(down, admin)
    response = check_form(client.get("/admin/payments")).submit(status=200)
    assert "Could not connect to Stripe at http://127.0.0.1:" in result_of(response)


def test_card_not_configured(make_app, card_settings, admin):
    app = make_app(**{**card_settings, "cmsshop.cardprovider.api_key": ""})
    client = logged_in(app, admin)
    response = check_form(client.get("/admin/payments")).submit(status=200)
    assert "No secret key is saved yet." in result_of(response)


@pytest.fixture
def both_pages(make_app, card_settings, wallet_settings, admin):
    """The admin on an app with both providers configured against the fakes."""
    return logged_in(make_app(**{**card_settings, **wallet_settings}), admin)


def test_paypal_connection_ok_bad_secret_and_timeout(
    both_pages, paypal, make_app, card_settings, wallet_settings, admin, caplog
):
    caplog.set_level(logging.DEBUG)
    response = check_form(both_pages.get("/admin/payments"), "walletprovider").submit(status=200)
    text = result_of(response, "walletprovider")
    assert text.startswith("Connection works.")
    assert f"Connected to PayPal at {paypal.base_url}, app APP-TEST." in text
    assert ("POST", "/v1/oauth2/token") in paypal.requests

    form = connect_form(both_pages.get("/admin/payments"), "walletprovider")
    form["clientSecret"] = PAYPAL_SECRET
    form.submit(status=303)
    response = check_form(both_pages.get("/admin/payments"), "walletprovider").submit(status=200)
    text = result_of(response, "walletprovider")
    assert "refused the client ID and secret (HTTP 401 invalid_client)" in text
    assert_no_secret(response.text)
    assert_no_secret(caplog.text)

    slow = logged_in(
        make_app(**{**card_settings, **wallet_settings, "cmsshop.walletprovider.timeout": "0.3"}),
        admin,
    )
    paypal.hang_seconds = 1.0
    response = check_form(slow.get("/admin/payments"), "walletprovider").submit(status=200)
    assert "did not answer within 0.3 seconds" in result_of(response, "walletprovider")


def test_paypal_mode_is_said():
    assert paypal_mode("https://api-m.paypal.com") == "live"
    assert paypal_mode("") == "live"
    assert paypal_mode("https://api-m.sandbox.paypal.com/") == "sandbox"
    assert paypal_mode("https://localhost:8443") == "other"


# --- the browser ----------------------------------------------------------------------------


def test_operator_connects_stripe_in_chromium(new_page, card_app, admin, fake_stripe):
    with serve(card_app) as url:
        page = new_page(url)
        page.goto("/login")
        page.get_by_label("Email").fill(admin.email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_load_state()
        page.goto("/admin/payments")
        check_page(page, "admin-payments-connect")
        card = page.locator("section", has=page.locator("#provider-cardprovider"))
        card.get_by_label("Secret key").fill(API_KEY)
        card.get_by_role("button", name="Save Card payments (Stripe)").click()
        wait_for_notice(page, "provider_saved")
        card = page.locator("section", has=page.locator("#provider-cardprovider"))
        card.get_by_role("button", name="Test connection").click()
        page.wait_for_load_state()
        assert "acct_fake0123456789" in page.locator("#test-cardprovider-result").inner_text()
        check_page(page, "admin-payments-tested")
        assert page.get_by_role("button", name="Copy the URL").first.is_visible()
        assert API_KEY not in page.content()


# --- the JSON API ---------------------------------------------------------------------------


def test_json_test_connection(card_app, admin, customer, fake_stripe):
    client = new_client(card_app)
    client.login(admin.email)
    body = client.post("/api/admin/settings/payments/cardprovider/test", status=200).json
    assert body == {
        "provider": "cardprovider",
        "ok": True,
        "kind": "ok",
        "message": "Connected to Stripe account Fake Shop GmbH (acct_fake0123456789), DE, "
        "test mode.",
        "mode": "test",
        "account": {"id": "acct_fake0123456789", "name": "Fake Shop GmbH", "country": "DE"},
    }
    client.put_json(
        "/api/admin/settings/payments", {"cardprovider": {"apiKey": NEW_KEY}}, status=200
    )
    body = client.post("/api/admin/settings/payments/cardprovider/test", status=200).json
    assert (body["ok"], body["kind"], body["account"]) == (False, "bad_credentials", None)
    assert NEW_KEY not in json.dumps(body)
    # PayPal without credentials says so.
    body = client.post("/api/admin/settings/payments/walletprovider/test", status=200).json
    assert (body["ok"], body["kind"], body["mode"]) == (False, "not_configured", "live")
    error = client.post("/api/admin/settings/payments/nosuch/test", status=404).json
    assert error["code"] and error["message"]
    # Admins only, and the CSRF header is needed.
    buyer = new_client(card_app)
    buyer.login(customer.email)
    buyer.post("/api/admin/settings/payments/cardprovider/test", status=403)
    client.csrf_token = "wrong"
    client.post("/api/admin/settings/payments/cardprovider/test", status=403)
