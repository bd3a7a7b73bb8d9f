"""The console's coupon pages in a real Chromium: the list, the create form with its
mistakes shown in place, a coupon's page with its usage and the Pause/Resume button;
accessibility (axe-core) and phone width on every page."""

from __future__ import annotations

from fakes.shop import make_catalogue
from helpers.browser import check_page, log_in
from helpers.coupons import make_coupon, place_with_coupon
from helpers.notices import wait_for_notice


def test_admin_creates_pauses_and_reads_a_coupon(page, app, admin, customer, dbsession):
    make_catalogue(dbsession)
    make_coupon(dbsession, "WELCOME", max_redemptions=10, description="First order")
    place_with_coupon(dbsession, customer, "WELCOME", ("site-guard", "themes"))
    log_in(page, admin.email, "/admin")
    page.get_by_role("link", name="Coupons", exact=True).click()
    page.wait_for_url("**/admin/coupons")
    assert "WELCOME" in page.locator("#coupon-list").inner_text()
    check_page(page, "admin-coupons")

    page.get_by_role("link", name="New coupon").click()
    check_page(page, "admin-coupon-new")
    # First with mistakes: an error per field, what was typed kept.
    page.get_by_label("Code").fill("x")
    page.get_by_label("Kind").select_option("fixed")
    page.get_by_label("Amount off in EUR").fill("5.001")
    page.get_by_role("button", name="Create coupon").click()
    assert page.locator("#f-code-error").is_visible()
    assert page.locator("#f-amount_off_EUR-error").inner_text() == "at most 2 decimals"
    assert page.get_by_label("Amount off in EUR").input_value() == "5.001"
    check_page(page, "admin-coupon-errors")

    page.get_by_label("Code").fill("summer")
    page.get_by_label("Amount off in EUR").fill("5")
    page.get_by_label("Minimum order in EUR").fill("20")
    page.get_by_label("Valid until (UTC, optional)").fill("2030-08-31T23:59")
    page.get_by_label("Theme Pack (themes)").check()
    page.get_by_role("button", name="Create coupon").click()
    wait_for_notice(page, "coupon_created")
    page.wait_for_url("**/admin/coupons/SUMMER")
    assert page.get_by_role("status").first.inner_text() == "The coupon was created."
    facts = page.locator(".facts").inner_text()
    assert "EUR5.00 off in EUR" in facts and "EUR20.00 in EUR" in facts
    assert "2030-08-31 23:59 UTC" in facts
    check_page(page, "admin-coupon")

    page.get_by_role("button", name="Pause the coupon").click()
    wait_for_notice(page, "coupon_paused")
    page.wait_for_url("**/admin/coupons/SUMMER")
    assert "paused" in page.locator(".facts").inner_text()
    page.get_by_role("button", name="Resume the coupon").click()
    wait_for_notice(page, "coupon_resumed")
    page.wait_for_url("**/admin/coupons/SUMMER")

    page.goto("/admin/coupons/WELCOME")
    row = page.locator("#redemption-list tbody tr").first
    assert "alice@example.com" in row.inner_text() and "reserved" in row.inner_text()
    check_page(page, "admin-coupon-usage")
