"""The core pages in a real Chromium: keyboard use, accessibility (axe-core), phone width,
and the register (following the mailed link) / log out / log in journey without
JavaScript-only controls."""

from __future__ import annotations

from helpers.app import PASSWORD
from helpers.browser import check_page
from helpers.mail_links import verify_link
from helpers.notices import wait_for_notice


def test_home_login_and_register_pages_pass_axe_at_both_widths(page):
    for path, name in (("/", "home"), ("/login", "login"), ("/register", "register")):
        page.goto(path)
        check_page(page, name)
    page.goto("/no-such-page")
    check_page(page, "error-404")


def test_register_log_out_and_log_in_again_with_the_keyboard(page, dbsession):
    page.goto("/register")
    # The skip link is the first stop of the keyboard.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.get_by_label("Name (optional)").fill("Browser Buyer")
    page.get_by_label("Email").fill("browser@example.com")
    page.get_by_label("Password").fill("short")
    page.get_by_label("Password").press("Enter")
    # The API's own rule, shown on the field; what was typed is kept.
    assert page.locator("#f-password-error").is_visible()
    assert page.get_by_label("Email").input_value() == "browser@example.com"
    check_page(page, "register-errors")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    # The account waits for the link mailed to the address.
    page.wait_for_url("**/check-email?reason=register")
    check_page(page, "register-check-email")
    page.goto(verify_link(dbsession, "browser@example.com"))
    check_page(page, "verify-email")
    page.get_by_role("button", name="Confirm my email address").click()
    wait_for_notice(page, "email_verified")
    page.wait_for_url("**/account")
    page.get_by_role("button", name="Log out").click()
    wait_for_notice(page, "logged_out")
    assert page.get_by_role("status").inner_text() == "You are logged out."
    page.get_by_role("link", name="Log in").click()
    page.get_by_label("Email").fill("browser@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/account")
