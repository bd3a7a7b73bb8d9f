"""Checkout asks for the terms of sale once they are published: the JSON checkouts take
``acceptTerms: true`` (a 422 on acceptTerms otherwise, nothing written), the cart's and
the product page's forms carry a required box linking /legal/terms, and the order keeps
the version accepted and when (order JSON, the admin order page). A shop without terms
asks nothing."""

from __future__ import annotations

import pytest
from fakes.shop import make_catalogue
from helpers.checkout import BILLING, fill_billing, order_count
from helpers.clients import logged_in, page_client
from helpers.html import errors_of
from helpers.legal import publish_legal
from sqlalchemy import select

from cmsshop.models import Order


@pytest.fixture
def shop(dbsession):
    return make_catalogue(dbsession)


def form_to(page, action: str):
    return next(form for form in page.forms.values() if form.action == action)


def checkout_body(**extra) -> dict:
    return {"billing": BILLING, "items": [{"product": "themes"}], **extra}


def test_without_terms_nothing_is_asked(customer_app, shop, app):
    body = customer_app.post_json("/api/store/checkout", checkout_body(), status=201).json
    assert body["order"]["termsVersion"] is None and body["order"]["termsAcceptedAt"] is None
    assert page_client(app).get("/cart").html.find("input", attrs={"name": "acceptTerms"}) is None


@pytest.mark.parametrize("accept", [None, False])
def test_the_json_checkout_refuses_without_acceptance(customer_app, shop, dbsession, accept):
    publish_legal(dbsession)
    body = checkout_body() if accept is None else checkout_body(acceptTerms=accept)
    refused = customer_app.post_json("/api/store/checkout", body, status=422).json
    assert refused["code"] == "validation_failed"
    assert "terms" in refused["errors"]["acceptTerms"]
    assert order_count(dbsession) == 0


def test_the_json_checkout_takes_only_a_json_true(customer_app, shop, dbsession):
    publish_legal(dbsession)
    for value in ("true", 1, "yes"):
        refused = customer_app.post_json(
            "/api/store/checkout", checkout_body(acceptTerms=value), status=422
        ).json
        assert "acceptTerms" in refused["errors"]
    assert order_count(dbsession) == 0


def test_the_order_keeps_the_version_accepted(customer_app, shop, dbsession, admin, app):
    publish_legal(dbsession)
    publish_legal(dbsession, body="## Scope\n\nVersion two.")
    order = customer_app.post_json(
        "/api/store/checkout", checkout_body(acceptTerms=True), status=201
    ).json["order"]
    assert order["termsVersion"] == 2 and order["termsAcceptedAt"].endswith("Z")
    # A later version changes nothing on the order placed.
    publish_legal(dbsession, body="## Scope\n\nVersion three.")
    dbsession.commit()
    stored = dbsession.scalar(select(Order).where(Order.number == order["number"]))
    assert stored.terms_version == 2 and stored.terms_accepted_at is not None
    page = logged_in(app, admin).get(f"/admin/orders/{order['number']}")
    link = page.html.find("a", href="/admin/legal/terms/versions/2")
    assert link is not None and "Version 2" in link.get_text()


def test_the_cart_api_checkout_asks_too(app, shop, dbsession):
    from helpers.checkout import visitor_with_cart

    publish_legal(dbsession)
    client, cart = visitor_with_cart(app, {"themes": 1})
    url = f"/api/store/carts/{cart['id']}/checkout"
    body = {"billing": BILLING, "email": "guest@example.com"}
    refused = client.post_json(url, body, status=422).json
    assert "acceptTerms" in refused["errors"]
    assert order_count(dbsession) == 0
    placed = client.post_json(url, {**body, "acceptTerms": True}, status=201).json
    assert placed["order"]["termsVersion"] == 1


def test_the_cart_page_has_a_required_terms_box(make_app, shop, dbsession):
    app = make_app(**{"cmsshop.environment": "development"})
    publish_legal(dbsession)
    client = page_client(app)
    form = form_to(client.get("/products/themes"), "/checkout")
    client.post("/cart/add", dict(form.submit_fields()), status=303)
    page = client.get("/cart")
    box = page.html.find("input", attrs={"name": "acceptTerms"})
    assert box["type"] == "checkbox" and box.has_attr("required")
    label = page.html.find("label", attrs={"for": box["id"]})
    assert label.find("a")["href"] == "/legal/terms"
    pay = form_to(page, "/cart/checkout")
    pay["email"] = "guest@example.com"
    fill_billing(pay)
    pay["acceptTerms"] = False  # fill_billing ticks it where asked
    refused = pay.submit(status=422)
    assert "terms" in errors_of(refused)["acceptTerms"]
    assert refused.html.find("input", attrs={"name": "acceptTerms"})["aria-invalid"] == "true"
    assert order_count(dbsession) == 0
    pay = form_to(refused, "/cart/checkout")
    assert pay["email"].value == "guest@example.com"  # what was typed is kept
    pay["acceptTerms"] = True
    placed = pay.submit(status=303)
    assert "/checkout/sandbox/ORD-" in placed.location
    dbsession.commit()
    assert dbsession.scalar(select(Order.terms_version)) == 1


def test_the_logged_in_buy_form_asks_too(app, shop, customer, dbsession):
    publish_legal(dbsession)
    client = logged_in(app, customer)
    form = form_to(client.get("/products/site-guard"), "/checkout")
    fill_billing(form)
    form["acceptTerms"] = False
    refused = form.submit(status=422)
    assert "acceptTerms" in errors_of(refused)
    again = form_to(refused, "/checkout")
    again["acceptTerms"] = True
    assert "/checkout/sandbox/ORD-" in again.submit(status=303).location
    dbsession.commit()
    assert dbsession.scalar(select(Order.terms_version)) == 1
    # A visitor's "Buy" fills the cart: the terms are asked there, not on this form.
    visitor = page_client(app).get("/products/site-guard")
    assert visitor.html.find("input", attrs={"name": "acceptTerms"}) is None


def test_a_renewal_from_the_account_page_asks_for_the_terms_on_a_step(
    card_buyer, tiered_license, dbsession
):
    import datetime as dt

    from helpers.license_changes import set_license

    # Near its expiry, so the account page offers the renewal.
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(days=10)
    set_license(dbsession, tiered_license, expires_at=soon)
    card_buyer.put_json("/api/account/billing", BILLING)
    publish_legal(dbsession)
    before = order_count(dbsession)
    page = card_buyer.get("/account/licenses")
    renew = next(f for f in page.forms.values() if "renew" in f.fields)
    step = renew.submit(status=200)
    assert step.html.find("h1").get_text(strip=True) == "Accept the terms of sale"
    assert step.headers["Cache-Control"] == "private, no-store"
    form = form_to(step, "/checkout")
    assert form["renew"].value == tiered_license.key
    unticked = form.submit(status=200)
    assert "terms" in errors_of(unticked)["acceptTerms"]
    assert order_count(dbsession) == before
    form = form_to(unticked, "/checkout")
    form["acceptTerms"] = True
    assert form.submit(status=303).location  # to the provider's payment page
    dbsession.commit()
    renewal = dbsession.scalar(select(Order).order_by(Order.id.desc()))
    assert renewal.terms_version == 1
