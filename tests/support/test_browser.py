"""Support tickets in a real Chromium: a customer opens a ticket, an admin (in a browser
context of their own) answers it and sets it pending, the customer sees the staff reply
and answers. Every page passes check_page (axe-core, phone width, screenshots)."""

from __future__ import annotations

from helpers.browser import check_page, log_in
from helpers.notices import wait_for_notice


def test_a_ticket_from_opening_to_the_customers_answer(page, new_page, site, customer, admin):
    log_in(page, customer.email, "/account/tickets")
    assert page.get_by_text("You have no support tickets").is_visible()
    check_page(page, "tickets-list-empty")

    page.get_by_role("link", name="Open a ticket").click()
    page.wait_for_url("**/account/tickets/new")
    # Too short a subject and no message: the API's own rules, shown on the fields.
    page.get_by_label("Subject").fill("Hi")
    page.get_by_role("button", name="Open ticket").click()
    assert page.locator("#f-subject-error").is_visible()
    assert page.locator("#f-body-error").is_visible()
    assert page.get_by_label("Subject").input_value() == "Hi"
    check_page(page, "tickets-new-errors")
    page.get_by_label("Subject").fill("The download link expired")
    page.get_by_label("Message").fill("I bought the plugin yesterday.\nThe link says expired.")
    page.get_by_role("button", name="Open ticket").click()
    wait_for_notice(page, "ticket_opened")
    page.wait_for_url("**/account/tickets/*")
    ticket_path = page.url.split(site)[1].split("?")[0]
    assert page.get_by_role("heading", level=1).inner_text() == "The download link expired"
    check_page(page, "tickets-conversation-opened")

    # The admin, in a browser context of their own.
    staff = new_page(site)
    log_in(staff, admin.email, "/admin/tickets")
    assert staff.get_by_role("link", name="The download link expired").is_visible()
    check_page(staff, "admin-tickets-queue")
    staff.get_by_role("link", name="The download link expired").click()
    staff.wait_for_url(f"**/admin{ticket_path.removeprefix('/account')}")
    assert staff.get_by_text(customer.email).first.is_visible()
    check_page(staff, "admin-ticket")
    staff.get_by_label("Your reply").fill("Here is a fresh link: see your downloads page.")
    staff.get_by_role("button", name="Send reply", exact=True).click()
    wait_for_notice(staff, "ticket_answered")
    staff.get_by_label("Ticket status").select_option("pending")
    staff.get_by_role("button", name="Change status").click()
    wait_for_notice(staff, "ticket_status_changed")
    assert "Pending" in staff.locator(".ticket-facts .status").inner_text()
    check_page(staff, "admin-ticket-answered")

    # The customer sees the staff reply, marked as such, and answers.
    page.goto(ticket_path)
    staff_reply = page.locator("ol.conversation > li.staff")
    assert staff_reply.count() == 1
    assert "Staff reply" in staff_reply.inner_text()
    assert "fresh link" in staff_reply.inner_text()
    assert admin.email not in page.content()
    assert page.locator(".status").first.inner_text() == "Answered"
    page.get_by_label("Your reply").fill("It works now, thank you!")
    page.get_by_role("button", name="Send reply").click()
    wait_for_notice(page, "ticket_replied")
    assert page.get_by_role("status").inner_text() == "Your reply was sent."
    assert page.locator("ol.conversation > li").count() == 3
    assert page.locator(".status").first.inner_text() == "Open"
    check_page(page, "tickets-conversation")

    page.goto("/account/tickets")
    assert page.get_by_role("link", name="The download link expired").is_visible()
    check_page(page, "tickets-list")
