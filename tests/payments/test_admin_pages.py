"""Admin payment pages (/admin/payments): settings with masked secrets, webhook secret
rotation, the event log and reprocessing a failed event."""

from __future__ import annotations

import json
import time

import pytest
from fakes.shop import counts, event_row, make_order, order_status
from fakes.stripe_api import (
    API_KEY,
    PREVIOUS_SECRET,
    SECRET,
    closed_port_url,
    event,
    session_object,
)
from helpers.clients import logged_in, page_client
from helpers.html import title_of
from helpers.notices import flashed
from helpers.payments import deliver
from sqlalchemy import select

from cmsshop.models import PaymentSetting

NEW_SECRET = "whsec_rotated_secret_0123456789abcdef"


def rotate_form(page, provider: str = "cardprovider"):
    return next(f for f in page.forms.values() if f.action.endswith(f"/rotate/{provider}"))


ALL_SECRETS = (SECRET, PREVIOUS_SECRET, API_KEY, NEW_SECRET, "test-client-secret")


def assert_no_secret(response) -> None:
    for secret in ALL_SECRETS:
        assert secret not in response.text


# --- settings ------------------------------------------------------------------------------------


def test_settings_page_masks_secrets(card_admin_pages):
    page = card_admin_pages.get("/admin/payments")
    assert title_of(page).startswith("Payment settings")
    assert len(page.html.find_all("h1")) == 1
    assert_no_secret(page)
    card = page.html.find("section", attrs={"aria-labelledby": "provider-cardprovider"})
    text = card.get_text(" ")
    assert "****cdef" in text and "****6789" in text
    assert "current" in text and "previous" in text
    assert page.html.find("section", attrs={"aria-labelledby": "provider-walletprovider"})
    # The secret field of the rotation form is never filled in.
    assert "value" not in page.html.find("input", id="rotate-cardprovider").attrs


def test_rotation_keeps_the_previous_secret(card_admin_pages, card_app, dbsession, catalogue):
    page = card_admin_pages.get("/admin/payments")
    form = rotate_form(page)
    form["value"] = NEW_SECRET
    done = form.submit(status=303)
    assert done.location.endswith("/admin/payments")
    assert flashed(done) == "webhook_rotated"
    shown = done.follow()
    assert "The new webhook setting is saved." in shown.text
    assert_no_secret(shown)
    card = shown.html.find("section", attrs={"aria-labelledby": "provider-cardprovider"})
    items = [li.get_text(" ", strip=True) for li in card.select("table li")]
    assert items == ["****cdef current", "****cdef previous"]
    dbsession.commit()
    row = dbsession.scalar(select(PaymentSetting).where(PaymentSetting.field == "webhookSecrets"))
    assert row.encrypted and NEW_SECRET not in row.value
    # Both the new and the previous secret verify deliveries now; the oldest does not.
    assert (
        deliver(card_app, event("customer.created", {"id": "c1"}), secret=NEW_SECRET).status_int
        == 200
    )
    assert (
        deliver(card_app, event("customer.created", {"id": "c2"}), secret=SECRET).status_int == 200
    )
    assert (
        deliver(
            card_app, event("customer.created", {"id": "c3"}), secret=PREVIOUS_SECRET
        ).status_int
        == 400
    )
    # Rotating again drops the oldest: [newer, new].
    newer = "whsec_even_newer_secret_0123456789ab"
    form = rotate_form(card_admin_pages.get("/admin/payments"))
    form["value"] = newer
    form.submit(status=303)
    body = card_admin_pages.get("/api/admin/settings/payments").json
    assert body["cardprovider"]["webhookSecrets"] == ["****89ab", "****cdef"]


@pytest.mark.parametrize(
    ("value", "message"),
    [("not-a-whsec-secret-0123456", "whsec_"), ("", "Required"), ("x" * 3000, "")],
)
def test_rotation_refuses_bad_values(card_admin_pages, dbsession, value, message):
    form = rotate_form(card_admin_pages.get("/admin/payments"))
    form["value"] = value
    response = form.submit(status=422)
    error = response.html.find(id="rotate-cardprovider-error")
    assert error is not None and message in error.get_text()
    assert value not in response.text or value == ""
    dbsession.commit()
    assert dbsession.scalar(select(PaymentSetting)) is None


def test_wallet_webhook_id_is_replaced(card_admin_pages):
    form = rotate_form(card_admin_pages.get("/admin/payments"), "walletprovider")
    form["value"] = "WH-NEW-ID-123"
    form.submit(status=303)
    body = card_admin_pages.get("/api/admin/settings/payments").json
    assert body["walletprovider"]["webhookId"] == "WH-NEW-ID-123"


def test_rotation_needs_csrf_and_a_known_provider(card_admin_pages, dbsession):
    response = card_admin_pages.post(
        "/admin/payments/rotate/cardprovider", {"value": NEW_SECRET}, status=403
    )
    assert response.content_type == "text/html"
    token = card_admin_pages.get("/admin/payments").forms[0]["csrf_token"].value
    card_admin_pages.post(
        "/admin/payments/rotate/nosuch", {"csrf_token": token, "value": NEW_SECRET}, status=404
    )
    card_admin_pages.post(
        "/admin/payments/rotate/cardprovider",
        {"csrf_token": token, "value": "whsec_\x00nul"},
        status=422,
    )
    dbsession.commit()
    assert dbsession.scalar(select(PaymentSetting)) is None


# --- the event log -------------------------------------------------------------------------------


def test_event_log_filters_and_detail(
    card_admin_pages, card_app, dbsession, catalogue, customer, fake_stripe
):
    order = make_order(dbsession, customer)
    checkout = fake_stripe.add_session(session_object(order.number, order.total))
    paid = event("checkout.session.completed", checkout)
    deliver(card_app, paid, status=200)
    deliver(card_app, event("customer.created", {"id": "c"}), status=200)
    deliver(
        card_app,
        event("customer.created", {"id": "c"}),
        secret="whsec_wrong_0123456789",
        status=400,
    )

    page = card_admin_pages.get("/admin/payments/events")
    assert title_of(page).startswith("Provider event log")
    assert len(page.html.select("tbody tr")) == 3
    assert (
        len(
            card_admin_pages.get("/admin/payments/events", {"status": "rejected"}).html.select(
                "tbody tr"
            )
        )
        == 1
    )
    assert (
        len(
            card_admin_pages.get(
                "/admin/payments/events", {"provider": "walletprovider"}
            ).html.select("tbody tr")
        )
        == 0
    )
    assert (
        len(
            card_admin_pages.get(
                "/admin/payments/events", {"order": order.number, "status": "", "provider": ""}
            ).html.select("tbody tr")
        )
        == 1
    )
    paged = card_admin_pages.get("/admin/payments/events", {"perPage": "2", "page": "2"})
    assert len(paged.html.select("tbody tr")) == 1

    row = event_row(dbsession, paid["id"])
    detail = card_admin_pages.get(f"/admin/payments/events/{row.id}")
    assert title_of(detail).startswith(f"Payment event {row.id}")
    pre = detail.html.find("pre").get_text()
    assert json.loads(pre)["id"] == paid["id"] and "\n  " in pre  # pretty-printed
    assert "Stripe-Signature" in detail.text
    assert "final, nothing to reprocess" in detail.text
    assert not any(f.action.endswith("/reprocess") for f in detail.forms.values())
    assert_no_secret(detail)


def test_payload_markup_is_escaped(card_admin_pages, card_app, dbsession):
    payload = event("customer.created", {"id": "</pre><script>alert(1)</script>"})
    deliver(card_app, payload, status=200)
    row = event_row(dbsession, payload["id"])
    detail = card_admin_pages.get(f"/admin/payments/events/{row.id}")
    assert "<script>alert(1)</script>" not in detail.text
    assert "&lt;script&gt;" in detail.text
    assert not detail.html.find_all("script", src=False)


def test_reprocess_a_failed_event(
    make_app, card_settings, card_admin_pages, dbsession, catalogue, customer, fake_stripe
):
    order = make_order(dbsession, customer)
    checkout = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", checkout)
    down = make_app(**{**card_settings, "cmsshop.cardprovider.api_base": closed_port_url()})
    deliver(down, payload, status=503)
    row = event_row(dbsession, payload["id"])
    assert row.status == "confirm_failed"

    listing = card_admin_pages.get("/admin/payments/events", {"status": "confirm_failed"})
    detail = listing.click(href=f"/admin/payments/events/{row.id}$")
    assert "confirm_failed" in detail.text and row.last_error[:20] in detail.text
    form = next(f for f in detail.forms.values() if f.action.endswith("/reprocess"))
    done = form.submit(status=303)
    assert done.location.endswith(f"/admin/payments/events/{row.id}")
    assert flashed(done) == "event_processed"
    shown = done.follow()
    assert "Reprocessed: the event is processed." in shown.text
    assert order_status(dbsession, order.number) == "paid"
    assert event_row(dbsession, payload["id"]).attempts == 2
    # A stale form sent again: refused by the service, nothing more created.
    again = form.submit(status=303)
    assert flashed(again) == "event_cannot_reprocess"
    assert counts(dbsession)["fulfilments"] == 1


def test_reprocess_that_fails_again_is_recorded(card_admin_pages, card_app, dbsession, fake_stripe):
    payload = event("checkout.session.completed", session_object("ORD-NOPE-NOPE1", 100))
    deliver(card_app, payload, status=409)
    row = event_row(dbsession, payload["id"])
    detail = card_admin_pages.get(f"/admin/payments/events/{row.id}")
    form = next(f for f in detail.forms.values() if f.action.endswith("/reprocess"))
    done = form.submit(status=303)
    assert flashed(done) == "event_reprocess_failed"
    assert event_row(dbsession, payload["id"]).attempts == 2


def test_reprocess_a_rejected_delivery_after_rotation(
    card_admin_pages, card_app, dbsession, catalogue, customer, fake_stripe
):
    order = make_order(dbsession, customer)
    checkout = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", checkout)
    deliver(card_app, payload, secret=NEW_SECRET, status=400, timestamp=int(time.time()) - 3600)
    rejected = card_admin_pages.get("/admin/payments/events", {"status": "rejected"})
    detail = rejected.click(href=r"/admin/payments/events/\d+$")
    reprocess = next(f for f in detail.forms.values() if f.action.endswith("/reprocess"))
    assert flashed(reprocess.submit(status=303)) == "event_cannot_reprocess"
    form = rotate_form(card_admin_pages.get("/admin/payments"))
    form["value"] = NEW_SECRET
    form.submit(status=303)
    done = reprocess.submit(status=303)
    assert flashed(done) == "event_processed"
    assert order_status(dbsession, order.number) == "paid"


def test_event_pages_hostile_input(card_admin_pages):
    token = card_admin_pages.get("/admin/payments").forms[0]["csrf_token"].value
    for raw in ("999999", "abc", "0", "-1", "99999999999", "%C2%B2"):
        card_admin_pages.get(f"/admin/payments/events/{raw}", status=404)
    card_admin_pages.post(
        "/admin/payments/events/999999/reprocess", {"csrf_token": token}, status=404
    )
    card_admin_pages.post("/admin/payments/events/abc/reprocess", {"csrf_token": token}, status=404)
    card_admin_pages.get("/admin/payments/events", {"status": "bogus"}, status=422)
    card_admin_pages.get("/admin/payments/events", {"provider": "p" * 100}, status=422)
    card_admin_pages.get("/admin/payments/events?status=a&status=b", status=422)
    card_admin_pages.get("/admin/payments/events", {"page": "9" * 40}, status=200)
    response = card_admin_pages.post("/admin/payments/events/1/reprocess", {}, status=403)
    assert response.content_type == "text/html"


def test_customers_get_403_and_visitors_the_login(card_app, customer):
    paths = ["/admin/payments", "/admin/payments/events", "/admin/payments/events/1"]
    visitor = page_client(card_app)
    for path in paths:
        assert "/login?next=" in visitor.get(path, status=303).location
    client = logged_in(card_app, customer.email)
    for path in paths:
        assert client.get(path, status=403).content_type == "text/html"
    token = client.get("/").html.find("input", attrs={"name": "csrf_token"})["value"]
    client.post("/admin/payments/events/1/reprocess", {"csrf_token": token}, status=403)
    client.post(
        "/admin/payments/rotate/cardprovider",
        {"csrf_token": token, "value": NEW_SECRET},
        status=403,
    )


def test_payment_pages_are_off_without_a_webhook_module(make_app, admin):
    app = make_app(**{"cmsshop.modules": "store licensing"})
    client = logged_in(app, admin.email)
    for path in ("/admin/payments", "/admin/payments/events/1"):
        response = client.get(path, status=404)
        assert "not enabled" in response.text
