"""The shop's brand (services/storefront/brand.py): the console page /admin/brand (name,
accent, home page text, the shop's one logo, featured products in order), its JSON twin
GET/PUT /api/admin/settings/brand, the accent's stylesheet, and what every page shows
of it (header logo and name, footer legal links, the home page's hero and cards)."""

from __future__ import annotations

import io
import os

import pytest
from fakes.shop import make_catalogue
from helpers.app import HASHER, ROOT
from helpers.clients import logged_in, page_client
from helpers.html import errors_of, h1_of, title_of
from PIL import Image
from sqlalchemy import select

from cmsshop.models import ProductImage, ShopFile, ShopSetting
from cmsshop.services import demo
from cmsshop.services.legal import documents
from cmsshop.services.storefront import brand
from cmsshop.services.storefront.demo import seed_demo_brand


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 20), (10, 90, 200)).save(out, "PNG")
    return out.getvalue()


def saved(dbsession) -> dict:
    dbsession.expire_all()
    found = {
        row.key: row.value
        for row in dbsession.scalars(select(ShopSetting).where(ShopSetting.key.like("brand.%")))
    }
    dbsession.commit()  # ends the read, so the app's next write is not refused on SQLite
    return found


def form_to(page, action: str, **fields):
    form = next(
        f
        for f in page.forms.values()
        if f.action.endswith(action)
        and all(f.fields.get(name) and f[name].value == value for name, value in fields.items())
    )
    return form


@pytest.fixture
def console(app, admin):
    return logged_in(app, admin)


@pytest.fixture
def products(dbsession):
    return make_catalogue(dbsession)


# --- the rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("colour", "ratio"),
    [("#ffffff", 1.0), ("#000000", 21.0), ("#1f5fbf", 6.09), ("#767676", 4.54)],
)
def test_contrast_is_wcag_s_ratio_against_white(colour, ratio):
    assert round(brand.contrast_with_white(colour), 2) == ratio


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("red", "#rrggbb"),
        ("#12345", "#rrggbb"),
        ("#1f5fbg", "#rrggbb"),
        ("1f5fbf", "#rrggbb"),
        ("#1f5fbf;}body{x", "#rrggbb"),
        ("#777777", "too light: white text on it has a contrast of 4.47:1"),
        ("#ffcc00", "at least 4.5:1"),
    ],
)
def test_an_accent_must_be_rrggbb_and_dark_enough_for_white_text(typed, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        brand.clean_accent(typed)


def test_an_accent_is_kept_in_lower_case_and_empty_means_the_default():
    assert brand.clean_accent(" #1F5FBF ") == "#1f5fbf"
    assert brand.clean_accent("") == "" and brand.clean_accent(None) == ""


@pytest.mark.parametrize(
    ("move", "expected"),
    [
        ("up", [1, 3, 2]),
        ("down", [1, 2, 3]),  # already last
        ("remove", [1, 2]),
        ("add", [1, 2, 3]),  # already there
    ],
)
def test_featured_moves(move, expected):
    assert brand.move_featured([1, 2, 3], 3, move) == expected
    assert brand.move_featured([1, 2], 9, "add") == [1, 2, 9]
    assert brand.move_featured([1, 2], 1, "up") == [1, 2]


# --- the console page ---------------------------------------------------------------------


def test_the_console_saves_the_name_accent_and_home_text(console, app, dbsession):
    page = console.get("/admin/brand")
    assert h1_of(page) == "Brand"
    form = form_to(page, "/admin/brand")
    form["shopName"] = "Pixel Works"
    form["accent"] = "#0B5D3B"
    form["headline"] = "Tools for busy web studios"
    form["intro"] = "Plugins that save you hours.\nSupported for years."
    shown = form.submit(status=303).follow()
    assert "The brand is saved." in shown.text
    assert saved(dbsession) == {
        "brand.shopName": "Pixel Works",
        "brand.accent": "#0b5d3b",
        "brand.headline": "Tools for busy web studios",
        "brand.intro": "Plugins that save you hours.\nSupported for years.",
    }
    home = page_client(app).get("/")
    assert h1_of(home) == "Tools for busy web studios"
    assert "Plugins that save you hours." in home.html.find(class_="hero-intro").get_text()
    assert title_of(home) == "Home · Pixel Works"
    assert home.html.find("a", class_="brand").get_text(strip=True) == "Pixel Works"
    sheet = home.html.find("link", href="/theme/0b5d3b.css")
    assert sheet is not None and sheet["rel"] == ["stylesheet"]
    assert home.html.find("meta", attrs={"name": "theme-color"})["content"] == "#0b5d3b"
    # Emptied again: back to the defaults (the configured site name, the default accent).
    form = form_to(console.get("/admin/brand"), "/admin/brand")
    for name in ("shopName", "accent", "headline", "intro"):
        form[name] = ""
    form.submit(status=303)
    assert saved(dbsession) == {}
    home = page_client(app).get("/")
    assert h1_of(home) == "cmsshop" and title_of(home) == "Home · cmsshop"
    assert not [link for link in home.html.find_all("link") if "/theme/" in link["href"]]
    assert home.html.find("meta", attrs={"name": "theme-color"})["content"] == "#1f5fbf"


def test_a_too_light_accent_is_refused_at_its_field_and_nothing_is_saved(console, dbsession):
    form = form_to(console.get("/admin/brand"), "/admin/brand")
    form["shopName"] = "Pixel Works"
    form["accent"] = "#f5c400"
    refused = form.submit(status=422)
    assert "too light" in errors_of(refused)["accent"]
    assert "4.5:1" in errors_of(refused)["accent"]
    # What was typed is shown again.
    assert refused.html.find(id="f-accent")["value"] == "#f5c400"
    assert refused.html.find(id="f-shopName")["value"] == "Pixel Works"
    assert saved(dbsession) == {}


def test_text_fields_are_checked(console, dbsession):
    form = form_to(console.get("/admin/brand"), "/admin/brand")
    form["shopName"] = "x" * 81
    form["headline"] = "two\nlines"
    form["intro"] = "bell\x07"
    refused = form.submit(status=422)
    assert errors_of(refused) == {
        "shopName": "at most 80 characters",
        "headline": "one line only",
        "intro": "contains characters that cannot be printed",
    }
    assert saved(dbsession) == {}


def test_the_brand_page_is_for_admins_and_its_forms_need_csrf(app, customer, console, dbsession):
    page_client(app).get("/admin/brand", status=303)  # to the login page
    logged_in(app, customer).get("/admin/brand", status=403)
    console.post("/admin/brand", {"shopName": "Evil"}, status=403)
    console.post("/admin/brand/featured", {"product": "1", "move": "add"}, status=403)
    console.post("/admin/brand/logo", upload_files=[("logo", "l.png", png())], status=403)
    assert saved(dbsession) == {}


def test_the_logo_uploaded_here_is_the_shop_s_one_logo_in_the_header(console, app, dbsession):
    page = console.get("/admin/brand")
    assert "No logo" in page.html.find(id="logo").find_parent("section").get_text()
    form = form_to(page, "/admin/brand/logo")
    form["logo"] = ("logo.svg", b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml")
    refused = form.submit(status=422)
    assert "only PNG and JPEG" in errors_of(refused)["logo"]
    dbsession.commit()
    assert dbsession.scalar(select(ShopFile)) is None

    form = form_to(console.get("/admin/brand"), "/admin/brand/logo")
    form["logo"] = ("logo.png", png(), "image/png")
    shown = form.submit(status=303).follow()
    assert "The logo is saved." in shown.text
    preview = shown.html.find("img", class_="logo-preview")["src"]
    # The same logo as the invoices' (the tax page shows it too).
    assert console.get("/admin/tax/settings").html.find("img", class_="logo-preview")["src"] == (
        preview
    )
    form = form_to(console.get("/admin/brand"), "/admin/brand")
    form["shopName"] = "Pixel Works"
    form.submit(status=303)
    home = page_client(app).get("/")
    logo = home.html.find("a", class_="brand").find("img")
    assert logo["src"] == preview and logo["alt"] == "Pixel Works"
    assert page_client(app).get(preview).body == png()

    remove = form_to(console.get("/admin/brand"), "/admin/brand/logo/remove")
    gone = remove.submit(status=303).follow()
    assert "The logo is removed." in gone.text
    assert page_client(app).get("/").html.find("a", class_="brand").find("img") is None


def test_featured_products_are_chosen_ordered_and_removed(console, app, products, dbsession):
    page = console.get("/admin/brand")
    adding = form_to(page, "/admin/brand/featured", move="add")
    options = [text for _value, _selected, text in adding["product"].options]
    assert options == ["PixelForge", "SiteGuard", "Theme Pack"]  # published ones only
    for slug in ("themes", "site-guard", "pixel-forge"):
        adding = form_to(console.get("/admin/brand"), "/admin/brand/featured", move="add")
        adding["product"] = str(products[slug].id)
        shown = adding.submit(status=303).follow()
    assert "The featured products are saved." in shown.text
    ids = {slug: product.id for slug, product in products.items()}
    assert saved(dbsession)["brand.featured"] == [
        ids["themes"],
        ids["site-guard"],
        ids["pixel-forge"],
    ]

    def names(response):
        return [a.get_text(strip=True) for a in response.html.select(".product-card h3 a")]

    assert names(page_client(app).get("/")) == ["Theme Pack", "SiteGuard", "PixelForge"]

    up = form_to(
        console.get("/admin/brand"),
        "/admin/brand/featured",
        move="up",
        product=str(ids["pixel-forge"]),
    )
    up.submit(status=303)
    remove = form_to(
        console.get("/admin/brand"),
        "/admin/brand/featured",
        move="remove",
        product=str(ids["themes"]),
    )
    shown = remove.submit(status=303).follow()
    listed = [s.get_text(strip=True) for s in shown.html.select(".featured-list .featured-name")]
    assert listed == ["PixelForge", "SiteGuard"]
    home = page_client(app).get("/")
    assert names(home) == ["PixelForge", "SiteGuard"]
    assert home.html.select(".product-card .price")[0].get_text(strip=True) == "EUR79.00"

    # A product unpublished later drops out of the home page, not out of the list.
    products["pixel-forge"].published = False
    dbsession.commit()
    assert names(page_client(app).get("/")) == ["SiteGuard"]


def test_an_unpublished_product_cannot_be_featured(console, products, dbsession):
    refused = console.post(
        "/admin/brand/featured",
        {
            "csrf_token": form_to(console.get("/admin/brand"), "/admin/brand")["csrf_token"].value,
            "product": str(products["draft"].id),
            "move": "add",
        },
        status=422,
    )
    assert "only published products" in refused.html.find(id="featured-error").get_text()
    assert saved(dbsession) == {}


def test_without_a_choice_the_home_page_shows_the_first_products(app, products):
    home = page_client(app).get("/")
    names = [a.get_text(strip=True) for a in home.html.select(".product-card h3 a")]
    assert names == ["PixelForge", "SiteGuard", "Theme Pack"]
    assert home.html.select_one(".hero a.button")["href"] == "/products"


# --- the stylesheet and the layout --------------------------------------------------------


def test_the_theme_stylesheet_is_the_accent_and_is_cached_for_good(app):
    response = page_client(app).get("/theme/0b5d3b.css")
    assert response.content_type == "text/css"
    assert response.text == ":root { --accent: #0b5d3b; }\n"
    assert response.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    for bad in ("ffcc00", "zzzzzz", "0B5D3B", "0b5d3b%7D", "12345"):
        page_client(app).get(f"/theme/{bad}.css", status=404)


def test_the_footer_links_the_published_legal_pages_and_the_buy_box_the_refunds(
    app, products, dbsession
):
    home = page_client(app).get("/")
    assert home.html.find("nav", attrs={"aria-label": "Legal"}) is None  # none published
    trust = page_client(app).get("/products/site-guard").html.find(class_="trust")
    assert trust.get_text(" ", strip=True).startswith("Secure payment by")
    assert trust.find("a") is None
    for kind, title in (("terms", "Terms of sale"), ("refunds", "Refund policy")):
        documents.publish(dbsession, kind, title=title, body="Text.", actor_name="test")
    dbsession.commit()
    footer = page_client(app).get("/").html.find("nav", attrs={"aria-label": "Legal"})
    assert [(a["href"], a.get_text()) for a in footer.find_all("a")] == [
        ("/legal/terms", "Terms of sale"),
        ("/legal/refunds", "Refund policy"),
    ]
    page = page_client(app).get("/products/site-guard")
    assert "product-price" in page.html.find(class_="price")["class"]
    assert page.html.find(class_="trust").find("a")["href"] == "/legal/refunds"


# --- the JSON API -------------------------------------------------------------------------


def test_get_shows_the_defaults(admin_app):
    body = admin_app.get("/api/admin/settings/brand").json
    assert body == {
        "shopName": "cmsshop",
        "accent": None,
        "headline": "",
        "intro": "",
        "featured": [],
        "logoUrl": None,
        "sources": dict.fromkeys(brand.FIELDS, "default"),
    }


def test_put_is_partial_and_null_resets(admin_app, products, dbsession):
    ids = [products["themes"].id, products["site-guard"].id]
    body = admin_app.put_json(
        "/api/admin/settings/brand",
        {"shopName": "Pixel Works", "accent": "#0B5D3B", "featured": ids},
    ).json
    assert body["shopName"] == "Pixel Works" and body["accent"] == "#0b5d3b"
    assert body["featured"] == ids and body["sources"]["accent"] == "saved"
    body = admin_app.put_json("/api/admin/settings/brand", {"headline": "Hello"}).json
    assert body["shopName"] == "Pixel Works" and body["headline"] == "Hello"
    body = admin_app.put_json("/api/admin/settings/brand", {"accent": None, "featured": []}).json
    assert body["accent"] is None and body["featured"] == [] and body["headline"] == "Hello"
    assert set(saved(dbsession)) == {"brand.shopName", "brand.headline"}


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"accent": "#eeeeee"}, "accent", "too light"),
        ({"accent": "blue"}, "accent", "#rrggbb"),
        ({"accent": 123}, "accent", "a string"),
        ({"featured": ["1"]}, "featured", "a list of product ids"),
        ({"featured": [True]}, "featured", "a list of product ids"),
        ({"featured": 5}, "featured", "a list of product ids"),
        ({"featured": [999999]}, "featured", "only published products"),
        ({"shopName": "x" * 81}, "shopName", "at most 80"),
        ({"logo": "x"}, "logo", "not a setting"),
    ],
)
def test_put_refuses_with_422_at_the_field(admin_app, dbsession, body, field, message):
    response = admin_app.put_json("/api/admin/settings/brand", body, status=422)
    error = response.json
    assert error["code"] == "validation_failed" and set(error) >= {"title", "hints", "supportCode"}
    assert message in error["errors"][field]
    assert saved(dbsession) == {}


def test_put_refuses_a_draft_and_repeats(admin_app, products, dbsession):
    draft, themes = products["draft"].id, products["themes"].id
    errors = admin_app.put_json(
        "/api/admin/settings/brand", {"featured": [themes, draft]}, status=422
    ).json["errors"]
    assert errors["featured"] == f"only published products can be featured (not: {draft})"
    errors = admin_app.put_json(
        "/api/admin/settings/brand", {"featured": [themes, themes]}, status=422
    ).json["errors"]
    assert errors["featured"] == "each product once"
    admin_app.put_json("/api/admin/settings/brand", [1], status=422)


def test_the_api_is_for_admins_with_csrf(app, customer_app, admin_app, testapp):
    testapp.get("/api/admin/settings/brand", status=401)
    customer_app.get("/api/admin/settings/brand", status=403)
    customer_app.put_json("/api/admin/settings/brand", {"shopName": "x"}, status=403)
    admin_app.put_json(
        "/api/admin/settings/brand",
        {"shopName": "x"},
        headers={"X-CSRF-Token": "wrong"},
        status=403,
    )


def test_a_card_shows_the_product_s_first_image(app, products, dbsession):
    variants = {
        "card": {"webp": f"{'a' * 64}.webp", "jpeg": f"{'a' * 64}.jpg", "width": 480, "height": 270}
    }
    second = {"card": {**variants["card"], "webp": f"{'b' * 64}.webp"}}
    for position, shown in ((1, second), (0, variants)):
        dbsession.add(
            ProductImage(
                product_id=products["themes"].id,
                position=position,
                alt="The theme pack's colour swatches",
                source_sha256=str(position) * 64,
                width=1600,
                height=900,
                variants=shown,
            )
        )
    dbsession.commit()
    cards = page_client(app).get("/").html.select(".product-card")
    pictures = {card.h3.get_text(strip=True): card.find("picture") for card in cards}
    assert pictures["SiteGuard"] is None
    picture = pictures["Theme Pack"]
    assert picture.source["srcset"] == f"/media/{'a' * 64}.webp"
    image = picture.img
    assert image["src"] == f"/media/{'a' * 64}.jpg" and image["alt"] == ""
    assert (image["width"], image["height"], image["loading"]) == ("480", "270", "lazy")


def test_brand_text_is_shown_as_text(admin_app, app):
    hostile = '</title><script>alert(1)</script><img src=x onerror="alert(2)">'
    admin_app.put_json(
        "/api/admin/settings/brand",
        {"shopName": hostile[:80], "headline": hostile, "intro": hostile},
    )
    home = page_client(app).get("/")
    assert not [tag for tag in home.html.find_all("script") if "alert" in (tag.string or "")]
    assert not home.html.find_all(onerror=True)
    assert h1_of(home) == hostile
    assert title_of(home) == "Home · " + hostile[:80]


def test_each_change_is_in_the_audit_log_and_listed_on_the_page(console, admin_app, admin):
    admin_app.put_json("/api/admin/settings/brand", {"shopName": "Pixel Works", "intro": "Hi"})
    admin_app.put_json("/api/admin/settings/brand", {"shopName": "Pixel Works"})  # no change
    admin_app.put_json("/api/admin/settings/brand", {"accent": "#0b5d3b"})
    page = console.get("/admin/brand")
    listed = [
        " ".join(li.get_text(" ", strip=True).split())
        for li in page.html.select(".brand-changes li")
    ]
    assert len(listed) == 2
    assert listed[0].endswith(f"accent colour (user:{admin.id})")
    assert listed[1].endswith(f"shop name, introduction (user:{admin.id})")


def test_the_demo_shop_has_a_brand_and_a_second_seed_keeps_the_seller_s(
    app, dbsession, storage_dir
):
    report = demo.seed_demo(dbsession, {"cmsshop.storage_dir": str(storage_dir)}, HASHER)
    dbsession.commit()
    assert "brand: headline, introduction, 3 featured products" in report
    home = page_client(app).get("/")
    assert h1_of(home) == "Software that keeps your websites safe and fast"
    names = [a.get_text(strip=True) for a in home.html.select(".product-card h3 a")]
    assert names == ["SiteGuard Pro", "PixelForge Desktop", "Theme Pack"]
    brand.save_brand(dbsession, {**brand.current_values(dbsession), "headline": "Mine"})
    dbsession.commit()
    assert seed_demo_brand(dbsession) == []
    assert saved(dbsession)["brand.headline"] == "Mine"


def test_the_default_accent_is_the_stylesheet_s():
    with open(os.path.join(ROOT, "cmsshop", "static", "site.css"), encoding="utf-8") as sheet:
        assert f"--accent: {brand.DEFAULT_ACCENT};" in sheet.read()
