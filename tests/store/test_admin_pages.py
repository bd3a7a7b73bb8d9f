"""The admin console's dashboard, catalogue pages (products, prices, releases,
currencies) and error lookup, through WebTest: figures, forms on the JSON routes'
schemas and services, the upload form on the streaming release reader, permissions,
CSRF and hostile input."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest
import webtest
from fakes.shop import make_order
from helpers.clients import logged_in, new_client, page_client
from helpers.confirm import cancel_link, confirm, confirmation_of
from helpers.html import errors_of, title_of
from helpers.notices import flashed
from pyramid.config import Configurator
from sqlalchemy import select

from cmsshop.models import (
    Currency,
    PaymentEvent,
    Product,
    Release,
    SupportTicket,
)
from cmsshop.services import reports
from cmsshop.services.store.currencies import major_amount_text, parse_major_amount
from cmsshop.util import utcnow

PAGES = [
    "/admin",
    "/admin/errors",
    "/admin/errors/CS-AAAA-BBBB",
    "/admin/products",
    "/admin/products/new",
    "/admin/products/site-guard/edit",
    "/admin/currencies",
    "/admin/currencies/new",
    "/admin/currencies/EUR/edit",
]
POSTS = [
    "/admin/products/new",
    "/admin/products/site-guard/edit",
    "/admin/products/site-guard/archive",
    "/admin/products/site-guard/unarchive",
    "/admin/products/site-guard/releases",
    "/admin/currencies/new",
    "/admin/currencies/EUR/edit",
]


def fresh_session(dbsession):
    dbsession.rollback()
    dbsession.expire_all()
    return dbsession


# --- permissions and CSRF ----------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_log_in(app, catalogue):
    client = page_client(app)
    for path in PAGES:
        response = client.get(path, status=303)
        assert "/login?next=" in response.location, path


def test_customers_get_the_403_page_everywhere(app, customer, catalogue):
    client = logged_in(app, customer.email)
    for path in PAGES:
        response = client.get(path, status=403)
        assert response.content_type == "text/html", path
        assert "Admin dashboard" not in response.text
    token = client.get("/login").forms[0]["csrf_token"].value
    for path in POSTS:
        client.post(path, {"csrf_token": token, "name": "x"}, status=403)


def test_forms_without_the_csrf_token_are_refused(admin_pages, catalogue, dbsession):
    fields = {"name": "Forged", "slug": "forged"}
    admin_pages.post("/admin/products/new", fields, status=403)
    admin_pages.post("/admin/products/new", {**fields, "csrf_token": "wrong"}, status=403)
    admin_pages.post("/admin/products/site-guard/archive", {}, status=403)
    admin_pages.post("/admin/currencies/EUR/edit", {"name": "X", "symbol": "X"}, status=403)
    admin_pages.post(
        "/admin/products/site-guard/releases",
        {"version": "9.9"},
        upload_files=[("file", "a.zip", b"data")],
        status=403,
    )
    # The upload route's header path refuses a wrong header too.
    admin_pages.post(
        "/admin/products/site-guard/releases",
        {"version": "9.9"},
        upload_files=[("file", "a.zip", b"data")],
        headers={"X-CSRF-Token": "forged"},
        status=403,
    )
    fresh_session(dbsession)
    assert dbsession.scalar(select(Product).where(Product.slug == "forged")) is None
    assert not dbsession.scalar(select(Product.archived).where(Product.slug == "site-guard"))
    assert dbsession.scalar(select(Release.id)) is None


# --- dashboard ---------------------------------------------------------------------------


def _mark_paid(dbsession, order, paid_at):
    order.status = "paid"
    order.paid_at = paid_at
    dbsession.commit()


def test_dashboard_counts_and_revenue_per_currency(admin_pages, catalogue, customer, dbsession):
    now = utcnow()
    day_start, month_start = reports.utc_periods(now)
    earlier_this_month = month_start if day_start > month_start else None
    # Today: two EUR orders (49.00 + 79.00) and one USD order (54.00).
    _mark_paid(dbsession, make_order(dbsession, customer, ["site-guard"]), now)
    _mark_paid(dbsession, make_order(dbsession, customer, ["pixel-forge"]), now)
    _mark_paid(dbsession, make_order(dbsession, customer, currency="USD"), now)
    if earlier_this_month is not None:
        # Earlier this month, not today: counted in the month only.
        _mark_paid(dbsession, make_order(dbsession, customer, ["themes"]), earlier_this_month)
    # Last month, and refunded ones: not this month's revenue.
    _mark_paid(dbsession, make_order(dbsession, customer), month_start - dt.timedelta(days=1))
    refunded = make_order(dbsession, customer, status="refunded")
    refunded.paid_at = now
    make_order(dbsession, customer, status="pending")
    make_order(dbsession, customer, status="pending", currency="USD")
    make_order(dbsession, customer, status="needs_review")
    for i, status in enumerate(["error", "confirm_failed", "rejected", "processed", "error"]):
        dbsession.add(
            PaymentEvent(
                provider="cardprovider",
                event_id=f"evt_{i}",
                event_type="checkout.session.completed",
                payload_sha256="0" * 64,
                payload="{}",
                status=status,
            )
        )
    for i, status in enumerate(("open", "open", "pending", "closed")):
        dbsession.add(
            SupportTicket(
                number=f"TCK-TEST{i}", user_id=customer.id, subject="Help", body="?", status=status
            )
        )
    dbsession.commit()

    response = admin_pages.get("/admin")
    assert title_of(response).startswith("Admin dashboard")
    html = response.html
    assert html.find(id="orders-today").get_text(strip=True) == "3"
    month_count = "4" if earlier_this_month is not None else "3"
    assert html.find(id="orders-month").get_text(strip=True) == month_count
    eur = html.find("tr", attrs={"data-currency": "EUR"})
    usd = html.find("tr", attrs={"data-currency": "USD"})
    assert eur.find(class_="revenue-today").get_text(strip=True) == "EUR128.00"
    eur_month = "EUR147.00" if earlier_this_month is not None else "EUR128.00"
    assert eur.find(class_="revenue-month").get_text(strip=True) == eur_month
    assert usd.find(class_="revenue-today").get_text(strip=True) == "USD54.00"
    assert html.find("tr", attrs={"data-currency": "GBP"}) is None
    pending = html.find(id="orders-pending")
    assert pending.find(class_="figure").get_text(strip=True) == "2"
    assert pending.find("a")["href"] == "/admin/orders?status=pending"
    review = html.find(id="orders-needs_review")
    assert review.find(class_="figure").get_text(strip=True) == "1"
    assert review.find("a")["href"] == "/admin/orders?status=needs_review"
    failed = html.find(id="failed-events")
    assert failed.find(class_="figure").get_text(strip=True) == "4"
    links = {a["href"] for a in failed.find_all("a")}
    assert "/admin/payments/events?status=confirm_failed" in links
    tickets = html.find(id="open-tickets")
    assert tickets.find(class_="figure").get_text(strip=True) == "2"
    assert tickets.find("a")["href"] == "/admin/tickets"
    assert html.find("a", attrs={"aria-current": "page"}).get_text(strip=True) == "Dashboard"


def test_the_dashboard_shows_payments_waiting_for_the_worker(admin_pages, dbsession):
    assert admin_pages.get("/admin").html.find(id="payment-queue") is None
    now = utcnow()
    for i, (status, due) in enumerate(
        [
            ("received", now),  # just queued: waiting, not late
            ("confirm_failed", now + dt.timedelta(seconds=30)),  # a retry ahead
            ("received", now - dt.timedelta(minutes=5)),  # no worker took it
            ("processed", None),  # done: not waiting
        ]
    ):
        dbsession.add(
            PaymentEvent(
                provider="cardprovider",
                event_id=f"evt_q{i}",
                event_type="checkout.session.completed",
                received_at=now - dt.timedelta(minutes=10 - i),
                payload_sha256="0" * 64,
                payload="{}",
                status=status,
                next_attempt_at=due,
            )
        )
    dbsession.commit()
    card = admin_pages.get("/admin").html.find(id="payment-queue")
    assert card.find(class_="figure").get_text(strip=True) == "3"
    oldest = (now - dt.timedelta(minutes=10)).strftime("%Y-%m-%d %H:%M")
    assert f"The oldest arrived {oldest} UTC." in card.get_text(" ", strip=True)
    alert = card.find(attrs={"role": "alert"}).get_text(" ", strip=True)
    assert alert.startswith("1 should have been taken") and "worker" in alert


def test_the_dashboard_works_with_every_module_off(make_app, admin):
    app = make_app(**{"cmsshop.modules": ""})
    response = logged_in(app, admin.email).get("/admin")
    assert "No paid orders this month yet." in response.text
    nav = response.html.find("nav", attrs={"aria-label": "Administration"})
    assert nav.find("a", href="/admin/products") is None
    assert nav.find("a", href="/admin/errors") is not None


def test_utc_periods():
    now = dt.datetime(2026, 3, 15, 1, 30, tzinfo=dt.timezone(dt.timedelta(hours=5)))
    day, month = reports.utc_periods(now)
    assert day == dt.datetime(2026, 3, 14, tzinfo=dt.UTC)
    assert month == dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


# --- errors ------------------------------------------------------------------------------


def test_error_lookup_shows_the_record_of_a_real_server_error(make_app, admin, dbsession):
    app = make_app()

    def boom(request):
        raise RuntimeError("the secret detail")

    config = Configurator(registry=app.registry)
    config.add_route("test.boom", "/boom-page")
    config.add_view(boom, route_name="test.boom")
    config.commit()
    failing = page_client(app).get("/boom-page", status=500)
    code = failing.html.find(class_="support-code").get_text(strip=True)

    client = logged_in(app, admin.email)
    form = client.get("/admin/errors").forms["error-lookup"]
    form["code"] = f"  {code.lower()} "
    response = form.submit()
    assert title_of(response).startswith(f"Server error {code}")
    assert "GET /boom-page" in response.text
    assert "builtins.RuntimeError" in response.text
    traceback = response.html.find("pre", class_="traceback").get_text()
    assert "the secret detail" in traceback and "Traceback" in traceback
    assert client.get(f"/admin/errors/{code}").html.find("pre", class_="traceback")
    # The JSON route finds the same record.
    api = new_client(app)
    api.login(admin.email)
    assert api.get(f"/api/admin/errors/{code}").json["supportCode"] == code


@pytest.mark.parametrize(
    "path",
    [
        "/admin/errors/CS-0000-0000",
        "/admin/errors/not-a-code",
        "/admin/errors/" + "A" * 3000,
        "/admin/errors?code=CS-0000-0000",
        "/admin/errors?code=%27%20OR%201=1--",
        "/admin/errors/%E2%80%AE",
    ],
)
def test_unknown_or_malformed_codes_are_a_404_page(admin_pages, path):
    response = admin_pages.get(path, status=404)
    assert response.content_type == "text/html"
    assert "No server error was recorded" in response.text


@pytest.mark.parametrize(
    "path",
    ["/admin/errors?code=%00", "/admin/errors?code=a&code=b", "/admin/errors/%00", "/admin?x=%ff"],
)
def test_hostile_error_lookups_are_4xx(admin_pages, path):
    response = admin_pages.get(path, expect_errors=True)
    assert 400 <= response.status_int < 500 or response.status_int == 200, path
    assert response.status_int != 500


def test_an_error_record_with_an_empty_code_shows_the_form(admin_pages):
    response = admin_pages.get("/admin/errors?code=")
    assert response.html.find("form", action="/admin/errors") is not None


# --- money in major units ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "decimals", "amount"),
    [("49", 2, 4900), ("49.9", 2, 4990), ("0.01", 2, 1), ("1200", 0, 1200), ("1.2345", 4, 12345)],
)
def test_major_amounts_convert_exactly(raw, decimals, amount):
    assert parse_major_amount(raw, decimals) == amount
    assert parse_major_amount(major_amount_text(amount, decimals), decimals) == amount


@pytest.mark.parametrize("raw", ["49.999", "-1", "1,50", "1e3", "", ".5", "٣", "0x10", "9" * 40])
def test_bad_major_amounts_are_refused(raw):
    with pytest.raises(ValueError):
        parse_major_amount(raw, 2)


# --- products ----------------------------------------------------------------------------


def test_product_list_shows_drafts_and_archived_and_searches(admin_pages, catalogue, dbsession):
    catalogue["themes"].archived = True
    dbsession.commit()
    response = admin_pages.get("/admin/products")
    assert title_of(response).startswith("Products")
    names = [a.get_text(strip=True) for a in response.html.select("tbody th a")]
    assert names == ["Draft", "PixelForge", "SiteGuard", "Theme Pack"]
    assert "archived" in response.text and "draft" in response.text
    found = admin_pages.get("/admin/products?q=pixel")
    assert [a.get_text(strip=True) for a in found.html.select("tbody th a")] == ["PixelForge"]
    paged = admin_pages.get("/admin/products?perPage=2&page=2")
    assert len(paged.html.select("tbody tr")) == 2
    assert paged.html.find("a", rel="prev") is not None
    assert "No product matches" in admin_pages.get("/admin/products?q=zzz").text


@pytest.mark.parametrize(
    "query", ["page=0", "page=x", "perPage=1000", "q=%00", "q=" + "x" * 300, "page=1&page=2"]
)
def test_product_list_refuses_bad_queries_with_a_4xx_page(admin_pages, catalogue, query):
    response = admin_pages.get(f"/admin/products?{query}", expect_errors=True)
    assert 400 <= response.status_int < 500
    assert response.content_type == "text/html"


def test_create_a_product_with_prices_in_major_units(admin_pages, catalogue, dbsession):
    form = admin_pages.get("/admin/products/new").forms["product-form"]
    # Enabled currencies only: GBP is disabled.
    assert "price_EUR" in form.fields and "price_USD" in form.fields
    assert "price_GBP" not in form.fields
    form["name"] = "Backup Buddy"
    form["slug"] = "backup-buddy"
    form["summary"] = "Backups"
    form["description"] = "# Title\r\n\r\n*Fast*"
    # Not published: a new product has no release yet (test_guardrails.py).
    form["published"] = False
    form["licensed"] = True
    form["max_activations"] = "3"
    form["duration_days"] = ""
    form["price_EUR"] = "49.9"
    form["price_USD"] = ""
    response = form.submit(status=303)
    assert response.location.endswith("/admin/products/backup-buddy/edit")
    assert flashed(response) == "product_created"
    page = response.follow()
    assert "The product was created." in page.text
    assert page.forms["product-form"]["price_EUR"].value == "49.90"
    product = fresh_session(dbsession).scalar(select(Product).where(Product.slug == "backup-buddy"))
    assert not product.published and product.licensed and product.max_activations == 3
    assert product.duration_days is None
    assert product.description == "# Title\n\n*Fast*"
    # Its headings sit below the product page's own <h1>.
    assert "<h2>Title</h2>" in product.description_html
    assert [(p.currency, p.amount) for p in product.prices] == [("EUR", 4990)]


def test_product_form_errors_per_field_keep_the_input(admin_pages, catalogue, dbsession):
    form = admin_pages.get("/admin/products/new").forms["product-form"]
    form["name"] = ""
    form["slug"] = "Not A Slug"
    form["summary"] = "kept summary"
    form["max_activations"] = "many"
    form["duration_days"] = "0"
    form["price_EUR"] = "49.999"
    form["price_USD"] = "-5"
    response = form.submit(status=422)
    errors = errors_of(response)
    assert set(errors) == {
        "name",
        "slug",
        "max_activations",
        "duration_days",
        "price_EUR",
        "price_USD",
    }
    assert errors["price_EUR"] == "at most 2 decimals"
    assert errors["max_activations"] == "must be an integer"
    kept = response.forms["product-form"]
    assert kept["summary"].value == "kept summary"
    assert kept["slug"].value == "Not A Slug"
    assert kept["price_EUR"].value == "49.999"
    assert fresh_session(dbsession).scalar(select(Product).where(Product.name == "")) is None


def test_a_taken_slug_is_a_slug_error(admin_pages, catalogue):
    form = admin_pages.get("/admin/products/new").forms["product-form"]
    form["name"] = "Copy"
    form["slug"] = "site-guard"
    response = form.submit(status=409)
    assert "site-guard" in errors_of(response)["slug"]


def test_edit_a_product_changes_prices_and_renames(admin_pages, catalogue, dbsession):
    page = admin_pages.get("/admin/products/site-guard/edit")
    assert title_of(page).startswith("Edit SiteGuard")
    form = page.forms["product-form"]
    assert form["price_EUR"].value == "49.00" and form["price_USD"].value == "54.00"
    assert form["published"].checked and form["licensed"].checked
    assert form["max_activations"].value == "3" and form["duration_days"].value == "365"
    form["price_EUR"] = "59"
    form["price_USD"] = ""  # no USD price any more
    form["slug"] = "site-guard-pro"
    form["duration_days"] = ""  # perpetual
    response = form.submit(status=303)
    assert response.location.endswith("/admin/products/site-guard-pro/edit")
    assert flashed(response) == "product_saved"
    product = fresh_session(dbsession).scalar(
        select(Product).where(Product.slug == "site-guard-pro")
    )
    assert [(p.currency, p.amount) for p in product.prices] == [("EUR", 5900)]
    assert product.duration_days is None and product.max_activations == 3


def test_a_price_in_a_disabled_currency_stays_editable(admin_pages, catalogue, dbsession):
    dbsession.add(Product(slug="gbp-only", name="GBP only"))
    dbsession.commit()
    product = dbsession.scalar(select(Product).where(Product.slug == "gbp-only"))
    from cmsshop.models import ProductPrice

    dbsession.add(ProductPrice(product_id=product.id, currency="GBP", amount=1250))
    dbsession.commit()
    form = admin_pages.get("/admin/products/gbp-only/edit").forms["product-form"]
    assert form["price_GBP"].value == "12.50"
    form["name"] = "GBP only, renamed"
    form.submit(status=303)
    fresh_session(dbsession)
    amounts = dbsession.scalars(
        select(ProductPrice.amount).where(ProductPrice.product_id == product.id)
    ).all()
    assert amounts == [1250]


def archived(dbsession, slug: str) -> bool:
    return fresh_session(dbsession).scalar(select(Product.archived).where(Product.slug == slug))


def test_archive_and_unarchive(admin_pages, app, catalogue, dbsession):
    page = admin_pages.get("/admin/products/themes/edit")
    asked = page.forms["archive-form"].submit(status=200)
    text = confirmation_of(asked)
    assert "Archive the product “Theme Pack” (themes)" in text
    assert "its URL /products/themes will answer 404" in text and "unarchive" in text
    assert cancel_link(asked) == "/admin/products/themes/edit"
    # The first post changed nothing; the confirm post without the token is refused.
    assert not archived(dbsession, "themes")
    page_client(app).get("/products/themes", status=200)
    form = asked.forms["confirm-form"]
    admin_pages.post(form.action, {"confirm": "1"}, status=403)
    assert not archived(dbsession, "themes")
    admin_pages.get(cancel_link(asked), status=200)
    response = confirm(asked)
    assert flashed(response) == "product_archived"
    page = response.follow()
    assert "This product is archived" in page.text
    assert archived(dbsession, "themes")
    page_client(app).get("/products/themes", status=404)
    # Unarchiving takes nothing away: no confirm step.
    page.forms["archive-form"].submit(status=303)
    assert not archived(dbsession, "themes")


def test_unpublishing_a_product_is_confirmed_with_the_form_kept(
    admin_pages, app, catalogue, dbsession
):
    form = admin_pages.get("/admin/products/themes/edit").forms["product-form"]
    form["published"] = False
    form["name"] = "Theme Pack 2"
    asked = form.submit(status=200)
    text = confirmation_of(asked)
    assert "Save the product “Theme Pack” as unpublished" in text
    assert "its URL /products/themes will answer 404" in text
    assert cancel_link(asked) == "/admin/products/themes/edit"
    product = fresh_session(dbsession).scalar(select(Product).where(Product.slug == "themes"))
    assert product.published and product.name == "Theme Pack"
    carried = asked.forms["confirm-form"]
    assert carried["name"].value == "Theme Pack 2" and "published" not in carried.fields
    admin_pages.post(
        carried.action,
        {n: carried[n].value for n in carried.fields if n != "csrf_token"},
        status=403,
    )
    done = confirm(asked)
    assert flashed(done) == "product_saved"
    product = fresh_session(dbsession).scalar(select(Product).where(Product.slug == "themes"))
    assert not product.published and product.name == "Theme Pack 2"
    assert [(p.currency, p.amount) for p in product.prices] == [("EUR", 1900), ("USD", 2100)]
    page_client(app).get("/products/themes", status=404)
    # Saving a draft (or publishing) asks nothing.
    form = admin_pages.get("/admin/products/themes/edit").forms["product-form"]
    form["summary"] = "Still a draft"
    form.submit(status=303)


@pytest.mark.parametrize(
    "path",
    [
        "/admin/products/no-such/edit",
        "/admin/products/%00/edit",
        "/admin/products/" + "a" * 500 + "/edit",
        "/admin/products/..%2f..%2fetc/edit",
    ],
)
def test_unknown_products_are_4xx_pages(admin_pages, catalogue, path):
    response = admin_pages.get(path, expect_errors=True)
    assert response.status_int in (400, 404)
    assert response.content_type == "text/html"


def test_hostile_product_forms_are_4xx(admin_pages, catalogue, dbsession):
    token = admin_pages.get("/admin/products/new").forms["product-form"]["csrf_token"].value
    cases = [
        {"name": "N\x00ul", "slug": "nul"},
        {"name": "x" * 5000, "slug": "long"},
        {"name": "Big", "slug": "big", "price_EUR": "9" * 15},
        {"name": "Huge", "slug": "huge", "max_activations": "9" * 30},
        {"name": "Neg", "slug": "neg", "duration_days": "-3"},
        {"name": "Ctl", "slug": "ctl", "summary": "a\x1bb"},
        {"name": ["a", "b"], "slug": "twice\x00"},
    ]
    for fields in cases:
        response = admin_pages.post(
            "/admin/products/new", {**fields, "csrf_token": token}, expect_errors=True
        )
        assert 400 <= response.status_int < 500, fields
    # Bytes that are not UTF-8: WebOb decodes them as U+FFFD, never a 500.
    raw = b"csrf_token=" + token.encode() + b"&name=%ff%fe&slug=bad"
    response = admin_pages.post(
        "/admin/products/new",
        raw,
        content_type="application/x-www-form-urlencoded",
        expect_errors=True,
    )
    assert response.status_int < 500
    assert fresh_session(dbsession).scalar(select(Product).where(Product.slug == "big")) is None


# --- releases ----------------------------------------------------------------------------


def test_upload_a_release_through_the_form(admin_pages, catalogue, dbsession, storage_dir):
    page = admin_pages.get("/admin/products/site-guard/edit")
    form = page.forms["release-upload"]
    assert form.enctype == "multipart/form-data"
    assert form.action == "/admin/products/site-guard/releases"
    # The token is the form's first field (the no-JavaScript path reads it from there).
    assert list(form.fields)[0] == "csrf_token"
    data = b"release bytes " * 1000
    form["version"] = "2.0.0"
    form["channel"] = "stable"
    form["changelog"] = "## New\n\n- **faster** scans"
    form["file"] = webtest.Upload("../../site guard.zip", data)
    response = form.submit(status=303)
    assert response.location.endswith("/admin/products/site-guard/edit")
    assert flashed(response) == "release_uploaded"
    page = response.follow()
    assert "The release was uploaded." in page.text
    row = page.html.find(id="release-list").find("tbody").find("tr")
    assert row.find("th").get_text(strip=True) == "2.0.0"
    release = fresh_session(dbsession).scalar(select(Release))
    assert release.size == len(data)
    assert release.sha256 == hashlib.sha256(data).hexdigest()
    assert release.file_name == "site guard.zip"
    assert (storage_dir / release.storage_path).read_bytes() == data
    assert release.channel == "stable" and "<strong>faster</strong>" in release.changelog_html
    # The store's product page shows the changelog of its latest release.
    product_page = webtest.TestApp(admin_pages.app).get("/products/site-guard")
    assert "<strong>faster</strong>" in product_page.html.find(class_="changelog").decode()


def test_upload_with_the_csrf_header_never_parses_the_form(admin_pages, catalogue, dbsession):
    """The upload.js path: the token in X-CSRF-Token, the body streamed."""
    page = admin_pages.get("/admin/products/site-guard/edit")
    token = page.forms["release-upload"]["csrf_token"].value
    response = admin_pages.post(
        "/admin/products/site-guard/releases",
        [("csrf_token", token), ("version", "3.0")],
        upload_files=[("file", "s.zip", b"abc")],
        headers={"X-CSRF-Token": token},
        status=303,
    )
    assert flashed(response) == "release_uploaded"
    assert fresh_session(dbsession).scalar(select(Release.version)) == "3.0"


@pytest.mark.parametrize(
    ("version", "content", "field", "status"),
    [
        ("1.0", b"again", "version", 409),
        ("", b"x", "version", 422),
        ("bad version!", b"x", "version", 422),
        ("4.0", b"", "file", 422),
        ("5.0", b"x" * 2048, "file", 413),
    ],
)
def test_upload_errors_are_form_errors(
    make_app, admin, catalogue, dbsession, version, content, field, status
):
    app = make_app(**{"cmsshop.max_upload_bytes": "1024000"})
    client = logged_in(app, admin.email)
    form = client.get("/admin/products/site-guard/edit").forms["release-upload"]
    form["version"] = "1.0"
    form["file"] = webtest.Upload("a.zip", b"first")
    form.submit(status=303)
    if status == 413:
        app = make_app(**{"cmsshop.max_upload_bytes": "1024"})
        client = logged_in(app, admin.email)
    form = client.get("/admin/products/site-guard/edit").forms["release-upload"]
    form["version"] = version
    form["file"] = webtest.Upload("b.zip", content)
    response = form.submit(expect_errors=True)
    assert response.status_int == status
    if status == 413 and response.html.find(id="release-upload") is None:
        # The declared body was over the limit: refused at the edge, before any view.
        assert response.content_type == "text/html"
    else:
        assert field in errors_of(response), response.text
        assert response.forms["release-upload"]["version"].value == version
    assert [r.version for r in fresh_session(dbsession).scalars(select(Release))] == ["1.0"]


def test_upload_to_an_unknown_product_is_404(admin_pages, catalogue):
    token = admin_pages.get("/admin/products").html.find("input", attrs={"name": "csrf_token"})
    token = token["value"]
    admin_pages.post(
        "/admin/products/nope/releases",
        {"version": "1.0"},
        upload_files=[("file", "a", b"x")],
        headers={"X-CSRF-Token": token},
        status=404,
    )


# --- currencies --------------------------------------------------------------------------


def test_currency_list_and_create(admin_pages, catalogue, dbsession):
    response = admin_pages.get("/admin/currencies")
    assert title_of(response).startswith("Currencies")
    codes = [th.get_text(strip=True) for th in response.html.select("#currency-list tbody th")]
    assert codes == ["EUR", "GBP", "USD"]
    form = admin_pages.get("/admin/currencies/new").forms["currency-form"]
    assert form["enabled"].checked and form["decimals"].value == "2"
    form["code"] = "jpy"
    form["name"] = "Yen"
    form["symbol"] = "¥"
    form["decimals"] = "0"
    response = form.submit(status=303)
    assert response.location.endswith("/admin/currencies")
    assert flashed(response) == "currency_created"
    assert "The currency was added." in response.follow().text
    yen = fresh_session(dbsession).get(Currency, "JPY")
    assert (yen.decimals, yen.enabled, yen.is_default, yen.symbol) == (0, True, False, "¥")
    # A whole-number currency takes whole amounts on the product form.
    form = admin_pages.get("/admin/products/site-guard/edit").forms["product-form"]
    form["price_JPY"] = "1200.5"
    assert errors_of(form.submit(status=422))["price_JPY"] == "no decimals allowed"
    form["price_JPY"] = "1200"
    form.submit(status=303)
    from cmsshop.models import ProductPrice

    assert (
        fresh_session(dbsession).scalar(
            select(ProductPrice.amount).where(ProductPrice.currency == "JPY")
        )
        == 1200
    )


def test_currency_form_errors(admin_pages, catalogue, dbsession):
    form = admin_pages.get("/admin/currencies/new").forms["currency-form"]
    form["code"] = "EUR"
    form["name"] = "Euro again"
    form["symbol"] = "€"
    response = form.submit(status=409)
    assert "exists" in errors_of(response)["code"]
    form = response.forms["currency-form"]
    form["code"] = "E1"
    form["name"] = ""
    form["decimals"] = "9"
    response = form.submit(status=422)
    assert set(errors_of(response)) == {"code", "name", "decimals"}
    assert response.forms["currency-form"]["code"].value == "E1"
    form = response.forms["currency-form"]
    form["code"] = "CHF"
    form["name"] = "Franc"
    form["decimals"] = "2"
    form["enabled"] = False
    form["default"] = True
    response = form.submit(status=409)
    assert "must be enabled" in response.html.find(class_="form-errors").text
    assert fresh_session(dbsession).get(Currency, "CHF") is None


def test_edit_a_currency_and_the_default_rules(admin_pages, catalogue, dbsession):
    page = admin_pages.get("/admin/currencies/eur/edit")
    assert title_of(page).startswith("Edit EUR")
    form = page.forms["currency-form"]
    assert "decimals" not in form.fields
    form["enabled"] = False
    response = form.submit(status=409)
    assert "cannot be disabled" in response.html.find(class_="form-errors").text
    assert not response.forms["currency-form"]["enabled"].checked  # as typed
    assert fresh_session(dbsession).get(Currency, "EUR").enabled
    # Make USD the default: EUR stops being it.
    form = admin_pages.get("/admin/currencies/USD/edit").forms["currency-form"]
    form["name"] = "US dollar"
    form["default"] = True
    form.submit(status=303)
    fresh_session(dbsession)
    assert dbsession.get(Currency, "USD").is_default and dbsession.get(Currency, "USD").name == (
        "US dollar"
    )
    assert not dbsession.get(Currency, "EUR").is_default
    form = admin_pages.get("/admin/currencies/USD/edit").forms["currency-form"]
    form["symbol"] = ""
    assert "symbol" in errors_of(form.submit(status=422))


def test_disabling_a_currency_is_confirmed(admin_pages, catalogue, dbsession):
    form = admin_pages.get("/admin/currencies/USD/edit").forms["currency-form"]
    form["enabled"] = False
    form["symbol"] = "US$"
    asked = form.submit(status=200)
    text = confirmation_of(asked)
    assert "Disable USD (USD): the shop stops offering it" in text
    assert "Prices already set in USD and past orders in it stay" in text
    assert cancel_link(asked) == "/admin/currencies/USD/edit"
    usd = fresh_session(dbsession).get(Currency, "USD")
    assert usd.enabled and usd.symbol == "USD"
    carried = asked.forms["confirm-form"]
    assert "enabled" not in carried.fields and carried["symbol"].value == "US$"
    admin_pages.post(
        carried.action,
        {n: carried[n].value for n in carried.fields if n != "csrf_token"},
        status=403,
    )
    assert fresh_session(dbsession).get(Currency, "USD").enabled
    admin_pages.get(cancel_link(asked), status=200)
    done = confirm(asked)
    assert flashed(done) == "currency_saved"
    usd = fresh_session(dbsession).get(Currency, "USD")
    assert not usd.enabled and usd.symbol == "US$"
    # Enabling it again asks nothing.
    form = admin_pages.get("/admin/currencies/USD/edit").forms["currency-form"]
    form["enabled"] = True
    form.submit(status=303)
    assert fresh_session(dbsession).get(Currency, "USD").enabled


@pytest.mark.parametrize("code", ["XXX", "eu", "%00%00%00", "E%C3%A9R", "EURO"])
def test_unknown_currencies_are_4xx(admin_pages, catalogue, code):
    response = admin_pages.get(f"/admin/currencies/{code}/edit", expect_errors=True)
    assert response.status_int in (400, 404)
