"""The whole customer journey in a real Chromium, on the real app served by
waitress with the fake card provider at the edge:

browse -> put a product in the cart -> register -> pay for the cart on the provider's
page (its signed webhook, confirmed with its API) -> the paid order -> the invoice ->
download the file -> the license -> a product runtime activates a site -> deactivate
that activation -> open a ticket.

Every page passes ``check_page`` (one <h1>, axe-core, phone width, screenshots).
"""

from __future__ import annotations

import secrets

import requests
from helpers.account_data import RELEASE_BYTES, store_release
from helpers.app import PASSWORD
from helpers.browser import check_page
from helpers.mail_links import verify_link
from helpers.notices import wait_for_notice
from sqlalchemy import select

from cmsshop.models import Activation, License, SupportTicket


def runtime_activates(base_url: str, key: str, domain: str) -> None:
    """What a protected product does on a customer's site: POST /api/license/activate."""
    body = {
        "product": "site-guard",
        "licenseKey": key,
        "domain": domain,
        "fingerprint": "install-journey-01",
        "nonce": secrets.token_urlsafe(18),
    }
    response = requests.post(f"{base_url}/api/license/activate", json=body, timeout=30)
    assert response.status_code == 201, response.text


def test_browse_buy_download_license_deactivate_and_ask_for_help(
    new_page, hosted_shop, fake_stripe, dbsession, storage_dir, tmp_path
):
    store_release(dbsession, storage_dir, "site-guard", "2.0.0", RELEASE_BYTES)
    page = new_page(hosted_shop)

    # Browse.
    page.goto("/")
    check_page(page, "journey-home")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Products").click()
    page.get_by_role("link", name="SiteGuard").click()
    page.wait_for_url("**/products/site-guard")

    # The buy button puts the product in the cart; register from the cart's "Log in"
    # link and come back to the cart.
    page.get_by_role("button", name="Buy SiteGuard").click()
    page.wait_for_url("**/cart")
    page.locator("main").get_by_role("link", name="Log in").click()
    page.locator("main").get_by_role("link", name="Register").click()
    page.get_by_label("Email").fill("journey@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    # The link mailed to the address confirms it, logs in and comes back to the cart.
    page.wait_for_url("**/check-email?reason=register")
    page.goto(verify_link(dbsession, "journey@example.com"))
    page.get_by_role("button", name="Confirm my email address").click()
    wait_for_notice(page, "email_verified")
    page.wait_for_url("**/cart")
    check_page(page, "journey-cart")

    # Pay for the cart: the billing country, the provider's page, then back; the webhook
    # makes the order paid.
    page.get_by_label("Country", exact=True).select_option("US")
    page.get_by_role("button", name="Pay EUR49.00").click()
    page.wait_for_url(f"{fake_stripe.url}/c/pay/*")
    page.get_by_role("button", name="Pay").click()
    page.wait_for_url("**/checkout/success?order=*")
    number = page.url.rsplit("=", 1)[1]
    page.get_by_role("heading", name="Thank you, your order is paid").wait_for(timeout=60_000)

    # The paid order and its invoice.
    page.goto("/account/orders")
    row = page.locator("tr", has_text=number)
    assert "paid" in row.inner_text()
    check_page(page, "journey-orders")
    page.goto("/account/invoices")
    page.locator("main table").get_by_role("link").first.click()
    page.wait_for_url("**/account/invoices/*")
    assert number in page.locator("main").inner_text()
    check_page(page, "journey-invoice")

    # Download the file: the button asks for a fresh signed URL at click time.
    page.goto("/account/downloads")
    assert "/api/downloads/" not in page.content()
    with page.expect_download() as download_info:
        page.get_by_role("button", name="Download SiteGuard 2.0.0").click()
    target = tmp_path / "site-guard.zip"
    download_info.value.save_as(target)
    assert target.read_bytes() == RELEASE_BYTES

    # The license, activated on a site by the product, then deactivated remotely.
    dbsession.rollback()
    key = dbsession.scalar(select(License.key))
    runtime_activates(hosted_shop, key, "journey.example.com")
    page.goto("/account/licenses")
    assert key in page.locator("main").inner_text()
    assert page.get_by_text("journey.example.com").first.is_visible()
    check_page(page, "journey-licenses")
    page.get_by_role("button", name="Deactivate journey.example.com").click()
    wait_for_notice(page, "activation_deactivated")
    page.wait_for_url("**/account/licenses")
    assert page.get_by_role("button", name="Deactivate journey.example.com").count() == 0
    dbsession.rollback()
    assert dbsession.scalar(select(Activation.active)) is False

    # Ask for help about the order.
    page.goto("/account/tickets/new")
    page.get_by_label("Subject").fill("Question about my order")
    page.get_by_label("Message").fill("Can I move the license to another site?")
    page.get_by_role("button", name="Open ticket").click()
    page.get_by_role("heading", name="Question about my order").wait_for()
    check_page(page, "journey-ticket")
    dbsession.rollback()
    assert dbsession.scalar(select(SupportTicket.subject)) == "Question about my order"
