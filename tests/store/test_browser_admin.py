"""The admin console's dashboard, catalogue and error pages in a real Chromium: log in,
create a product with a EUR price, upload a release through the form with the
JavaScript progress path, and accessibility (axe-core) and phone width on every page."""

from __future__ import annotations

from fakes.shop import make_catalogue
from helpers.browser import check_page, log_in
from helpers.notices import wait_for_notice
from sqlalchemy import select

from cmsshop.models import Release
from cmsshop.services.support.codes import record_server_error


def test_admin_creates_a_product_and_uploads_a_release(page, app, admin, dbsession, tmp_path):
    make_catalogue(dbsession)
    log_in(page, admin.email, "/admin")
    assert page.get_by_role("heading", level=1).inner_text() == "Admin dashboard"
    check_page(page, "admin-dashboard")

    page.get_by_role("link", name="Products", exact=True).last.click()
    page.wait_for_url("**/admin/products")
    check_page(page, "admin-products")
    page.get_by_role("link", name="Add a product").click()

    # First with mistakes: errors per field, what was typed kept.
    page.get_by_label("Name", exact=True).fill("Browser Tool")
    page.get_by_label("Slug").fill("Browser Tool")
    page.get_by_label("EUR (EUR)").fill("19.999")
    page.get_by_role("button", name="Create product").click()
    assert page.locator("#f-slug-error").is_visible()
    assert page.locator("#f-price_EUR-error").inner_text() == "at most 2 decimals"
    assert page.get_by_label("Name", exact=True).input_value() == "Browser Tool"
    check_page(page, "admin-product-errors")

    page.get_by_label("Slug").fill("browser-tool")
    page.get_by_label("EUR (EUR)").fill("19.99")
    # Not published yet: it has no release (test_browser_media.py publishes one).
    page.get_by_role("button", name="Create product").click()
    wait_for_notice(page, "product_created")
    page.wait_for_url("**/admin/products/browser-tool/edit")
    assert page.get_by_label("EUR (EUR)").input_value() == "19.99"
    check_page(page, "admin-product-edit")

    # The upload goes through upload.js: XMLHttpRequest with the CSRF header and a
    # progress bar, then the product page with its notice.
    upload = tmp_path / "browser-tool-1.0.zip"
    upload.write_bytes(b"PK" + b"\x00" * 300_000)
    page.get_by_label("Version", exact=True).fill("1.0")
    page.get_by_label("File").set_input_files(str(upload))
    with page.expect_request(lambda r: r.url.endswith("/releases")) as sent:
        page.get_by_role("button", name="Upload release").click()
    request = sent.value
    assert request.headers.get("x-csrf-token"), "upload.js sends the token in the header"
    assert request.headers.get("x-requested-with") is None
    wait_for_notice(page, "release_uploaded")
    page.wait_for_url("**/admin/products/browser-tool/edit")
    assert page.get_by_role("status").first.inner_text() == "The release was uploaded."
    row = page.locator("#release-list tbody tr").first
    assert row.locator("th").inner_text() == "1.0"
    assert "browser-tool-1.0.zip" in row.inner_text()
    dbsession.rollback()
    assert dbsession.scalar(select(Release.size)) == upload.stat().st_size

    # The same version again: the error shows in the form, in place.
    page.get_by_label("Version", exact=True).fill("1.0")
    page.get_by_label("File").set_input_files(str(upload))
    page.get_by_role("button", name="Upload release").click()
    page.locator("#f-version-error").wait_for()
    assert "already has a release 1.0" in page.locator("#f-version-error").inner_text()
    check_page(page, "admin-product-upload-error")


def test_currency_and_error_pages(page, app, admin, dbsession):
    make_catalogue(dbsession)
    record_server_error(
        app.registry,
        support_code="CS-TEST-0001",
        request_id="abc123",
        method="GET",
        path="/products/x",
        status=500,
        error_code="internal_error",
        exception_type="builtins.RuntimeError",
        traceback='Traceback (most recent call last):\n  File "x.py", line 1\n' + "x" * 400,
    )
    log_in(page, admin.email, "/admin")
    page.goto("/admin/currencies")
    check_page(page, "admin-currencies")
    page.get_by_role("link", name="Add a currency").click()
    page.get_by_label("Code").fill("CHF")
    page.get_by_label("Name").fill("Swiss franc")
    page.get_by_label("Symbol").fill("Fr.")
    page.get_by_label("Enabled (offered in the shop)").uncheck()
    page.get_by_label("Default currency").check()
    page.get_by_role("button", name="Add currency").click()
    assert "must be enabled" in page.locator(".form-errors").inner_text()
    check_page(page, "admin-currency-errors")
    page.get_by_label("Enabled (offered in the shop)").check()
    page.get_by_label("Default currency").uncheck()
    page.get_by_role("button", name="Add currency").click()
    wait_for_notice(page, "currency_created")
    page.wait_for_url("**/admin/currencies")
    page.get_by_role("link", name="Edit CHF").click()
    check_page(page, "admin-currency-edit")

    page.get_by_role("link", name="Errors").click()
    check_page(page, "admin-errors")
    page.get_by_label("Support code").fill("cs-test-0001")
    page.get_by_role("button", name="Look up").click()
    assert "GET /products/x" in page.locator(".facts").inner_text()
    check_page(page, "admin-error-record")
