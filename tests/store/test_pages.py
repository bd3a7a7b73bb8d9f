"""The store's pages and the checkout hand-off, through WebTest: the product list (search,
paging, currency), a product's page and its buy form, the POST to /checkout on the JSON
route's service, the development sandbox page and the provider's return pages, which
only ever read."""

from __future__ import annotations

import pytest
import webtest
from fakes.shop import make_order, order_status
from fakes.stripe_api import closed_port_url
from helpers.app import PASSWORD, TEST_SECRET
from helpers.checkout import fill_billing, order_count
from helpers.clients import logged_in, page_client
from helpers.html import title_of
from sqlalchemy import select

from cmsshop.models import Order, Product, Release
from cmsshop.services.docs.markdown import render_markdown
from cmsshop.util import utcnow


def card_names(response) -> list[str]:
    return [h.get_text(strip=True) for h in response.html.select(".cards .card h2")]


def buy_form(response):
    """The product page's buy form, its billing country chosen when the customer has
    none saved (a visitor's form has no billing fields: the cart asks for them)."""
    form = next(form for form in response.forms.values() if form.action == "/checkout")
    if "country" in form.fields and not form["country"].value:
        fill_billing(form)
    return form


@pytest.fixture
def shop(catalogue, dbsession):
    """The fake catalogue, SiteGuard with a description and a release."""
    product = catalogue["site-guard"]
    product.summary = "Keeps sites safe"
    product.description = "**Fast** scans.\n\n<script>alert(1)</script>"
    product.description_html = render_markdown(product.description)
    dbsession.add(
        Release(
            product_id=product.id,
            version="2.1.0",
            file_name="site-guard-2.1.0.zip",
            storage_path="releases/x",
            size=3 * 1024 * 1024,
            sha256="0" * 64,
            released_at=utcnow(),
        )
    )
    dbsession.commit()
    return catalogue


# --- the product list --------------------------------------------------------------------


def test_products_list_shows_published_products_with_prices(app, shop):
    response = page_client(app).get("/products")
    assert response.content_type == "text/html"
    assert title_of(response) == "Products · cmsshop"
    assert len(response.html.find_all("h1")) == 1
    assert card_names(response) == ["PixelForge", "SiteGuard", "Theme Pack"]  # never Draft
    link = response.html.find("a", string="SiteGuard")
    assert link["href"] == "/products/site-guard"
    card = link.find_parent(class_="card")
    assert "Keeps sites safe" in card.text
    assert card.find(class_="price").get_text(strip=True) == "EUR49.00 · USD54.00"
    options = [o["value"] for o in response.html.find("select", id="f-currency").find_all("option")]
    assert options == ["", "EUR", "USD"]  # enabled currencies only (GBP is not)
    assert response.html.find("label", attrs={"for": "f-q"}) is not None


def test_products_search_and_empty_results(app, shop):
    client = page_client(app)
    response = client.get("/products", {"q": "pixel"})
    assert card_names(response) == ["PixelForge"]
    assert response.html.find("input", id="f-q")["value"] == "pixel"
    assert title_of(response).startswith("Products matching")
    response = client.get("/products", {"q": "nothing like this"})
    assert card_names(response) == []
    assert "No product matches" in response.text
    # An empty search and a blank currency choice mean "all".
    assert len(card_names(client.get("/products?q=&currency="))) == 3


def test_products_paging_keeps_the_other_parameters(app, shop):
    client = page_client(app)
    first = client.get("/products", {"perPage": "2", "q": "e"})
    assert card_names(first) == ["PixelForge", "SiteGuard"]
    following = first.html.find("a", rel="next")["href"]
    assert "q=e" in following and "page=2" in following
    second = client.get(following)
    assert card_names(second) == ["Theme Pack"]
    assert second.html.find("a", rel="prev") is not None
    for page in ("9", "9" * 40):  # past the end: an empty page, as in the API
        beyond = client.get("/products", {"page": page})
        assert card_names(beyond) == [] and "no products on this page" in beyond.text


def test_products_in_one_currency(app, shop):
    client = page_client(app)
    response = client.get("/products", {"currency": "usd"})
    selected = response.html.find("select", id="f-currency").find("option", selected=True)
    assert selected["value"] == "USD"
    site_guard = response.html.find("a", string="SiteGuard")
    assert site_guard["href"] == "/products/site-guard?currency=USD"
    assert site_guard.find_parent(class_="card").find(class_="price").text == "USD54.00"
    pixel = response.html.find("a", string="PixelForge").find_parent(class_="card")
    assert "Not sold in this currency" in pixel.text


@pytest.mark.parametrize(
    "query",
    [
        "currency=GBP",  # not enabled
        "currency=XXX",
        "currency=EURO",
        "page=0",
        "page=-1",
        "page=abc",
        "perPage=1000",
        "q=%00",
        "q=" + "a" * 300,
        "q=a&q=b",
        "currency=%00",
        "q=%FF",
    ],
)
def test_hostile_list_queries_are_a_4xx_page(app, shop, query):
    response = page_client(app).get(f"/products?{query}", status="4*")
    assert response.content_type == "text/html"
    assert response.html.find(class_="support-code") is not None
    assert "Traceback" not in response.text


def test_no_products_says_so(app):
    response = page_client(app).get("/products")
    assert "No products are for sale yet." in response.text


# --- a product's page --------------------------------------------------------------------


def test_product_page(app, shop):
    response = page_client(app).get("/products/site-guard")
    assert title_of(response) == "SiteGuard · cmsshop"
    assert response.html.h1.get_text(strip=True) == "SiteGuard"
    assert len(response.html.find_all("h1")) == 1
    about = response.html.find("section", attrs={"aria-labelledby": "about"})
    assert about.find("strong").get_text() == "Fast"  # the sanitised HTML, as HTML
    assert about.find("script") is None and "alert(1)" not in str(about.find_all("script"))
    assert response.html.find(class_="price").get_text(strip=True) == "EUR49.00 · USD54.00"
    licensing = response.html.find("section", attrs={"aria-labelledby": "licensing"}).text
    assert "up to 3 sites" in licensing and "365 days" in licensing
    release = response.html.find("section", attrs={"aria-labelledby": "release"}).text
    assert "2.1.0" in release and "3.1 MB" in release  # 3 MiB, in decimal units
    form = buy_form(response)
    assert form["product"].value == "site-guard"
    assert form["currency"].value == "EUR"  # the default currency
    assert [value for value, _, _ in form["currency"].options] == ["EUR", "USD"]
    assert form["provider"].options[0][0] == "cardprovider"
    assert form["csrf_token"].value
    assert response.html.find("label", attrs={"for": "f-currency"}) is not None


def test_product_page_in_a_chosen_currency(app, shop):
    response = page_client(app).get("/products/site-guard?currency=USD")
    assert response.html.find(class_="price").get_text(strip=True) == "USD54.00"
    assert buy_form(response)["currency"].value == "USD"
    response = page_client(app).get("/products/pixel-forge?currency=USD")
    assert "Not sold in USD" in response.text


def test_perpetual_unlicensed_product(app, shop):
    response = page_client(app).get("/products/themes")
    licensing = response.html.find("section", attrs={"aria-labelledby": "licensing"}).text
    assert "No license key needed" in licensing and "Perpetual" in licensing
    assert "No release has been published yet." in response.text


def test_unpublished_archived_and_unknown_products_are_a_404_page(app, shop, dbsession):
    product = dbsession.scalar(select(Product).where(Product.slug == "themes"))
    product.archived = True
    dbsession.commit()
    client = page_client(app)
    for path in (
        "/products/draft",
        "/products/themes",
        "/products/no-such-thing",
        "/products/" + "x" * 500,
        "/products/site-guard%20",
    ):
        response = client.get(path, status=404)
        assert response.content_type == "text/html", path
        assert title_of(response).startswith("Not found"), path
    assert client.get("/products/%00", status=400).content_type == "text/html"
    for query in ("currency=GBP", "currency=%00", "currency=a&currency=b"):
        response = client.get(f"/products/site-guard?{query}", status="4*")
        assert response.content_type == "text/html"


# --- buying ------------------------------------------------------------------------------


def test_anonymous_buyers_get_a_cart_and_may_log_in_from_it(app, shop, customer, dbsession):
    client = page_client(app)
    form = buy_form(client.get("/products/site-guard"))
    form["quantity"] = "2"
    response = form.submit(status=303)
    assert response.location.endswith("/cart")
    cart = response.follow()
    assert "SiteGuard" in cart.text and cart.html.find("input", attrs={"name": "email"})
    assert cart.html.find("a", href="/login?next=/cart") is not None
    login = client.get("/login?next=/cart")
    assert login.html.find("input", attrs={"name": "next"})["value"] == "/cart"
    form = login.forms[1] if login.forms[0].action == "/logout" else login.forms[0]
    form["email"] = customer.email
    form["password"] = PASSWORD
    assert form.submit(status=303).location.endswith("/cart")
    # Logged in, the cart is still there (no e-mail field now) and nothing was ordered.
    mine = client.get("/cart")
    assert "SiteGuard" in mine.text and not mine.html.find("input", attrs={"name": "email"})
    assert mine.html.find("input", attrs={"name": "quantity"})["value"] == "2"
    assert order_count(dbsession) == 0


def test_buying_without_the_csrf_token_is_refused(app, shop, customer, dbsession):
    client = logged_in(app, customer)
    fields = {"product": "site-guard", "currency": "EUR", "provider": "cardprovider"}
    response = client.post("/checkout", fields, status=403)
    assert response.content_type == "text/html"
    client.post("/checkout", {**fields, "csrf_token": "forged"}, status=403)
    assert order_count(dbsession) == 0


def test_a_bad_currency_is_a_field_error_keeping_the_choice(app, shop, customer, dbsession):
    client = logged_in(app, customer)
    form = buy_form(client.get("/products/site-guard"))
    form["currency"].force_value("XXX")
    response = form.submit(status=422)
    assert title_of(response) == "SiteGuard · cmsshop"
    assert "XXX is not a currency" in response.html.find(id="f-currency-error").text
    assert response.html.find("select", id="f-currency")["aria-invalid"] == "true"
    assert buy_form(response)["currency"].value == "XXX"
    # A currency of the shop the product is not sold in.
    form = buy_form(client.get("/products/pixel-forge"))
    form["currency"].force_value("USD")
    response = form.submit(status=422)
    assert "This product: not sold in USD." in response.html.find(class_="form-errors").text
    assert buy_form(response)["currency"].value == "USD"
    assert order_count(dbsession) == 0


@pytest.mark.parametrize(
    "fields",
    [
        {"currency": "eur"},
        {"currency": "E\x00R"},
        {"currency": "EUR" * 100},
        {"provider": "nosuchprovider"},
        {"provider": "x" * 100},
    ],
)
def test_hostile_buy_fields_are_a_422_form(app, shop, customer, dbsession, fields):
    client = logged_in(app, customer)
    token = buy_form(client.get("/products/site-guard"))["csrf_token"].value
    body = {"csrf_token": token, "product": "site-guard", "provider": "cardprovider", **fields}
    response = client.post("/checkout", body, status=422)
    assert response.content_type == "text/html"
    assert response.html.find(class_="form-errors") is not None
    assert order_count(dbsession) == 0


@pytest.mark.parametrize("product", ["draft", "no-such-thing", "", "\x00", "x" * 300])
def test_buying_what_is_not_for_sale_is_a_404_page(app, shop, customer, dbsession, product):
    client = logged_in(app, customer)
    token = buy_form(client.get("/products/site-guard"))["csrf_token"].value
    body = {"csrf_token": token, "product": product, "currency": "EUR"}
    response = client.post("/checkout", body, status=404)
    assert response.content_type == "text/html"
    assert order_count(dbsession) == 0


def test_buying_goes_to_the_providers_page_with_a_pending_order(
    make_app, card_settings, fake_stripe, shop, customer, dbsession
):
    app = make_app(**card_settings)
    client = logged_in(app, customer)
    form = buy_form(client.get("/products/site-guard"))
    form["currency"] = "USD"
    response = form.submit(status=303)
    assert response.location.startswith("https://checkout.stripe.test/c/pay/cs_test_")
    created = fake_stripe.created[0]
    number = created["client_reference_id"]
    assert created["success_url"] == f"http://localhost/checkout/success?order={number}"
    assert created["cancel_url"] == f"http://localhost/checkout/cancel?order={number}"
    dbsession.rollback()
    order = dbsession.scalar(select(Order))
    assert order.number == number and order.status == "pending"
    assert order.currency == "USD" and order.total == 5400 and order.user_id == customer.id


def test_too_many_pending_orders_is_a_429_page(make_app, shop, customer, dbsession):
    app = make_app(**{"cmsshop.max_pending_orders": "1"})
    client = logged_in(app, customer)
    buy_form(client.get("/products/themes")).submit(status=303)
    response = buy_form(client.get("/products/themes")).submit(status=429)
    assert response.content_type == "text/html"
    assert title_of(response).startswith("Too many unpaid orders")
    assert "Retry-After" in response.headers
    assert order_count(dbsession) == 1


def test_provider_down_is_a_503_page_and_charges_nothing(
    make_app, card_settings, shop, customer, dbsession
):
    app = make_app(**{**card_settings, "cmsshop.cardprovider.api_base": closed_port_url()})
    client = logged_in(app, customer)
    response = buy_form(client.get("/products/themes")).submit(status=503)
    assert response.content_type == "text/html"
    assert "nothing was charged" in response.text
    dbsession.rollback()
    assert [o.status for o in dbsession.scalars(select(Order))] == ["cancelled"]


# --- the sandbox page (development without provider keys) ---------------------------------


def sandbox_order(app, customer) -> tuple[webtest.TestApp, str]:
    client = logged_in(app, customer)
    response = buy_form(client.get("/products/themes")).submit(status=303)
    path = response.location.replace("http://localhost", "")
    assert path.startswith("/checkout/sandbox/ORD-")
    return client, path.rsplit("/", 1)[1]


def test_sandbox_page_explains_how_to_simulate_the_payment(app, shop, customer, dbsession):
    client, number = sandbox_order(app, customer)
    response = client.get(f"/checkout/sandbox/{number}")
    assert title_of(response) == f"Payment sandbox – order {number} · cmsshop"
    command = response.html.find("pre").get_text(strip=True)
    assert (
        command
        == f"cmsshop-admin development.ini simulate-payment {number} --provider cardprovider"
    )
    assert "pending" in response.html.find(class_="status").text
    assert response.html.find("a", href=f"/checkout/success?order={number}") is not None
    assert order_status(dbsession, number) == "pending"


def test_sandbox_page_is_the_customers_own(app, shop, customer, other_customer):
    _client, number = sandbox_order(app, customer)
    other = logged_in(app, other_customer)
    for path in (f"/checkout/sandbox/{number}", "/checkout/sandbox/ORD-NOPE"):
        assert other.get(path, status=404).content_type == "text/html"
    assert other.get("/checkout/sandbox/%00", status=400).content_type == "text/html"
    anonymous = page_client(app).get(f"/checkout/sandbox/{number}", status=303)
    assert "/login?next=" in anonymous.location


def test_sandbox_page_is_refused_in_production(make_app, shop, customer, dbsession):
    order = make_order(dbsession, customer, ("themes",))
    app = make_app(
        **{
            "cmsshop.environment": "production",
            "cmsshop.secret": TEST_SECRET,
            "cmsshop.password_hashing": "default",
            "cmsshop.base_url": "https://localhost",
        }
    )
    client = logged_in(
        app, customer, **{"wsgi.url_scheme": "https", "HTTP_ORIGIN": "https://localhost"}
    )
    response = client.get(f"/checkout/sandbox/{order.number}", status=404)
    assert response.content_type == "text/html"
    assert "not available on a production site" in response.text


# --- the provider's return pages -----------------------------------------------------------


def test_return_page_of_a_pending_order_asks_again_and_changes_nothing(
    app, shop, customer, dbsession
):
    order = make_order(dbsession, customer, ("site-guard", "themes"))
    updated = order.updated_at
    client = logged_in(app, customer)
    for _ in range(2):
        response = client.get(f"/checkout/success?order={order.number}")
        assert title_of(response) == f"Order {order.number} · cmsshop"
        # It asks again by itself (a script; no meta refresh, see checkout-status.js)
        # and offers a link to do it by hand.
        assert response.html.find("meta", attrs={"http-equiv": "refresh"}) is None
        box = response.html.find(id="order-status")
        assert box["data-status"] == "pending" and box["data-poll-seconds"] == "5"
        script = response.html.find("script")["src"]
        assert "/static/checkout-status.js?v=" in script
        again = response.html.find("a", string="check again now")
        assert again["href"] == f"/checkout/success?order={order.number}"
        assert "confirming your payment" in response.text
        assert response.html.find(class_="status").get_text(strip=True) == "pending"
        rows = [td.get_text(strip=True) for td in response.html.select("tbody td")]
        assert rows == ["SiteGuard", "EUR49.00", "Theme Pack", "EUR19.00"]
        assert "EUR68.00" in response.html.find("tfoot").text
        assert response.html.find("a", href="/account/downloads") is None
    dbsession.rollback()
    again = dbsession.scalar(select(Order).where(Order.number == order.number))
    assert again.status == "pending" and again.updated_at == updated and again.paid_at is None


def test_return_page_of_a_paid_order_links_to_the_account(app, shop, customer, dbsession):
    order = make_order(dbsession, customer, ("themes",), status="paid")
    response = logged_in(app, customer).get(f"/checkout/success?order={order.number}")
    assert response.html.find("script") is None
    assert response.html.find(id="order-status")["data-status"] == "paid"
    assert response.html.h1.get_text(strip=True) == "Thank you, your order is paid"
    assert response.html.find("a", href="/account/downloads") is not None
    assert response.html.find("a", href="/account/orders") is not None


def test_return_pages_show_only_the_customers_own_orders(
    app, shop, customer, other_customer, dbsession
):
    order = make_order(dbsession, customer, ("themes",))
    other = logged_in(app, other_customer)
    for page in ("success", "cancel"):
        for query in (
            f"order={order.number}",
            "order=ORD-UNKNOWN-00000",
            "",
            "order=",
            "order=%00",
            "order=" + "A" * 200,
            "order=%FF",
            "order=a&order=b",
        ):
            response = other.get(f"/checkout/{page}?{query}", status="4*")
            assert response.content_type == "text/html", (page, query)
    anonymous = page_client(app).get(f"/checkout/success?order={order.number}", status=303)
    assert "/login?next=" in anonymous.location


def test_cancel_page_says_nothing_was_charged(app, shop, customer, dbsession):
    order = make_order(dbsession, customer, ("site-guard",))
    response = logged_in(app, customer).get(f"/checkout/cancel?order={order.number}")
    assert title_of(response) == f"Payment cancelled – order {order.number} · cmsshop"
    assert "nothing was charged" in response.text
    assert response.html.find("a", string="Back to SiteGuard")["href"] == "/products/site-guard"
    assert order_status(dbsession, order.number) == "pending"


def test_the_list_pages_kept_reads_follow_writes_made_elsewhere(make_app, dbsession, engine):
    """The product list page keeps its currency picker and the footer's legal links per
    content version (services.store.listing.kept_per_version), and reads each card's
    first picture with the cards: a write by another process (plain SQL on another
    connection, or the console's service in another session) shows on the next page."""
    from helpers.clients import new_client
    from helpers.legal import publish_legal
    from helpers.store import add_currencies, add_product

    add_currencies(dbsession)
    add_product(dbsession, "kept-tool", prices={"EUR": 100})
    testapp = new_client(make_app(**{"cmsshop.answer_cache_ttl": "0"}))
    page = testapp.get("/products").text
    assert "US Dollar" in page and "/legal/terms" not in page
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE currencies SET name = 'Greenback' WHERE code = 'USD'")
    publish_legal(dbsession, "terms", title="Terms of sale")
    page = testapp.get("/products").text
    assert "Greenback" in page and "US Dollar" not in page
    assert "/legal/terms" in page and "Terms of sale" in page
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE currencies SET enabled = false WHERE code = 'USD'")
    assert "Greenback" not in testapp.get("/products").text
