"""The seller gives the shop its look in a real Chromium: a logo, an accent colour and
a headline on /admin/brand, two featured products in the order they want; then the
home page shows it all, passes axe-core and never scrolls sideways on a phone."""

from __future__ import annotations

import io

from fakes.shop import make_catalogue
from helpers.browser import check_page, log_in
from helpers.notices import wait_for_notice
from PIL import Image

from cmsshop.services.store import media


def png_file(tmp_path):
    path = tmp_path / "logo.png"
    image = Image.new("RGB", (160, 48), (11, 93, 59))
    out = io.BytesIO()
    image.save(out, "PNG")
    path.write_bytes(out.getvalue())
    return path


def photo() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (1200, 800), (40, 120, 200)).save(out, "JPEG")
    return out.getvalue()


def test_the_seller_brands_the_shop_and_sees_the_home_page(page, admin, dbsession, tmp_path):
    products = make_catalogue(dbsession)
    media.add_image(dbsession, products["themes"], photo(), "Colour swatches of the theme pack")
    dbsession.commit()
    log_in(page, admin.email, "/admin/brand")
    check_page(page, "brand-console")

    page.get_by_label("Shop name").fill("Pixel Works")
    page.get_by_label("Accent colour").fill("#fde047")  # too light for white text
    page.get_by_label("Headline").fill("Tools for busy web studios")
    page.get_by_label("Introduction").fill("Plugins that save you hours, supported for years.")
    page.get_by_role("button", name="Save", exact=True).click()
    page.locator("#f-accent-error").wait_for()
    assert "too light" in page.locator("#f-accent-error").inner_text()
    check_page(page, "brand-console-refused")
    page.get_by_label("Accent colour").fill("#0b5d3b")
    page.get_by_role("button", name="Save", exact=True).click()
    wait_for_notice(page, "brand_saved")

    page.locator("#f-logo").set_input_files(str(png_file(tmp_path)))
    page.get_by_role("button", name="Upload the logo").click()
    wait_for_notice(page, "brand_logo_saved")

    for name in ("Theme Pack", "SiteGuard"):
        page.get_by_label("Feature a product").select_option(label=name)
        page.get_by_role("button", name="Add", exact=True).click()
        wait_for_notice(page, "brand_featured_changed")
    page.get_by_role("button", name="Move up: SiteGuard").click()
    wait_for_notice(page, "brand_featured_changed")
    check_page(page, "brand-console-featured")

    page.goto("/")
    assert page.locator("h1").inner_text() == "Tools for busy web studios"
    assert page.locator("header img.brand-logo").get_attribute("alt") == "Pixel Works"
    cards = page.locator(".product-card h3").all_inner_texts()
    assert cards == ["SiteGuard", "Theme Pack"]
    # Theme Pack's first image, through the media macro, actually loaded.
    picture = page.locator(".product-card picture img")
    assert picture.count() == 1
    picture.scroll_into_view_if_needed()
    page.wait_for_function("() => document.querySelector('.product-card picture img').complete")
    assert picture.evaluate("img => img.naturalWidth") > 0
    # The accent reached the buttons (rgb of #0b5d3b).
    colour = page.locator(".hero a.button").first.evaluate(
        "e => getComputedStyle(e).backgroundColor"
    )
    assert colour == "rgb(11, 93, 59)"
    check_page(page, "brand-home")

    for path, name in (("/products", "brand-products"), ("/products/site-guard", "brand-product")):
        page.goto(path)
        check_page(page, name)
