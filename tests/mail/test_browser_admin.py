"""The admin's mail outbox in a real Chromium: the list, a failed message with a
hostile HTML body (shown as source, never run), and the resend button -- each page
checked with axe-core at desktop and phone width."""

from __future__ import annotations

from helpers.app import PASSWORD
from helpers.browser import check_page
from helpers.notices import wait_for_notice
from helpers.outbox import hostile_message, queue, rows


def test_admin_reads_the_outbox_and_resends_a_failed_message(page, admin, dbsession):
    queue(dbsession, 2)
    row = hostile_message(dbsession)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto("/login")
    page.get_by_label("Email").fill(admin.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()

    page.goto("/admin")
    page.get_by_role("navigation", name="Administration").get_by_role("link", name="Mail").click()
    page.wait_for_url("**/admin/mail")
    check_page(page, "admin-mail")
    page.get_by_label("Status").select_option("failed")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/admin/mail?status=failed")
    page.get_by_role("link", name="<b>Subject</b>").click()
    page.wait_for_url(f"**/admin/mail/{row.id}")
    check_page(page, "admin-mail-message")
    assert '<script>alert("admin")</script>' in page.locator("#html-body ~ div pre").inner_text()
    page.get_by_role("button", name="Resend this message").click()
    wait_for_notice(page, "mail_resent")
    page.wait_for_url(f"**/admin/mail/{row.id}")
    assert "queued again" in page.content()
    assert dialogs == []  # the hostile body never ran
    assert rows(dbsession)[-1].status == "pending"
