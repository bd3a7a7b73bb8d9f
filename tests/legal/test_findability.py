"""Findability through WebTest: robots.txt, sitemap.xml (published content only), the
canonical URL and meta description of each page type, and a product's schema.org
JSON-LD, escaped so that no product text can break out of its script element."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from fakes.shop import make_catalogue
from helpers.clients import page_client
from helpers.docs import add_article
from helpers.legal import publish_legal
from helpers.store import add_product

from cmsshop.services.storefront.seo import DISALLOWED, is_disallowed

SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
HOSTILE_NAME = "</script><script>alert(1)</script>"


@pytest.fixture
def shop(dbsession):
    return make_catalogue(dbsession)


def head_meta(page, name: str) -> str | None:
    tag = page.html.head.find("meta", attrs={"name": name})
    return tag["content"] if tag else None


def canonical_of(page) -> str | None:
    link = page.html.head.find("link", rel="canonical")
    return link["href"] if link else None


def json_ld(page) -> dict:
    (script,) = page.html.find_all("script", type="application/ld+json")
    return json.loads(script.string)


def test_robots_txt(app):
    response = page_client(app).get("/robots.txt")
    assert response.content_type == "text/plain"
    lines = response.text.splitlines()
    assert lines[0] == "User-agent: *"
    for path in ("/admin", "/account", "/api", "/checkout"):
        assert f"Disallow: {path}" in lines
    assert "Sitemap: http://localhost/sitemap.xml" in lines
    assert "public" in response.headers["Cache-Control"]


def test_private_answers_ask_not_to_be_indexed(app, shop):
    """What robots.txt keeps crawlers from says noindex itself (robots.txt forbids the
    crawl, not the indexing of an address found in a link); public pages do not."""
    client = page_client(app)
    for path in ("/account/login", "/admin", "/admin/products", "/cart", "/api/health"):
        response = client.get(path, status="*")
        assert response.headers.get("X-Robots-Tag") == "noindex", path
    for path in ("/", "/products", "/products/site-guard", "/docs", "/robots.txt"):
        response = client.get(path)
        assert "X-Robots-Tag" not in response.headers, path
    # A path that only begins like a private one is public.
    assert "X-Robots-Tag" not in client.get("/accounting", status="*").headers


@pytest.mark.parametrize(
    ("path", "disallowed"),
    [
        *((path, True) for path in DISALLOWED),
        ("/admin/", True),
        ("/admin/products/7", True),
        ("/api/store/products", True),
        ("/adminx", False),  # begins with the same letters: another path
        ("/accounting", False),
        ("/cart.json", False),
        ("/Admin", False),  # paths are case-sensitive
        ("/products/admin", False),  # only at the start
        ("//admin", False),  # the path as given, not normalised
        ("/", False),
        ("", False),
    ],
)
def test_what_robots_are_kept_from(path, disallowed):
    assert is_disallowed(path) is disallowed


def test_sitemap_lists_published_content_only(app, shop, dbsession):
    add_product(dbsession, "secret-draft", published=False)
    add_product(dbsession, "old-thing", archived=True)
    add_article(dbsession, "getting-started", title="Getting started")
    add_article(dbsession, "draft-article", title="Draft", published=False)
    publish_legal(dbsession)
    response = page_client(app).get("/sitemap.xml")
    assert response.content_type == "application/xml"
    root = ET.fromstring(response.body)
    locations = [url.find(f"{SITEMAP}loc").text for url in root.findall(f"{SITEMAP}url")]
    paths = [location.removeprefix("http://localhost") for location in locations]
    assert paths[0] == "/" and "/products" in paths and "/docs" in paths
    assert "/products/site-guard" in paths and "/products/themes" in paths
    assert "/docs/getting-started" in paths and "/legal/terms" in paths
    for hidden in ("/products/secret-draft", "/products/old-thing", "/docs/draft-article"):
        assert hidden not in paths
    assert "/legal/privacy" not in paths  # never published
    assert all(location.startswith("http://localhost/") for location in locations)


def test_sitemap_leaves_out_what_a_disabled_module_serves(make_app, shop):
    app = make_app(**{"cmsshop.modules": "dashboard"})
    text = page_client(app).get("/sitemap.xml").text
    assert "/products" not in text and "/docs" not in text


def test_the_canonical_url_keeps_only_paging(app, shop):
    client = page_client(app)
    assert canonical_of(client.get("/products?utm_source=x&q=guard")) == (
        "http://localhost/products"
    )
    assert canonical_of(client.get("/products?page=2&utm_source=x")) == (
        "http://localhost/products?page=2"
    )
    assert canonical_of(client.get("/products?page=1")) == "http://localhost/products"
    assert canonical_of(client.get("/products/themes?currency=USD")) == (
        "http://localhost/products/themes"
    )
    assert canonical_of(client.get("/")) == "http://localhost/"


def test_the_canonical_url_comes_from_the_configured_base_url(make_app, shop):
    app = make_app(**{"cmsshop.base_url": "https://shop.example.com/"})
    page = page_client(app).get("/products/themes")
    assert canonical_of(page) == "https://shop.example.com/products/themes"
    robots = page_client(app).get("/robots.txt").text
    assert "Sitemap: https://shop.example.com/sitemap.xml" in robots


def test_no_canonical_on_error_and_private_pages(app, customer):
    from helpers.clients import logged_in

    client = page_client(app)
    assert canonical_of(client.get("/products/nothing-here", status=404)) is None
    assert canonical_of(logged_in(app, customer).get("/account")) is None


def test_meta_descriptions_per_page_type(app, shop, dbsession):
    add_article(dbsession, "getting-started", title="Getting started", summary="Buy and install.")
    add_product(dbsession, "described", summary="A  plugin\nthat guards sites.")
    client = page_client(app)
    product = client.get("/products/described")
    assert head_meta(product, "description") == "A plugin that guards sites."
    # A product without a summary gets the shop's description.
    assert shop_summary(dbsession, "site-guard") == ""
    plain = head_meta(client.get("/products/site-guard"), "description")
    assert head_meta(client.get("/docs/getting-started"), "description") == "Buy and install."
    home = head_meta(client.get("/"), "description")
    assert home  # the brand's intro, or a sentence naming the shop
    assert head_meta(client.get("/docs"), "description") == home == plain


def shop_summary(dbsession, slug: str) -> str:
    from sqlalchemy import select

    from cmsshop.models import Product

    return dbsession.scalar(select(Product.summary).where(Product.slug == slug))


def test_product_json_ld(app, shop):
    data = json_ld(page_client(app).get("/products/site-guard"))
    assert data["@context"] == "https://schema.org" and data["@type"] == "Product"
    assert data["name"] == "SiteGuard" or data["name"]
    assert data["url"] == "http://localhost/products/site-guard"
    offers = {offer["priceCurrency"]: offer for offer in data["offers"]}
    assert offers["EUR"]["price"] == "49.00"
    assert all(o["availability"] == "https://schema.org/InStock" for o in offers.values())
    assert all(isinstance(o["price"], str) for o in offers.values())


def test_json_ld_cannot_be_broken_out_of(app, dbsession):
    from helpers.store import add_currencies

    add_currencies(dbsession)
    add_product(
        dbsession,
        "hostile",
        name=HOSTILE_NAME,
        summary="<!-- & </SCRIPT> \u2028 '\"",
        prices={"EUR": 990},
    )
    page = page_client(app).get("/products/hostile")
    assert "<script>alert(1)" not in page.text
    assert "</script><script>" not in page.text
    scripts = page.html.find_all("script", type="application/ld+json")
    assert len(scripts) == 1
    data = json.loads(scripts[0].string)
    assert data["name"] == HOSTILE_NAME  # the text survives, escaped
    assert data["offers"][0]["price"] == "9.90"


def test_product_json_ld_names_the_first_picture(app, shop, dbsession):
    from helpers.tax import png

    from cmsshop.services.store import media

    media.add_image(dbsession, shop["site-guard"], png(1600, 900), "The dashboard")
    dbsession.commit()
    data = json_ld(page_client(app).get("/products/site-guard"))
    assert data["image"] and all(url.startswith("http://localhost/media/") for url in data["image"])
    for url in data["image"]:
        page_client(app).get(url.removeprefix("http://localhost"), status=200)


def test_the_home_page_describes_the_shop_with_the_brand_intro(app, admin_app):
    before = head_meta(page_client(app).get("/"), "description")
    assert before.endswith("software, license keys and downloads.")
    intro = "Plugins for careful site owners.\n\nMade in Berlin."
    admin_app.put_json("/api/admin/settings/brand", {"intro": intro}, status=200)
    after = head_meta(page_client(app).get("/"), "description")
    assert after == "Plugins for careful site owners. Made in Berlin."
