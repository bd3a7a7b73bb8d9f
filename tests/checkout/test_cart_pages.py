"""The cart page and its forms through WebTest: no JavaScript needed, every refusal shown
beside its field on the page (422) and never carried in a URL, the guest's checkout
form, and a free order going straight to its return page."""

from __future__ import annotations

import pytest
from fakes.shop import make_catalogue
from helpers.checkout import cart_count, fill_billing
from helpers.clients import logged_in, page_client
from helpers.coupons import make_coupon
from sqlalchemy import func, select, update

from cmsshop.models import Order, ProductPrice


@pytest.fixture
def shop(dbsession):
    return make_catalogue(dbsession)


def form_to(page, action: str):
    return next(form for form in page.forms.values() if form.action == action)


def add_from_product_page(client, slug: str, quantity: str | None = None, status=303):
    form = form_to(client.get(f"/products/{slug}"), "/checkout")
    if quantity is not None:
        form["quantity"] = quantity
    # The form's "Add to cart" button posts it to /cart/add (its formaction).
    return client.post("/cart/add", dict(form.submit_fields()), status=status)


def test_add_update_and_remove_without_javascript(app, shop, dbsession):
    client = page_client(app)
    add_from_product_page(client, "site-guard", "2")
    add_from_product_page(client, "themes")
    page = client.get("/cart")
    assert page.html.find(id="cart-total").text == "EUR117.00"  # 2 x 49 + 19
    assert "One license for 6 sites" in page.text
    update = form_to(page, "/cart/update")  # the first line's form
    update["quantity"] = "3"
    assert update.submit(name="action", value="update", status=303).location.endswith("/cart")
    page = client.get("/cart")
    assert page.html.find(id="cart-total").text == "EUR166.00"
    remove = [f for f in page.forms.values() if f.action == "/cart/update"][1]
    remove.submit(name="action", value="remove", status=303)
    assert "Theme Pack" not in client.get("/cart").text
    assert cart_count(dbsession) == 1


@pytest.mark.parametrize("quantity", ["0", "-1", "abc", "101", "1e3", "9" * 20])
def test_a_bad_quantity_is_shown_beside_the_field(app, shop, quantity):
    client = page_client(app)
    add_from_product_page(client, "site-guard", "1")
    page = client.get("/cart")
    form = form_to(page, "/cart/update")
    form["quantity"] = quantity
    again = form.submit(name="action", value="update", status=422)
    field = again.html.find("input", attrs={"name": "quantity"})
    assert field["aria-invalid"] == "true"
    assert again.html.find(id=field["aria-describedby"]).text
    assert "?" not in again.request.url
    assert client.get("/cart").html.find("input", attrs={"name": "quantity"})["value"] == "1"


def test_too_many_from_the_product_page(app, shop, dbsession):
    client = page_client(app)
    refused = add_from_product_page(client, "site-guard", "500", status=422)
    assert refused.html.find("input", attrs={"name": "quantity"})["aria-invalid"] == "true"
    add_from_product_page(client, "themes")
    again = add_from_product_page(client, "themes", status=422)  # a download once
    assert "one per order" in again.text


def test_coupon_form(app, shop, dbsession):
    make_coupon(dbsession, "HALF", percent_off=50)
    client = page_client(app)
    add_from_product_page(client, "site-guard")
    form = form_to(client.get("/cart"), "/cart/coupon")
    form["code"] = "WRONG"
    refused = form.submit(name="action", value="apply", status=422)
    field = refused.html.find("input", attrs={"name": "code"})
    assert field["aria-invalid"] == "true" and field["value"] == "WRONG"
    form = form_to(refused, "/cart/coupon")
    form["code"] = "half"
    form.submit(name="action", value="apply", status=303)
    page = client.get("/cart")
    assert page.html.find(id="cart-total").text == "EUR24.50"
    assert "HALF" in page.text
    form_to(page, "/cart/coupon").submit(name="action", value="remove", status=303)
    assert client.get("/cart").html.find(id="cart-total").text == "EUR49.00"


def test_a_price_change_is_shown_and_accepted(app, shop, dbsession):
    client = page_client(app)
    add_from_product_page(client, "site-guard")
    dbsession.execute(
        update(ProductPrice)
        .where(ProductPrice.product_id == shop["site-guard"].id, ProductPrice.currency == "EUR")
        .values(amount=3900)
    )
    dbsession.commit()
    page = client.get("/cart")
    assert "Price changed: was EUR49.00, now EUR39.00" in page.text
    pay = form_to(page, "/cart/checkout")
    pay["email"] = "g@example.com"
    refused = client.post("/cart/checkout", dict(pay.submit_fields()), status=422)
    assert "changed" in refused.text
    assert dbsession.scalar(select(func.count()).select_from(Order)) == 0
    form_to(page, "/cart/accept-prices").submit(status=303)
    assert "Price changed" not in client.get("/cart").text


def test_guest_pays_from_the_cart_page(make_app, shop, dbsession):
    # development.ini's payments: no provider account, the verified event is the payment.
    app = make_app(
        **{
            "cmsshop.environment": "development",
            "cmsshop.payments.trust_verified_events": "true",
        }
    )
    client = page_client(app)
    add_from_product_page(client, "themes")
    pay = form_to(client.get("/cart"), "/cart/checkout")
    pay["email"] = "not an address"
    refused = pay.submit(status=422)
    assert refused.html.find("input", attrs={"name": "email"})["aria-invalid"] == "true"
    pay = form_to(refused, "/cart/checkout")
    pay["email"] = "guest@example.com"
    no_country = pay.submit(status=422)
    assert no_country.html.find("select", attrs={"name": "country"})["aria-invalid"] == "true"
    pay = form_to(no_country, "/cart/checkout")
    assert pay["email"].value == "guest@example.com"
    fill_billing(pay)
    sandbox = pay.submit(status=303)
    assert "/checkout/sandbox/ORD-" in sandbox.location
    number = sandbox.location.rsplit("/", 1)[1]
    assert client.get(f"/checkout/success?order={number}").status_code == 200
    assert "Your cart is empty" in client.get("/cart").text
    # The guest's browser may pay it in the development sandbox, as a customer would.
    page = sandbox.follow()
    simulate = form_to(page, f"/checkout/sandbox/{number}/simulate")
    back = simulate.submit(status=303)
    assert back.location.endswith(f"/checkout/success?order={number}")
    assert "Thank you, your order is paid" in back.follow().text


def test_an_empty_cart_posts_nothing(app, shop, dbsession):
    client = page_client(app)
    token = form_to(client.get("/products/themes"), "/checkout")["csrf_token"].value
    for action in ("/cart/update", "/cart/coupon", "/cart/accept-prices", "/cart/checkout"):
        client.post(action, {"csrf_token": token, "product": "themes"}, status=303)
    client.post("/cart/add", {"product": "themes"}, status=403)  # no CSRF token
    assert cart_count(dbsession) == 0


def test_a_logged_in_buy_takes_the_quantity_straight_to_payment(app, shop, customer, dbsession):
    client = logged_in(app, customer)
    form = form_to(client.get("/products/site-guard"), "/checkout")
    form["quantity"] = "3"
    fill_billing(form)
    sandbox = form.submit(status=303)
    assert "/checkout/sandbox/ORD-" in sandbox.location
    dbsession.commit()
    order = dbsession.scalar(select(Order))
    assert [(item.product_slug, item.quantity) for item in order.items] == [("site-guard", 3)]
    assert order.total == 3 * 4900
    again = form_to(client.get("/products/site-guard"), "/checkout")
    again["quantity"] = "0"
    refused = again.submit(status=422)
    assert refused.html.find("input", attrs={"name": "quantity"})["aria-invalid"] == "true"
