"""The legal pages and the terms box in a real Chromium: an admin publishes the terms
in the console, a visitor reads them from the footer, and a customer pays from the cart
only once the terms box is ticked. Every page passes check_page (no axe violation of
any impact, no sideways scroll on a phone)."""

from __future__ import annotations

from fakes.shop import make_catalogue
from helpers.browser import check_page, log_in
from helpers.legal import publish_legal


def test_admin_publishes_the_terms_and_a_visitor_reads_them(page, admin):
    log_in(page, admin.email, "/admin/legal")
    check_page(page, "legal-admin-list")
    page.get_by_role("link", name="Write Terms of sale").click()
    page.wait_for_url("**/admin/legal/terms")
    page.get_by_label("Text (Markdown)").fill(
        "## Scope\n\nThese terms apply to every order.\n\n## Refunds\n\nWithin 14 days."
    )
    page.get_by_role("button", name="Preview").click()
    assert page.locator(".article-preview h2", has_text="Scope").count() == 1
    check_page(page, "legal-admin-preview")
    page.get_by_role("button", name="Publish as version 1").click()
    page.wait_for_url("**/admin/legal/terms")
    assert page.get_by_role("link", name="Version 1").count() == 1
    check_page(page, "legal-admin-edit")
    page.goto("/")
    page.locator("footer").get_by_role("link", name="Terms of sale").click()
    page.wait_for_url("**/legal/terms")
    assert page.locator("h1").inner_text() == "Terms of sale"
    check_page(page, "legal-terms")


def test_the_cart_asks_for_the_terms(page, customer, dbsession):
    make_catalogue(dbsession)
    publish_legal(dbsession)
    log_in(page, customer.email, "/products/themes")
    page.get_by_role("button", name="Add to cart").click()
    page.wait_for_url("**/cart")
    page.get_by_label("Country").select_option("US")
    box = page.get_by_label("I accept the terms of sale")
    assert box.is_visible() and not box.is_checked()
    check_page(page, "cart-terms")
    page.get_by_role("button", name="Pay").click()
    error = page.locator("#f-acceptTerms-error")
    error.wait_for()
    assert "terms" in error.inner_text()
    check_page(page, "cart-terms-refused")
    page.get_by_label("I accept the terms of sale").check()
    page.get_by_role("button", name="Pay").click()
    page.wait_for_url("**/checkout/sandbox/**")
