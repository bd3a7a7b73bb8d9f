"""The account pages in a real Chromium: every page passes check_page (axe-core, one
<h1>, no sideways scrolling on a phone), the Download button delivers the file, and an
activation is deactivated with its button."""

from __future__ import annotations

import pytest
from helpers.account_data import RELEASE_BYTES, activate
from helpers.app import serve
from helpers.browser import check_page, log_in
from helpers.notices import wait_for_notice


@pytest.fixture
def site(app):
    """The served app, with cmsshop.base_url its real address: the download button
    redirects to ``<base_url>/api/downloads/<token>``, which the browser must reach."""
    with serve(app) as url:
        app.registry.settings["cmsshop.base_url"] = url
        yield url


@pytest.fixture
def account(account, app):
    """The customer's account with two sites activated."""
    activate(app, account.license.key, "shop.example.com", "install-shop-01")
    activate(app, account.license.key, "old.example.com", "install-old-01")
    return account


def test_every_account_page_passes_the_checks(page, customer, account):
    log_in(page, customer.email, lands_on="/account")
    check_page(page, "account-overview")
    for name in ("Orders", "Invoices", "Downloads", "Licenses", "Subscriptions"):
        page.get_by_role("navigation", name="Your account").get_by_role("link", name=name).click()
        page.wait_for_url(f"**/account/{name.lower()}")
        check_page(page, f"account-{name.lower()}")
    page.goto(f"/account/orders/{account.order.number}")
    check_page(page, "account-order")
    page.goto("/account/invoices")
    page.get_by_role("link", name=account.invoice.number, exact=True).click()
    page.wait_for_url(f"**/account/invoices/{account.invoice.number}")
    check_page(page, "account-invoice")
    # Printed, the invoice leaves the navigation out.
    page.emulate_media(media="print")
    assert not page.get_by_role("navigation", name="Your account").is_visible()
    assert page.locator("article.invoice").is_visible()
    page.emulate_media(media="screen")


def test_download_button_delivers_the_file(page, customer, account, tmp_path):
    log_in(page, customer.email, lands_on="/account")
    page.goto("/account/downloads")
    assert "/api/downloads/" not in page.content()
    with page.expect_download() as download_info:
        page.get_by_role("button", name="Download SiteGuard 2.0.0").click()
    download = download_info.value
    assert download.suggested_filename == "site-guard-2.0.0.zip"
    target = tmp_path / "download.zip"
    download.save_as(target)
    assert target.read_bytes() == RELEASE_BYTES


def test_deactivate_an_activation(page, customer, account):
    log_in(page, customer.email, lands_on="/account")
    page.goto("/account/licenses")
    assert page.get_by_text("2 of 3").is_visible()
    page.get_by_role("button", name="Deactivate old.example.com").click()
    wait_for_notice(page, "activation_deactivated")
    page.wait_for_url("**/account/licenses")
    assert "deactivated" in page.locator("#page-notice").inner_text()
    assert page.get_by_role("button", name="Deactivate old.example.com").count() == 0
    assert page.get_by_role("button", name="Deactivate shop.example.com").count() == 1
    assert page.get_by_text("1 of 3").is_visible()
    check_page(page, "account-licenses-deactivated")
