"""A seller adds a product picture in a real Chromium and sees it in the shop: the
console's image form (with its alt text), the product list's card and the product page,
each checked by axe-core and at phone widths (375 px, by check_page)."""

from __future__ import annotations

import io

from helpers.browser import PHONE, check_page, log_in
from helpers.notices import wait_for_notice
from helpers.store import add_currencies, add_product, add_release
from PIL import Image


def photo(path) -> None:
    """A 1600 × 1000 JPEG with some detail (a flat colour would hide a bad resize)."""
    image = Image.new("RGB", (1600, 1000), (30, 90, 160))
    for x in range(0, 1600, 100):
        image.paste((240, 200, 40), (x, 0, x + 50, 1000))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=80)
    path.write_bytes(out.getvalue())


def picture_loaded(page, selector: str) -> dict:
    """What the browser made of the first <img> of ``selector``: the file it chose (the
    WebP source) and its decoded size."""
    image = page.locator(selector).first
    image.scroll_into_view_if_needed()
    page.wait_for_function(
        "(s) => { const i = document.querySelector(s); "
        "return i && i.complete && i.naturalWidth > 0; }",
        arg=selector,
    )
    return image.evaluate(
        "(i) => ({src: i.currentSrc, width: i.naturalWidth, alt: i.alt, shown: i.clientWidth})"
    )


def test_seller_uploads_a_picture_and_the_shop_shows_it(page, admin, dbsession, tmp_path):
    add_currencies(dbsession)
    add_product(dbsession, "site-guard", name="SiteGuard", summary="Security for CMS sites")
    add_release(dbsession, "site-guard", "1.4.2")
    upload = tmp_path / "dashboard.jpg"
    photo(upload)

    log_in(page, admin.email, "/admin/products/site-guard/edit")
    page.get_by_label("Picture").set_input_files(str(upload))
    page.get_by_label("Description (alt text)", exact=True).fill(
        "The SiteGuard dashboard with three blocked logins"
    )
    page.get_by_role("button", name="Add image").click()
    wait_for_notice(page, "image_added")
    thumb = picture_loaded(page, "#images .image-thumb img")
    assert thumb["alt"] == "The SiteGuard dashboard with three blocked logins"
    check_page(page, "admin-product-images")

    shop = page.context.new_page()
    shop.goto(page.url.split("/admin/")[0] + "/products")
    card = picture_loaded(shop, ".card-picture img")
    assert card["src"].endswith(".webp") and card["width"] == 480
    assert card["alt"] == "The SiteGuard dashboard with three blocked logins"
    check_page(shop, "store-products-with-pictures")

    shop.get_by_role("link", name="SiteGuard").click()
    shop.wait_for_url("**/products/site-guard")
    shown = picture_loaded(shop, ".product-gallery img")
    assert shown["src"].endswith(".webp") and shown["width"] == 1200
    og = shop.locator('meta[property="og:image"]').get_attribute("content")
    assert og.startswith("http://127.0.0.1:") and og.endswith(".jpg")
    check_page(shop, "store-product-with-picture")
    shop.set_viewport_size(PHONE)
    # On a phone the picture fits the screen instead of pushing the page sideways.
    assert shop.locator(".product-gallery img").first.evaluate("(i) => i.clientWidth") <= 375
