"""The admin journey in a real Chromium, on the demo data (`seed-demo`) and the
fake card provider at the edge:

log in as the demo admin -> create a product with a price and upload a release ->
publish an article -> find the demo order -> reprocess its failed payment event ->
suspend and reinstate the license it created -> answer the demo customer's ticket ->
the customer sees the reply.
"""

from __future__ import annotations

import re

import pytest
import webtest
from fakes.shop import event_row
from fakes.stripe_api import closed_port_url, delivery, event, session_object
from helpers.app import HASHER, serve
from helpers.browser import check_page, log_in
from helpers.clients import new_client
from helpers.notices import wait_for_notice
from sqlalchemy import select

from cmsshop.models import Order, User
from cmsshop.services.demo import DEMO_PASSWORD, seed_demo


@pytest.fixture
def demo_site(card_app, dbsession, settings):
    seed_demo(dbsession, settings, HASHER)
    dbsession.commit()
    with serve(card_app) as url:
        yield url


def test_the_demo_admin_runs_the_shop(
    new_page, demo_site, card_app, make_app, card_settings, fake_stripe, dbsession, tmp_path
):
    # The demo order's payment arrived while the provider API was down: confirm_failed.
    demo_order = dbsession.scalar(select(Order))
    checkout = fake_stripe.add_session(session_object(demo_order.number, demo_order.total))
    payload = event("checkout.session.completed", checkout)
    down = make_app(**{**card_settings, "cmsshop.cardprovider.api_base": closed_port_url()})
    body, headers = delivery(payload)
    webtest.TestApp(down).post("/api/webhooks/cardprovider", body, headers=headers, status=503)
    assert event_row(dbsession, payload["id"]).status == "confirm_failed"
    # The demo customer has a question.
    customer = new_client(card_app)
    customer.login("demo@example.com", DEMO_PASSWORD)
    customer.post_json(
        "/api/dashboard/tickets",
        {"subject": "Where is my license?", "body": "I paid but see no key yet."},
        status=201,
    )

    page = new_page(demo_site)
    log_in(page, "admin@example.com", "/admin", password=DEMO_PASSWORD)
    check_page(page, "journey-admin-dashboard")

    # A product with a price, then a release through the upload form (with progress).
    page.goto("/admin/products/new")
    page.get_by_label("Name", exact=True).fill("Journey Tool")
    page.get_by_label("Slug").fill("journey-tool")
    page.get_by_label("EUR (Euro)").fill("29.00")
    page.get_by_role("button", name="Create product").click()
    wait_for_notice(page, "product_created")
    page.wait_for_url("**/admin/products/journey-tool/edit")
    upload = tmp_path / "journey-tool-1.0.0.zip"
    upload.write_bytes(b"PK" + b"\x01" * 200_000)
    page.get_by_label("Version", exact=True).fill("1.0.0")
    page.get_by_label("Changelog (Markdown, optional)").fill("- First **public** release")
    page.get_by_label("File").set_input_files(str(upload))
    page.get_by_role("button", name="Upload release").click()
    wait_for_notice(page, "release_uploaded")
    page.wait_for_url("**/admin/products/journey-tool/edit")
    # Published once it has a release to download.
    page.get_by_label("Published (shown in the shop").check()
    page.get_by_role("button", name="Save changes").click()
    wait_for_notice(page, "product_saved")
    check_page(page, "journey-admin-product")
    shop = new_page(demo_site)
    shop.goto("/products/journey-tool")
    assert "€29.00" in shop.locator("main").inner_text()
    assert shop.locator(".changelog strong").inner_text() == "public"

    # Publish an article.
    page.goto("/admin/articles/new")
    page.get_by_label("Title").fill("Installing Journey Tool")
    page.get_by_label("Slug").fill("installing-journey-tool")
    page.get_by_label("Category").fill("guides")
    page.get_by_label("Body (Markdown)").fill("## Steps\n\n1. Download\n2. Unzip")
    page.get_by_role("button", name="Save article").click()
    wait_for_notice(page, "article_created")
    page.wait_for_url("**/admin/articles/installing-journey-tool/edit")
    page.get_by_role("button", name="Publish now").click()
    wait_for_notice(page, "article_published")
    shop.goto("/docs/installing-journey-tool")
    assert shop.get_by_role("heading", level=1).inner_text() == "Installing Journey Tool"

    # Find the demo order by the customer's email; reprocess its failed event.
    page.goto("/admin/orders")
    page.get_by_label("Customer email contains").fill("demo@")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r".*/admin/orders\?.*customer=demo"))
    page.get_by_role("link", name=demo_order.number).click()
    page.wait_for_url(f"**/admin/orders/{demo_order.number}")
    check_page(page, "journey-admin-order")
    page.get_by_role("link", name=re.compile(r"^#\d+$")).first.click()
    page.wait_for_url("**/admin/payments/events/*")
    page.get_by_role("button", name="Reprocess this event").click()
    wait_for_notice(page, "event_processed")
    dbsession.rollback()
    assert dbsession.scalar(select(Order.status).where(Order.id == demo_order.id)) == "paid"

    # Suspend and reinstate the license the payment created.
    page.goto("/admin/licenses?q=demo%40example.com")
    page.locator("table a[href^='/admin/licenses/']").first.click()
    page.wait_for_url(re.compile(r".*/admin/licenses/[A-Z0-9-]+$"))
    page.get_by_role("button", name="Suspend").click()
    # The confirm step names what happens; only its button acts.
    assert page.locator("h1").inner_text().startswith("Suspend license")
    check_page(page, "journey-admin-license-confirm")
    page.get_by_role("button", name="Suspend the license").click()
    wait_for_notice(page, "license_suspend")
    page.get_by_role("button", name="Reinstate").click()
    wait_for_notice(page, "license_reinstate")
    audit = page.locator("section[aria-labelledby=audit]").inner_text()
    assert "admin.suspend" in audit and "admin.reinstate" in audit
    assert "admin@example.com" in audit
    check_page(page, "journey-admin-license")

    # Answer the ticket.
    page.goto("/admin/tickets")
    page.get_by_role("link", name="Where is my license?").click()
    page.get_by_label("Your reply").fill("It is on your licenses page now.")
    page.get_by_role("button", name="Send reply", exact=True).click()
    page.wait_for_url("**/admin/tickets/*")
    check_page(page, "journey-admin-ticket")

    # The customer reads the reply on the ticket's page.
    buyer = new_page(demo_site)
    log_in(buyer, "demo@example.com", "/account/tickets", password=DEMO_PASSWORD)
    buyer.get_by_role("link", name="Where is my license?").click()
    assert "It is on your licenses page now." in buyer.locator("main").inner_text()
    assert dbsession.scalar(select(User.email).where(User.role == "admin")) == ("admin@example.com")
