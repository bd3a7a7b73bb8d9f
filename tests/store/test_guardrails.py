"""The store's guardrails: a product is published only with a stable release; product
descriptions' headings sit below the page's <h1>; unpublishing or archiving a product
that people bought warns, on the confirm step, what they keep."""

from __future__ import annotations

import pytest
from helpers.html import errors_of, h1_of
from helpers.notices import flashed
from helpers.purchases import make_purchase, openapi_validator
from helpers.store import add_currencies, add_product, add_release
from sqlalchemy import select

from cmsshop.models import Product
from cmsshop.services import demo
from cmsshop.services.accounts.users import PasswordHasher

PRODUCTS = "/api/admin/products"


@pytest.fixture
def currencies(dbsession):
    add_currencies(dbsession)


def is_published(dbsession, slug) -> bool:
    dbsession.rollback()
    return dbsession.scalar(select(Product.published).where(Product.slug == slug))


# --- publishing needs a release ----------------------------------------------------------


def test_creating_a_published_product_is_409_and_makes_nothing(admin_app, currencies, dbsession):
    for licensed in (True, False):
        body = {"slug": "tool", "name": "Tool", "published": True}
        body["licensing"] = {"licensed": licensed}
        response = admin_app.post_json(PRODUCTS, body, status=409)
        assert response.json["code"] == "product_has_no_release"
        assert "stable release" in response.json["message"]
        assert response.json["hints"] and response.json["supportCode"]
        schema = openapi_validator(admin_app, PRODUCTS, "post", "409")
        assert not [e.message for e in schema.iter_errors(response.json)]
    dbsession.rollback()
    assert dbsession.scalar(select(Product.id)) is None


def test_publishing_waits_for_a_stable_release(admin_app, testapp, currencies, dbsession):
    admin_app.post_json(PRODUCTS, {"slug": "tool", "name": "Tool"}, status=201)
    url = f"{PRODUCTS}/tool"
    assert admin_app.patch_json(url, {"published": True}, status=409).json["code"] == (
        "product_has_no_release"
    )
    # A beta is not what the store offers: still refused.
    add_release(dbsession, "tool", "2.0b1", channel="beta")
    admin_app.patch_json(url, {"published": True, "name": "Renamed"}, status=409)
    assert not is_published(dbsession, "tool")
    assert admin_app.get(url).json["name"] == "Tool"  # the refused PATCH changed nothing
    add_release(dbsession, "tool", "1.0")
    assert admin_app.patch_json(url, {"published": True}).json["published"] is True
    testapp.get("/api/store/products/tool")
    # Archived and published at once is not offered to anyone: no release needed.
    admin_app.post_json(PRODUCTS, {"slug": "old", "name": "Old"}, status=201)
    admin_app.patch_json(f"{PRODUCTS}/old", {"published": True, "archived": True}, status=200)


def test_a_product_published_before_the_rule_can_still_be_edited(admin_app, currencies, dbsession):
    add_product(dbsession, "legacy", licensed=True)  # published, no release
    body = admin_app.patch_json(f"{PRODUCTS}/legacy", {"name": "Legacy 2", "published": True})
    assert body.json["name"] == "Legacy 2" and body.json["published"] is True


def test_the_console_says_why_it_cannot_publish(admin_pages, currencies, dbsession):
    form = admin_pages.get("/admin/products/new").forms["product-form"]
    form["name"] = "Tool"
    form["slug"] = "tool"
    form["published"] = True
    response = form.submit(status=409)
    assert errors_of(response)["published"].startswith("Upload a stable release first")
    assert response.forms["product-form"]["name"].value == "Tool"
    form = response.forms["product-form"]
    form["published"] = False
    assert flashed(form.submit(status=303)) == "product_created"

    form = admin_pages.get("/admin/products/tool/edit").forms["product-form"]
    form["published"] = True
    response = form.submit(status=409)
    assert "published" in errors_of(response)
    assert not is_published(dbsession, "tool")
    add_release(dbsession, "tool")
    form = admin_pages.get("/admin/products/tool/edit").forms["product-form"]
    form["published"] = True
    assert flashed(form.submit(status=303)) == "product_saved"
    assert is_published(dbsession, "tool")


# --- headings in descriptions ------------------------------------------------------------


def test_description_headings_move_below_the_pages_h1(admin_app, testapp, currencies, dbsession):
    description = "# Features\n\n## Firewall\n\n#### Deep\n\n###### Deepest\n\nText"
    admin_app.post_json(
        PRODUCTS, {"slug": "tool", "name": "Tool", "description": description}, status=201
    )
    add_release(dbsession, "tool")
    body = admin_app.patch_json(f"{PRODUCTS}/tool", {"published": True}).json
    html = body["descriptionHtml"]
    assert "<h2>Features</h2>" in html and "<h3>Firewall</h3>" in html
    assert "<h5>Deep</h5>" in html and "<h6>Deepest</h6>" in html  # capped at h6
    assert "<h1>" not in html
    page = testapp.get("/products/tool")
    assert h1_of(page) == "Tool"
    # A change of the description renders it again, shifted.
    body = admin_app.patch_json(f"{PRODUCTS}/tool", {"description": "# Again"}).json
    assert body["descriptionHtml"] == "<h2>Again</h2>\n"


def test_other_markdown_keeps_its_headings(admin_app, currencies):
    # Articles are pages of their own: their "#" stays as it was written.
    body = admin_app.post_json(
        "/api/admin/articles", {"slug": "a", "title": "A", "body": "# One"}, status=201
    ).json
    assert body["bodyHtml"] == "<h1>One</h1>\n"


def test_the_demo_shop_is_seeded_through_the_same_rules(dbsession, app):
    demo.seed_demo(dbsession, app.registry.settings, PasswordHasher("cheapest"))
    dbsession.commit()
    products = {p.slug: p for p in dbsession.scalars(select(Product))}
    assert "<h2>SiteGuard Pro</h2>" in products["site-guard-pro"].description_html
    assert "<h1>" not in products["site-guard-pro"].description_html
    for product in products.values():
        assert product.published == bool(product.releases), product.slug
    assert not products["support-plan"].published


# --- unpublishing what people bought ----------------------------------------------------


def confirm_text(response) -> str:
    return response.html.select_one("#confirm-consequences").get_text(" ", strip=True)


def test_unpublishing_a_bought_product_says_what_buyers_keep(
    admin_pages, dbsession, customer, customer_app, other_customer, storage_dir
):
    purchase = make_purchase(dbsession, customer, storage_dir)
    make_purchase(dbsession, other_customer, storage_dir)  # another product's buyer
    slug = purchase.product.slug
    customer_app.post(f"/api/dashboard/downloads/{purchase.entitlement.id}/license")
    form = admin_pages.get(f"/admin/products/{slug}/edit").forms["product-form"]
    form["published"] = False
    response = form.submit(status=200)
    text = confirm_text(response)
    assert "1 buyer has it" in text
    assert "their downloads keep working" in text
    assert "their 1 license key keeps activating and validating" in text
    assert is_published(dbsession, slug)  # nothing changed yet
    confirm = response.forms["confirm-form"]
    assert flashed(confirm.submit(status=303)) == "product_saved"
    assert not is_published(dbsession, slug)


def test_archiving_warns_too_and_a_product_nobody_bought_has_no_warning(
    admin_pages, dbsession, customer, storage_dir, currencies
):
    purchase = make_purchase(dbsession, customer, storage_dir)
    page = admin_pages.get(f"/admin/products/{purchase.product.slug}/edit")
    response = page.forms["archive-form"].submit(status=200)
    assert "1 buyer has it" in confirm_text(response)
    add_product(dbsession, "unsold")
    page = admin_pages.get("/admin/products/unsold/edit")
    response = page.forms["archive-form"].submit(status=200)
    assert "buyer" not in confirm_text(response)
    form = admin_pages.get("/admin/products/unsold/edit").forms["product-form"]
    form["published"] = False
    assert "buyer" not in confirm_text(form.submit(status=200))
