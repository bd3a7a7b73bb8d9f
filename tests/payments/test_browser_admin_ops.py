"""The admin's operations journey in a real Chromium: find a customer's order, open its
failed payment event, reprocess it, then find the license it created and suspend and
reinstate it -- every page checked with axe-core at desktop and phone width."""

from __future__ import annotations

import re

import pytest
import webtest
from fakes.shop import event_row, make_order
from fakes.stripe_api import closed_port_url, delivery, event, session_object
from helpers.app import PASSWORD, serve
from helpers.browser import check_page
from helpers.notices import wait_for_notice


@pytest.fixture
def card_site(card_app):
    with serve(card_app) as url:
        yield url


def test_admin_reprocesses_a_failed_payment_and_manages_the_license(
    new_page, card_site, make_app, card_settings, admin, customer, dbsession, catalogue,
    fake_stripe,
):  # fmt: skip
    # A payment the provider API could not confirm when it arrived (the API was down).
    order = make_order(dbsession, customer)
    checkout = fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", checkout)
    down = make_app(**{**card_settings, "cmsshop.cardprovider.api_base": closed_port_url()})
    body, headers = delivery(payload)
    webtest.TestApp(down).post("/api/webhooks/cardprovider", body, headers=headers, status=503)
    failed = event_row(dbsession, payload["id"])
    assert failed.status == "confirm_failed"

    page = new_page(card_site)
    page.goto("/login")
    page.get_by_label("Email").fill(admin.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()

    # Find the order by the customer's email.
    page.goto("/admin/orders")
    check_page(page, "admin-orders")
    page.get_by_label("Customer email contains").fill("alice@")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r".*/admin/orders\?.*customer=alice"))
    page.get_by_role("link", name=order.number).click()
    page.wait_for_url(f"**/admin/orders/{order.number}")
    assert "Not fulfilled" in page.locator("#fulfilment + p").inner_text()
    check_page(page, "admin-order")

    # Open the event log, then the failed event.
    page.get_by_role("navigation", name="Administration").get_by_role(
        "link", name="Payments"
    ).click()
    page.wait_for_url("**/admin/payments")
    check_page(page, "admin-payments")
    page.get_by_role("link", name="Provider event log").click()
    page.wait_for_url("**/admin/payments/events")
    check_page(page, "admin-payment-events")
    page.get_by_label("Status").select_option("confirm_failed")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**status=confirm_failed**")
    page.get_by_role("link", name=f"#{failed.id}").click()
    page.wait_for_url(f"**/admin/payments/events/{failed.id}")
    check_page(page, "admin-payment-event")
    page.get_by_role("button", name="Reprocess this event").click()
    wait_for_notice(page, "event_processed")
    assert page.get_by_role("status").inner_text() == "Reprocessed: the event is processed."

    # The order is fulfilled now, and says by which event.
    page.get_by_role("link", name=order.number).click()
    page.wait_for_url(f"**/admin/orders/{order.number}")
    assert payload["id"] in page.locator("section[aria-labelledby=fulfilment]").inner_text()

    # Find the license by the customer's email; suspend and reinstate it.
    page.get_by_role("navigation", name="Administration").get_by_role(
        "link", name="Licenses"
    ).click()
    page.wait_for_url("**/admin/licenses")
    page.get_by_label("Key, customer email or activation domain").fill(customer.email)
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**/admin/licenses?q=**")
    check_page(page, "admin-licenses")
    page.locator("table a[href^='/admin/licenses/']").first.click()
    page.wait_for_url(re.compile(r".*/admin/licenses/[A-Z0-9-]+$"))
    check_page(page, "admin-license")
    page.get_by_role("button", name="Suspend").click()
    # The confirm step names what happens; only its button acts.
    assert page.locator("h1").inner_text().startswith("Suspend license")
    check_page(page, "admin-license-confirm")
    page.get_by_role("button", name="Suspend the license").click()
    wait_for_notice(page, "license_suspend")
    assert page.get_by_role("status").inner_text() == "The license is suspended."
    page.get_by_role("button", name="Reinstate").click()
    wait_for_notice(page, "license_reinstate")
    audit = page.locator("section[aria-labelledby=audit]").inner_text()
    assert "admin.suspend" in audit and "admin.reinstate" in audit and admin.email in audit
    check_page(page, "admin-license-audited")

    # The customers pages, for the record.
    page.goto(f"/admin/customers/{customer.id}")
    check_page(page, "admin-customer")
    page.goto("/admin/customers")
    check_page(page, "admin-customers")
