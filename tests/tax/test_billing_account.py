"""The customer's billing details in the account: the page /account/billing and the JSON
GET/PUT /api/account/billing, VIES checking through a fake on loopback."""

from __future__ import annotations

import pytest
from helpers.clients import logged_in, new_client, page_client
from helpers.html import errors_of, h1_of
from helpers.notices import flashed
from sqlalchemy import select

from cmsshop.models import BillingProfile

BUSINESS = {
    "country": "DE",
    "name": "Erika Mustermann",
    "company": "Example GmbH",
    "addressLine1": "Hauptstr. 1",
    "city": "Berlin",
    "postalCode": "10115",
    "vatId": "de 136 695 976",
}


def profiles(dbsession):
    dbsession.commit()  # end the read snapshot: see what the app committed since
    dbsession.expire_all()
    return dbsession.scalars(select(BillingProfile)).all()


# --- JSON --------------------------------------------------------------------------------


def test_nothing_saved_reads_as_null(customer_app):
    assert customer_app.get("/api/account/billing").json == {"billing": None}


def test_put_saves_and_get_reads_back(customer_app, customer, dbsession):
    answer = customer_app.put_json("/api/account/billing", BUSINESS).json
    assert answer["vatIdCheck"] == "format_valid"
    assert answer["billing"]["vatId"] == "DE136695976"
    assert customer_app.get("/api/account/billing").json == {"billing": answer["billing"]}
    [profile] = profiles(dbsession)
    assert (profile.user_id, profile.company, profile.vat_id) == (
        customer.id,
        "Example GmbH",
        "DE136695976",
    )


def test_put_replaces_and_clears(customer_app, dbsession):
    customer_app.put_json("/api/account/billing", BUSINESS)
    answer = customer_app.put_json("/api/account/billing", {"country": "us", "vatId": None})
    assert answer.json["billing"]["vatId"] is None
    assert answer.json["vatIdCheck"] == "none"
    [profile] = profiles(dbsession)
    assert (profile.country, profile.company, profile.vat_id) == ("US", None, None)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"country": "XX"}, "country"),
        ({"name": "No country"}, "country"),
        ({**BUSINESS, "vatId": "DE136695978"}, "vatId"),
        ({**BUSINESS, "vatId": "DE1"}, "vatId"),
        ({"country": "DE", "name": "\x1b[31m"}, "name"),
        ({"country": "DE", "city": "x" * 101}, "city"),
    ],
)
def test_bad_details_are_422_by_field_and_change_nothing(customer_app, dbsession, body, field):
    customer_app.put_json("/api/account/billing", {"country": "FR"})
    answer = customer_app.put_json("/api/account/billing", body, status=422)
    assert answer.json["code"] == "validation_failed"
    assert field in answer.json["errors"]
    assert [p.country for p in profiles(dbsession)] == ["FR"]


def test_a_body_that_is_not_an_object_is_422(customer_app):
    answer = customer_app.put_json("/api/account/billing", ["DE"], status=422)
    assert "billing" in answer.json["errors"]


def test_anonymous_is_401_and_a_missing_csrf_token_403(testapp, customer_app):
    assert testapp.get("/api/account/billing", status=401).json["code"] == "not_authenticated"
    testapp.put_json("/api/account/billing", {"country": "DE"}, status=401)
    answer = customer_app.put_json(
        "/api/account/billing", {"country": "DE"}, headers={"X-CSRF-Token": "wrong"}, status=403
    )
    assert answer.json["code"] == "csrf_failed"


def test_each_customer_sees_only_their_own(customer_app, other_customer_app):
    customer_app.put_json("/api/account/billing", BUSINESS)
    assert other_customer_app.get("/api/account/billing").json == {"billing": None}


@pytest.fixture
def vies_client(make_app, fake_vies, customer):
    app = make_app(**{"cmsshop.tax.vies_url": fake_vies.url, "cmsshop.tax.vies_timeout": "1"})
    client = new_client(app)
    client.login(customer.email)
    return client


def test_with_vies_a_registered_number_is_vies_valid(vies_client, fake_vies):
    fake_vies.register("DE136695976", "EXAMPLE GMBH", "BERLIN")
    answer = vies_client.put_json("/api/account/billing", BUSINESS).json
    assert answer["vatIdCheck"] == "vies_valid"
    assert fake_vies.requests == [{"countryCode": "DE", "vatNumber": "136695976"}]


def test_with_vies_an_unregistered_number_is_a_vat_id_error(vies_client, dbsession):
    answer = vies_client.put_json("/api/account/billing", BUSINESS, status=422)
    assert set(answer.json["errors"]) == {"vatId"}
    assert "not registered" in answer.json["errors"]["vatId"]
    assert profiles(dbsession) == []


def test_with_vies_down_the_details_are_saved_unconfirmed(vies_client, fake_vies):
    fake_vies.outage = 503
    assert vies_client.put_json("/api/account/billing", BUSINESS).json["vatIdCheck"] == (
        "vies_unavailable"
    )


# --- the page ----------------------------------------------------------------------------


def test_the_page_saves_and_shows_the_details_prefilled(app, customer, dbsession):
    client = logged_in(app, customer)
    page = client.get("/account/billing")
    assert h1_of(page) == "Billing details"
    assert page.html.find("a", href="/account/billing")["aria-current"] == "page"
    form = page.forms["billing-form"]
    for field, value in BUSINESS.items():
        form[field] = value
    saved = form.submit(status=303)
    assert saved.location.endswith("/account/billing")
    assert flashed(saved) == "billing_saved"
    page = saved.follow()
    assert "Your billing details were saved." in page.text
    form = page.forms["billing-form"]
    assert form["country"].value == "DE"
    assert form["vatId"].value == "DE136695976"
    assert form["company"].value == "Example GmbH"


def test_the_page_marks_bad_fields_and_keeps_what_was_typed(app, customer, dbsession):
    client = logged_in(app, customer)
    form = client.get("/account/billing").forms["billing-form"]
    for field, value in BUSINESS.items():
        form[field] = value
    form["vatId"] = "DE 136 695 978"
    form["name"] = "Tab\tbed"
    page = form.submit(status=422)
    errors = errors_of(page)
    assert set(errors) == {"vatId", "name"}
    assert "check digits" in errors["vatId"]
    assert page.html.find(id="f-vatId")["aria-invalid"] == "true"
    assert page.forms["billing-form"]["vatId"].value == "DE 136 695 978"
    assert page.html.title.get_text().startswith("Error:")
    assert profiles(dbsession) == []


def test_the_page_asks_a_business_for_its_address(app, customer):
    client = logged_in(app, customer)
    form = client.get("/account/billing").forms["billing-form"]
    form["country"] = "DE"
    form["vatId"] = "DE136695976"
    page = form.submit(status=422)
    assert set(errors_of(page)) == {"company", "addressLine1", "city", "postalCode"}


def test_the_page_needs_a_login_and_a_csrf_token(app, customer):
    anonymous = page_client(app)
    assert "/login" in anonymous.get("/account/billing", status=303).location
    client = logged_in(app, customer)
    client.post("/account/billing", {"country": "DE"}, status=403)


def test_the_page_answers_with_the_dashboard_module_off(make_app, customer, dbsession):
    app = make_app(**{"cmsshop.modules": "store"})
    client = logged_in(app, customer)
    page = client.get("/account/billing")
    assert h1_of(page) == "Billing details"
    assert page.html.find("a", href="/account/orders") is None  # no dead account links
    form = page.forms["billing-form"]
    form["country"] = "NL"
    form.submit(status=303)
    assert [p.country for p in profiles(dbsession)] == ["NL"]
    client.get("/account/orders", status=404)
