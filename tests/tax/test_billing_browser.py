"""The account's billing details page in a real Chromium: reached from the account
navigation, passes check_page (axe-core, one <h1>, no sideways scrolling on a phone)
empty, with field errors and saved."""

from __future__ import annotations

from helpers.browser import check_page, log_in
from helpers.notices import wait_for_notice


def test_the_billing_page_from_the_account_navigation(page, customer):
    log_in(page, customer.email, lands_on="/account")
    nav = page.get_by_role("navigation", name="Your account")
    nav.get_by_role("link", name="Billing details").click()
    page.wait_for_url("**/account/billing")
    check_page(page, "account-billing")
    page.get_by_label("Country", exact=True).select_option("DE")
    page.get_by_label("EU VAT ID (optional, for businesses)").fill("DE 136 695 978")
    page.get_by_role("button", name="Save billing details").click()
    # The check-digit error at its field; what was typed is kept.
    assert "check digits" in page.locator("#f-vatId-error").inner_text()
    assert page.get_by_label("Country", exact=True).input_value() == "DE"
    check_page(page, "account-billing-errors")
    page.get_by_label("EU VAT ID (optional, for businesses)").fill("")
    page.get_by_role("button", name="Save billing details").click()
    wait_for_notice(page, "billing_saved")
    page.wait_for_url("**/account/billing")
    assert "Your billing details were saved." in page.locator("main").inner_text()
    check_page(page, "account-billing-saved")
