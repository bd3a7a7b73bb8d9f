"""What the customer sees of an order with quantities and a coupon: the order and invoice
pages and their JSON (quantity, unit price, each line's share of the discount, the
coupon code), and orders and invoices from before quantities, which read as one unit at
their amount."""

from __future__ import annotations

import pytest
from fakes.shop import make_catalogue
from helpers.account_data import paid_order
from helpers.clients import logged_in
from helpers.purchases import make_purchase, openapi_validator
from sqlalchemy import select

from cmsshop.models import Invoice

QUANTITIES = {"site-guard": 3, "themes": 1}
SHARES = {"site-guard": 447, "themes": 58}  # 5.05 off 166.00


@pytest.fixture
def order(dbsession, customer):
    make_catalogue(dbsession)
    return paid_order(
        dbsession,
        customer,
        ("site-guard", "themes"),
        quantities=QUANTITIES,
        discounts=SHARES,
        coupon_code="SPRING",
    )


@pytest.fixture
def client(app, customer):
    return logged_in(app, customer)


def rows(table) -> list[list[str]]:
    return [
        [cell.get_text(" ", strip=True) for cell in row.find_all(["th", "td"])]
        for row in table.find_all("tr")
    ]


SHOWN = [
    ["Product", "Quantity", "Unit price", "Discount", "Amount"],
    ["SiteGuard", "3", "EUR49.00", "−EUR4.47", "EUR142.53"],
    ["Theme Pack", "1", "EUR19.00", "−EUR0.58", "EUR18.42"],
    ["Subtotal", "EUR166.00"],
    ["Discount (coupon SPRING )", "−EUR5.05"],
    ["Total", "EUR160.95"],
]


def test_the_order_page_shows_quantities_and_the_discount(client, order):
    listing = client.get("/account/orders")
    row = listing.html.find("a", href=f"/account/orders/{order.number}").find_parent("tr")
    assert "SiteGuard × 3, Theme Pack" in row.get_text(" ", strip=True)
    page = client.get(f"/account/orders/{order.number}")
    assert rows(page.html.find("table")) == SHOWN


def test_the_invoice_page_shows_the_same(client, order, dbsession):
    number = dbsession.scalar(select(Invoice.number).where(Invoice.order_id == order.id))
    page = client.get(f"/account/invoices/{number}")
    table = page.html.find("article", class_="invoice").find("table")
    assert rows(table) == [
        ["Item", *SHOWN[0][1:]],
        *SHOWN[1:5],
        ["Total (EUR)", "EUR160.95"],
    ]


def test_the_json_of_the_order_and_its_invoice(customer_app, order):
    body = customer_app.get("/api/dashboard/orders").json
    openapi_validator(customer_app, "/api/dashboard/orders", "get", "200").validate(body)
    placed = body["items"][0]
    assert (placed["total"], placed["discount"], placed["couponCode"]) == (16095, 505, "SPRING")
    expected = [
        {
            "product": "site-guard",
            "name": "SiteGuard",
            "quantity": 3,
            "unitAmount": 4900,
            "discount": 447,
            "amount": 14253,
        },
        {
            "product": "themes",
            "name": "Theme Pack",
            "quantity": 1,
            "unitAmount": 1900,
            "discount": 58,
            "amount": 1842,
        },
    ]
    # No tax is charged by this shop: every line is all net.
    untaxed = {"tax": 0}
    assert placed["items"] == [
        {**line, **untaxed, "net": line["amount"], "gross": line["amount"]} for line in expected
    ]
    invoices = customer_app.get("/api/dashboard/invoices").json
    openapi_validator(customer_app, "/api/dashboard/invoices", "get", "200").validate(invoices)
    assert invoices["items"][0]["lines"] == [
        {**line, **untaxed, "net": line["amount"], "taxRate": "0"} for line in expected
    ]
    # Written without a checkout (paid_order): no tax was decided, the invoice states none.
    assert invoices["items"][0]["tax"] is None


def test_an_order_from_before_quantities_reads_as_one_unit(
    client, dbsession, customer, storage_dir
):
    """make_purchase writes what the shop wrote before quantities: a line without a unit
    price, an invoice line of {product, name, amount}."""
    old = make_purchase(dbsession, customer, storage_dir, amount=4900)
    assert old.item.unit_amount is None and set(old.invoice.lines[0]) == {
        "product",
        "name",
        "amount",
    }
    one_unit = [
        ["Product", "Quantity", "Unit price", "Amount"],
        [old.product.name, "1", "EUR49.00", "EUR49.00"],
        ["Total", "EUR49.00"],
    ]
    page = client.get(f"/account/orders/{old.order.number}")
    assert rows(page.html.find("table")) == one_unit
    invoice = client.get(f"/account/invoices/{old.invoice.number}")
    table = invoice.html.find("article", class_="invoice").find("table")
    assert rows(table) == [["Item", *one_unit[0][1:]], one_unit[1], ["Total (EUR)", "EUR49.00"]]
