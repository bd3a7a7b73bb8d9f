"""The console's audit log in a real Chromium: the list after an admin's changes, a
filter, checked with axe-core at desktop and phone width."""

from __future__ import annotations

from fakes.shop import make_catalogue
from helpers.account_data import paid_order
from helpers.app import PASSWORD
from helpers.browser import check_page
from helpers.clients import new_client
from sqlalchemy import select

from cmsshop.models import License, OrderItem


def test_admin_reads_and_filters_the_audit_log(page, app, admin, dbsession):
    make_catalogue(dbsession)
    client = new_client(app)
    client.login(admin.email)
    client.patch_json("/api/admin/products/site-guard", {"name": "SiteGuard Pro " + "x" * 150})
    client.patch_json("/api/admin/currencies/USD", {"name": "US dollar"})

    page.goto("/login")
    page.get_by_label("Email").fill(admin.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()
    page.goto("/admin")
    nav = page.get_by_role("navigation", name="Administration")
    nav.get_by_role("link", name="Audit log").click()
    page.wait_for_url("**/admin/audit")
    check_page(page, "admin-audit")
    assert "product.updated" in page.content() and "currency.updated" in page.content()

    page.get_by_label("Object type").fill("currency")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/admin/audit?**objectType=currency**")
    check_page(page, "admin-audit-filtered")
    rows = page.locator("tbody tr")
    assert rows.count() == 1 and "US dollar" in rows.first.inner_text()
    assert "objectType=currency" in page.get_by_role(
        "link", name="Export these entries as CSV"
    ).get_attribute("href")


def test_the_license_and_order_pages_show_their_audit_log(page, app, admin, customer, dbsession):
    make_catalogue(dbsession)
    order = paid_order(dbsession, customer, ("site-guard",))
    key = dbsession.scalar(
        select(License.key)
        .join(OrderItem, OrderItem.id == License.order_item_id)
        .where(OrderItem.order_id == order.id)
    )
    client = new_client(app)
    client.login(admin.email)
    client.post_json(f"/api/admin/licenses/{key}/seats", {"maxActivations": 9})
    client.post_json(f"/api/admin/licenses/{key}/suspend", {})

    page.goto("/login")
    page.get_by_label("Email").fill(admin.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()
    page.goto(f"/admin/licenses/{key}")
    check_page(page, "admin-license-audit")
    section = page.locator("section[aria-labelledby=audit]")
    assert section.locator("table").first.locator("tbody tr").count() == 2
    page.goto(f"/admin/orders/{order.number}")
    page.get_by_label("Add a note (staff only)").fill("Customer called about seats.")
    page.get_by_role("button", name="Add note").click()
    page.wait_for_load_state()
    check_page(page, "admin-order-audit")
    assert "order_note.created" in page.locator("section[aria-labelledby=audit]").inner_text()
