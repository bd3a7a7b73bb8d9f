"""A mailed link's token is never stored in the clear, anywhere: not in the outbox
before or after sending, not in any other table, not on the admin's outbox page (which
shows the link masked). The sender issues the token as it sends; the link in the mail
that left works once."""

from __future__ import annotations

from helpers.clients import client_from
from helpers.mail_links import link_in, mailed_text, mails_to, stored_text, token_of

RESET = "/api/auth/password-reset"
CONFIRM = "/api/auth/password-reset/confirm"
REGISTER = "/api/auth/register"
VERIFY = "/api/auth/verify-email"
NEW_PASSWORD = "a brand new password"


def admin_view(admin_pages, row_id: int) -> str:
    return admin_pages.get(f"/admin/mail/{row_id}").text


def test_a_reset_token_is_stored_nowhere_and_the_link_works_once(
    app, customer, admin_pages, dbsession
):
    client_from(app).post_json(RESET, {"email": customer.email}, status=202)
    [queued] = mails_to(dbsession, customer.email, "password_reset")
    before = stored_text(dbsession)
    page_before = admin_view(admin_pages, queued.id)
    assert "/reset-password?token=" in page_before  # the link is there, masked

    link = link_in(mailed_text(dbsession, customer.email, "password_reset"), "/reset-password")
    token = token_of(link)
    assert len(token) >= 40
    assert token not in before and token not in page_before
    assert token not in stored_text(dbsession)
    [sent] = mails_to(dbsession, customer.email, "password_reset")
    assert sent.status == "sent"
    page_after = admin_view(admin_pages, sent.id)
    assert token not in page_after and "/reset-password?token=" in page_after

    client = client_from(app)
    client.post_json(CONFIRM, {"token": token, "password": NEW_PASSWORD})
    again = client.post_json(CONFIRM, {"token": token, "password": "another one"}, status=410)
    assert again.json["code"] == "token_used"


def test_a_verification_token_is_stored_nowhere_and_the_link_works_once(
    app, admin_pages, dbsession
):
    client = client_from(app)
    client.post_json(REGISTER, {"email": "new@example.com", "password": NEW_PASSWORD}, status=202)
    [queued] = mails_to(dbsession, "new@example.com", "verify_email")
    before = stored_text(dbsession)
    page_before = admin_view(admin_pages, queued.id)
    assert "/verify-email?token=" in page_before

    token = token_of(
        link_in(mailed_text(dbsession, "new@example.com", "verify_email"), "/verify-email")
    )
    assert token not in before and token not in page_before
    assert token not in stored_text(dbsession)
    assert token not in admin_view(admin_pages, queued.id)

    client.post_json(VERIFY, {"token": token})
    again = client_from(app).post_json(VERIFY, {"token": token}, status=410)
    assert again.json["code"] == "token_used"
