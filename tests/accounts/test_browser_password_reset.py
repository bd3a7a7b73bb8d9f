"""The password-reset journey in a real Chromium: "Forgot your password?" -> the sender
delivers the mail over SMTP to a real mailbox on loopback -> the link in it -> a new
password -> log in with it; the session another browser had is logged out. Every page
passes ``check_page`` (axe-core, one <h1>, phone width, screenshots)."""

from __future__ import annotations

from helpers.app import PASSWORD
from helpers.browser import check_page, log_in
from helpers.mail_links import link_in, mails_to
from helpers.notices import wait_for_notice

from cmsshop.services.mail.delivery import make_mail_backend
from cmsshop.services.mail.sender import send_due
from cmsshop.settings import load_settings

NEW_PASSWORD = "a fresh new password"


def deliver_over_smtp(dbsession, smtp_server) -> None:
    """What the mail worker does: one pass of the sender, over SMTP to the mailbox."""
    settings = load_settings(
        {"cmsshop.site_name": "Shop", "cmsshop.database_url": "sqlite://"} | smtp_server.settings(),
        environ={},
    )
    send_due(dbsession.get_bind(), make_mail_backend(settings), settings)


def test_forgot_password_reset_and_log_in_with_the_new_one(
    new_page, site, customer, dbsession, smtp_server
):
    # Another device, logged in before the reset.
    other = new_page(site)
    log_in(other, customer.email)
    other.wait_for_url("**/account")

    page = new_page(site)
    page.goto("/login")
    page.get_by_role("link", name="Forgot your password?").click()
    page.wait_for_url("**/forgot-password")
    check_page(page, "forgot-password")
    page.get_by_label("Email").fill("not an email")
    page.get_by_role("button", name="Send the link").click()
    assert page.locator("#f-email-error").is_visible()
    check_page(page, "forgot-password-errors")
    page.get_by_label("Email").fill(customer.email)
    page.get_by_role("button", name="Send the link").click()
    page.wait_for_url("**/check-email?reason=reset")
    assert "If an account exists" in page.locator("main").inner_text()
    check_page(page, "forgot-password-sent")

    # The mailbox: the sender delivers the queued message; its text part holds the link.
    deliver_over_smtp(dbsession, smtp_server)
    (received,) = smtp_server.wait_for(1)
    assert received["To"] == customer.email
    assert received["Subject"] == "Reset your password"
    [message] = mails_to(dbsession, customer.email, "password_reset")
    assert message.status == "sent" and received["Message-ID"] == message.message_id
    text = received.get_body(preferencelist=("plain",)).get_content()
    link = link_in(text, "/reset-password")
    page.goto(link)
    check_page(page, "reset-password")
    page.get_by_label("New password").fill("short")
    page.get_by_role("button", name="Change password").click()
    assert page.locator("#f-password-error").is_visible()
    check_page(page, "reset-password-errors")
    page.get_by_label("New password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Change password").click()
    wait_for_notice(page, "password_reset")
    page.wait_for_url("**/login")
    assert "every device is logged out" in page.get_by_role("status").inner_text()
    check_page(page, "login-after-reset")

    # The old password no longer works; the new one does.
    page.get_by_label("Email").fill(customer.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    assert "The email or password is wrong." in page.locator(".form-errors").inner_text()
    page.get_by_label("Password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/account")

    # The other device was logged out by the reset.
    other.goto("/account")
    other.wait_for_url("**/login?next=*")
    assert other.get_by_role("link", name="Log in").count() >= 1

    # The link is used up; the page says so and offers a new one.
    page.goto(link)
    assert "used already" in page.locator("main").inner_text()
    check_page(page, "reset-password-used")


def test_verify_email_page_and_its_used_state(page, dbsession):
    from helpers.mail_links import verify_link

    page.goto("/register")
    page.get_by_label("Email").fill("verify@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url("**/check-email?reason=register")
    link = verify_link(dbsession, "verify@example.com")
    page.goto(link)
    check_page(page, "verify-email-confirm")
    page.get_by_role("button", name="Confirm my email address").click()
    wait_for_notice(page, "email_verified")
    page.wait_for_url("**/account")
    page.goto(link)
    assert "used already" in page.locator("main").inner_text()
    check_page(page, "verify-email-used")
