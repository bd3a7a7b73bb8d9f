"""The seller's legal identity and tax settings: ini and environment defaults (checked at
start-up), the console's "Business and tax" page (saved values win; a refused form saves
nothing and marks its fields), the admin dashboard's warning, and production refusing
checkout while invoices could not name the seller."""

from __future__ import annotations

import pytest
from helpers.app import TEST_SECRET
from helpers.checkout import BILLING
from helpers.clients import ApiClient, logged_in
from helpers.notices import flashed
from helpers.tax import SELLER_DE_IDENTITY
from pyramid.exceptions import ConfigurationError
from sqlalchemy import select

from cmsshop.models import Order, ShopSetting
from cmsshop.services.tax.seller import live_checkout_refusal, shop_profile

COMPLETE = {
    "legalName": "Example Software GmbH",
    "address": "Hauptstraße 1\nHinterhaus",
    "postalCode": "10115",
    "city": "Berlin",
    "country": "DE",
    "taxId": "DE 136 695 976",
    "invoiceFooter": "Amtsgericht Berlin HRB 12345",
    "taxEnabled": "1",
    "pricesIncludeTax": "",
    "microSeller": "1",
    "registrations": "gb  NO",
}


def settings_form(page):
    return next(f for f in page.forms.values() if f.action.endswith("/admin/tax/settings"))


def saved_rows(dbsession) -> dict:
    dbsession.commit()  # ends the read snapshot (SQLite WAL)
    return {row.key: row.value for row in dbsession.scalars(select(ShopSetting))}


def test_the_console_saves_the_identity_and_the_settings(app, admin, dbsession):
    console = logged_in(app, admin)
    # While the details are missing, the dashboard warns and links to the page.
    dashboard_warning = console.get("/admin").html.find(id="identity-missing")
    assert "legal name" in dashboard_warning.get_text(" ")
    assert dashboard_warning.find("a")["href"] == "/admin/tax/settings"
    page = console.get("/admin/tax/settings")
    warning = page.html.find(id="identity-missing").get_text(" ")
    assert "legal name" in warning and "vat or tax id" in warning
    form = settings_form(page)
    for field, value in COMPLETE.items():
        if field in ("taxEnabled", "microSeller"):
            form[field].checked = True
        elif field == "pricesIncludeTax":
            form[field].checked = False
        else:
            form[field] = value
    done = form.submit(status=303)
    assert done.location.endswith("/admin/tax/settings")
    assert flashed(done) == "tax_settings_saved"
    shown = done.follow()
    assert "The business and tax details are saved." in shown.text
    assert shown.html.find(id="identity-missing") is None

    rows = saved_rows(dbsession)
    assert rows["seller.legalName"] == "Example Software GmbH"
    assert rows["seller.address"] == "Hauptstraße 1\nHinterhaus"
    assert rows["seller.taxId"] == "DE136695976"  # normalised
    assert rows["seller.registrations"] == ["GB", "NO"]
    assert rows["seller.taxEnabled"] is True and rows["seller.pricesIncludeTax"] is False
    profile = shop_profile(dbsession, app.registry.settings)
    assert profile.missing == [] and profile.country_name() == "Germany"
    tax = profile.seller_tax(app.registry.settings)
    assert (tax.country, tax.enabled, tax.micro_seller) == ("DE", True, True)
    assert tax.registrations == {"GB", "NO"}
    # The dashboard has nothing to warn about any more.
    assert console.get("/admin").html.find(id="identity-missing") is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("country", "XX", "ISO country"),
        ("taxId", "DE136695975", "valid EU VAT ID"),  # a wrong check digit
        ("taxId", "FR12345", "valid EU VAT ID"),
        ("legalName", "Line one\nline two", "one line"),
        ("legalName", "x" * 201, "at most 200"),
        ("invoiceFooter", "bell\x07", "cannot be printed"),
        ("registrations", "GB U$", "not a country or region code"),
    ],
)
def test_a_refused_form_saves_nothing_and_marks_the_field(
    app, admin, dbsession, field, value, message
):
    console = logged_in(app, admin)
    form = settings_form(console.get("/admin/tax/settings"))
    form["legalName"] = "Example Software GmbH"
    form["country"] = "DE"
    if field == "country":
        form[field].force_value(value)
    else:
        form[field] = value
    refused = form.submit(status=422)
    marked = refused.html.find(attrs={"name": field})
    assert marked["aria-invalid"] == "true"
    assert message in refused.html.find(id=f"f-{field}-error").get_text()
    assert saved_rows(dbsession) == {}


def test_micro_seller_is_for_eu_sellers(app, admin, dbsession):
    console = logged_in(app, admin)
    form = settings_form(console.get("/admin/tax/settings"))
    form["country"] = "US"
    form["microSeller"].checked = True
    refused = form.submit(status=422)
    assert "established in the EU" in refused.html.find(id="f-microSeller-error").get_text()
    assert saved_rows(dbsession) == {}


def test_the_page_needs_an_admin_and_a_csrf_token(app, admin, customer, dbsession):
    logged_in(app, customer).get("/admin/tax/settings", status=403)
    console = logged_in(app, admin)
    console.post("/admin/tax/settings", {"legalName": "Sneaky"}, status=403)
    assert saved_rows(dbsession) == {}


def test_ini_and_environment_defaults(make_app, monkeypatch, dbsession, admin):
    monkeypatch.setenv("CMSSHOP_SELLER_LEGAL_NAME", "Env Software Oy")
    app = make_app(
        **{
            "cmsshop.seller.country": "FI",
            "cmsshop.seller.tax_id": "FI20774740",
            "cmsshop.tax.enabled": "true",
            "cmsshop.tax.registrations": "GB, NO",
            "cmsshop.tax.extra_rates": "US-WA 6.5 2024-01-01",
        }
    )
    profile = shop_profile(dbsession, app.registry.settings)
    assert (profile.legal_name, profile.country, profile.tax_id) == (
        "Env Software Oy",
        "FI",
        "FI20774740",
    )
    assert profile.sources["legalName"] == "ini" and profile.registrations == ("GB", "NO")
    assert profile.missing == ["address", "postalCode", "city"]
    tax = profile.seller_tax(app.registry.settings)
    assert [row.jurisdiction for row in tax.extra_rates] == ["US-WA"]
    page = logged_in(app, admin).get("/admin/tax/settings")
    assert settings_form(page)["legalName"].value == "Env Software Oy"


@pytest.mark.parametrize(
    ("setting", "value", "named"),
    [
        ("cmsshop.seller.country", "Germany", "cmsshop.seller.country"),
        ("cmsshop.seller.tax_id", "DE000000000", "cmsshop.seller.tax_id"),
        ("cmsshop.tax.extra_rates", "US-WA lots 2024-01-01", "cmsshop.tax.extra_rates"),
        ("cmsshop.tax.enabled", "maybe", "cmsshop.tax.enabled"),
    ],
)
def test_bad_ini_values_stop_start_up(make_app, setting, value, named):
    extra = {"cmsshop.seller.country": "DE"} if setting == "cmsshop.seller.tax_id" else {}
    with pytest.raises(ConfigurationError, match=named):
        make_app(**{setting: value, **extra})


PRODUCTION = {
    "cmsshop.environment": "production",
    "cmsshop.secret": TEST_SECRET,
    "cmsshop.password_hashing": "default",
    "cmsshop.base_url": "https://localhost",
}
HTTPS = {"wsgi.url_scheme": "https", "HTTP_ORIGIN": "https://localhost", "REMOTE_ADDR": "127.0.0.1"}


def test_production_refuses_checkout_until_the_identity_is_complete(
    make_app, card_settings, catalogue, customer, dbsession, fake_stripe
):
    app = make_app(**card_settings, **PRODUCTION)
    buyer = ApiClient(app, extra_environ=HTTPS)
    buyer.login(customer.email)
    refused = buyer.post_json(
        "/api/store/checkout", {"items": [{"product": "themes"}], "billing": BILLING}, status=409
    ).json
    assert refused["code"] == "seller_identity_missing"
    assert "legal name" in refused["hints"][0] and "/admin/tax/settings" in refused["hints"][0]
    dbsession.commit()
    assert dbsession.scalar(select(Order)) is None  # nothing placed

    complete = SELLER_DE_IDENTITY
    ready = ApiClient(make_app(**card_settings, **PRODUCTION, **complete), extra_environ=HTTPS)
    ready.login(customer.email)
    placed = ready.post_json(
        "/api/store/checkout", {"items": [{"product": "themes"}], "billing": BILLING}, status=201
    )
    assert placed.json["order"]["status"] == "pending"


def test_development_never_refuses(app, dbsession):
    profile = shop_profile(dbsession, app.registry.settings)
    assert profile.missing and live_checkout_refusal(profile, app.registry.settings) is None
