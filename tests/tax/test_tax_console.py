"""What the console and the cart say of the tax the shop charges: the running total of
cross-border consumer sales against the EUR 10,000 micro-seller threshold, the sales
whose tax evidence needs checking, and the cart's note on whether prices include tax."""

from __future__ import annotations

import pytest
from fakes.shop import make_catalogue
from helpers.account_data import paid_order
from helpers.checkout import visitor_with_cart
from helpers.clients import logged_in
from helpers.tax import SELLER_DE_FIELDS

from cmsshop.services.tax import seller

GERMAN_SELLER = {
    **SELLER_DE_FIELDS,
    "invoiceFooter": "",
    "taxEnabled": "1",
    "pricesIncludeTax": "",
    "microSeller": "1",
    "registrations": "",
}


def save_seller(dbsession, **changes) -> None:
    seller.save_settings(dbsession, seller.clean({**GERMAN_SELLER, **changes}), None)
    dbsession.commit()


def cross_border_sale(dbsession, customer, eur_cents: int, **tax_details):
    """A paid sale to a consumer in another member state, counted in EUR cents."""
    order = paid_order(dbsession, customer, ("themes",))
    order.cross_border_eur = eur_cents
    order.tax_details = {"regime": "micro_seller", "country": "DE", "rate": "19", **tax_details}
    dbsession.commit()
    return order


def section_text(page, ident: str) -> str:
    heading = page.html.find(id=ident)
    return " ".join(heading.find_parent("section").get_text(" ").split())


@pytest.fixture
def console(app, admin):
    return logged_in(app, admin)


def test_the_running_total_under_and_over_the_threshold(console, dbsession, customer):
    make_catalogue(dbsession)
    save_seller(dbsession)
    cross_border_sale(dbsession, customer, 600_000)
    cross_border_sale(dbsession, customer, 390_000)
    text = section_text(console.get("/admin/tax/settings"), "cross-border")
    assert "€9900.00 this year, €0.00 last year" in text
    assert "threshold is €10000.00" in text
    assert "Under the threshold: those consumers pay your own rate." in text

    cross_border_sale(dbsession, customer, 10_001)  # 9,900.00 + 100.01 > 10,000
    text = section_text(console.get("/admin/tax/settings"), "cross-border")
    assert "€10000.01 this year" in text
    assert "The threshold is crossed" in text


def test_no_threshold_section_outside_the_eu_and_a_plain_note_without_it(console, dbsession):
    save_seller(dbsession, microSeller="")
    text = section_text(console.get("/admin/tax/settings"), "cross-border")
    assert "You do not use the threshold" in text
    save_seller(dbsession, country="US", taxId="12-3456789", microSeller="", registrations="US-WA")
    assert console.get("/admin/tax/settings").html.find(id="cross-border") is None


def test_sales_to_check_lists_flagged_orders_only(console, dbsession, customer):
    make_catalogue(dbsession)
    save_seller(dbsession)
    assert "None: the evidence" in section_text(console.get("/admin/tax/settings"), "tax-review")
    flagged = cross_border_sale(
        dbsession, customer, 1000, flags=["evidence_mismatch", "needs_review"]
    )
    fine = cross_border_sale(dbsession, customer, 1000, flags=[])
    page = console.get("/admin/tax/settings")
    listed = page.html.find(id="tax-review").find_parent("section").find_all("li")
    assert [li.get_text() for li in listed] == [f"{flagged.number}: evidence mismatch"]
    assert fine.number not in section_text(page, "tax-review")
    assert listed[0].find("a")["href"] == f"/admin/orders/{flagged.number}"


@pytest.mark.parametrize(
    ("inclusive", "said"),
    [
        ("", "Prices exclude tax: VAT or sales tax for your billing country is added"),
        ("1", "Prices include VAT or sales tax where it applies"),
    ],
)
def test_the_cart_says_whether_prices_include_tax(app, dbsession, inclusive, said):
    make_catalogue(dbsession)
    client, _cart = visitor_with_cart(app, {"themes": 1})
    assert client.get("/cart").html.find(id="cart-tax-note") is None  # no tax charged yet
    save_seller(dbsession, pricesIncludeTax=inclusive)
    assert said in client.get("/cart").html.find(id="cart-tax-note").get_text()
