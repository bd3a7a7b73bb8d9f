"""The licenses page in a real Chromium at 375 px: the key stays on one line inside its
own box (the page never scrolls sideways), the copy button copies it, a renewal near the
expiry says its price, and an error notice is an alert, never a green box."""

from __future__ import annotations

import datetime as dt

import pytest
from helpers.browser import PHONE, assert_fits_phone, check_page, log_in
from sqlalchemy import update

from cmsshop.models import License, Product


@pytest.fixture
def expiring_account(account, dbsession):
    dbsession.execute(
        update(License)
        .where(License.id == account.license.id)
        .values(expires_at=dt.datetime.now(dt.UTC) + dt.timedelta(days=12))
    )
    dbsession.execute(update(Product).where(Product.slug == "site-guard").values(duration_days=365))
    dbsession.commit()
    return account


def test_the_licenses_page_on_a_phone_copies_the_key(page, site, customer, expiring_account):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site)
    log_in(page, customer.email, "/account/licenses")
    check_page(page, "account-licenses-polish")
    page.set_viewport_size(PHONE)
    assert_fits_phone(page, "account-licenses-polish")
    key = page.locator("code.license-key")
    # One line: as tall as one line of text, however long the key.
    height, line = key.evaluate(
        "e => [e.clientHeight, parseFloat(getComputedStyle(e).lineHeight) || 24]"
    )
    assert height < 2 * line
    assert key.evaluate("e => getComputedStyle(e).whiteSpace") == "nowrap"
    button = page.get_by_role("button", name="Copy the key of SiteGuard")
    assert button.is_visible()  # shown by the script
    button.click()
    status = button.locator("xpath=following-sibling::*[@data-copy-status]")
    status.filter(has_text="Copied.").wait_for()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == expiring_account.license.key
    renew = page.get_by_role("button", name="Renew until")
    assert "49.00" in renew.inner_text()
    assert_fits_phone(page, "account-licenses-polish")


def test_an_error_notice_reads_as_an_error(page, site, admin):
    log_in(page, admin.email, lands_on="/admin")
    page.context.add_cookies(
        [{"name": "cmsshop_notice", "value": "event_cannot_reprocess", "url": site}]
    )
    page.goto("/admin")
    notice = page.get_by_role("alert").filter(has_text="Not reprocessed")
    assert notice.is_visible()
    colour = notice.evaluate("e => getComputedStyle(e).color")
    assert colour == "rgb(164, 22, 26)"  # --danger, not the success green
    page.reload()
    assert page.locator("#page-notice").count() == 0


def test_a_form_error_summary_passes_the_checks(page):
    page.goto("/register")
    page.get_by_label("Email").fill("not-an-address")
    page.get_by_label("Password").fill("long enough password")
    page.get_by_role("button", name="Create account").click()
    summary = page.get_by_role("alert")
    summary.get_by_role("link").click()  # jumps to the refused field
    assert page.evaluate("document.activeElement.id") == "f-email" or page.url.endswith("#f-email")
    check_page(page, "register-error-summary")
