"""The self-service journey in a real Chromium: a buyer changes their e-mail address
(opening the link mailed to the new one), changes their password, downloads their data
and deletes their account. Every page passes ``check_page`` (axe-core, one <h1>,
screenshots, no sideways scroll on a phone) and is checked at 375 px as well."""

from __future__ import annotations

import json

from helpers.app import PASSWORD
from helpers.browser import check_page, log_in
from helpers.mail_links import mailed_link
from helpers.notices import wait_for_notice

# Long on purpose: it must wrap, not widen a phone's page.
NEW_EMAIL = "alice.with.a.rather.long.address.for.phones@customers.example.com"
NEW_PASSWORD = "a brand new password"


def test_change_email_password_export_and_delete(page, customer, dbsession, site):
    log_in(page, customer.email, "/account/settings")
    check_page(page, "account-settings")

    # E-mail: a link to the new address; nothing changes until it is opened.
    page.get_by_role("link", name="Change email address").click()
    page.wait_for_url("**/account/settings/email")
    check_page(page, "account-settings-email")
    page.get_by_label("New email address").fill(NEW_EMAIL)
    page.get_by_label("Current password").fill("not my password")
    page.get_by_role("button", name="Send confirmation link").click()
    assert page.locator("#f-currentPassword-error").is_visible()
    check_page(page, "account-settings-email-errors")
    page.get_by_label("Current password").fill(PASSWORD)
    page.get_by_role("button", name="Send confirmation link").click()
    wait_for_notice(page, "email_change_sent")
    page.wait_for_url("**/account/settings")
    assert customer.email in page.locator("main").inner_text()

    link = mailed_link(dbsession, NEW_EMAIL, "email_change", "/account/settings/email/confirm")
    page.goto(link)
    check_page(page, "account-confirm-email")
    page.get_by_role("button", name="Confirm my new email address").click()
    wait_for_notice(page, "email_changed")
    page.wait_for_url("**/account/settings")
    main = page.locator("main").inner_text()
    assert NEW_EMAIL in main and "E-mail address changed" in main
    check_page(page, "account-settings-email-changed")

    # Password: the current one is asked for; this browser stays logged in.
    page.get_by_role("link", name="Change password").click()
    page.wait_for_url("**/account/settings/password")
    check_page(page, "account-settings-password")
    page.get_by_label("Current password").fill(PASSWORD)
    page.get_by_label("New password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Change password").click()
    wait_for_notice(page, "password_changed")
    page.wait_for_url("**/account/settings")
    assert "Password changed" in page.locator("main").inner_text()

    # The data download: one JSON file with the new address and the activity.
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download my data").click()
    download = download_info.value
    assert download.suggested_filename.endswith(".json")
    with open(download.path(), encoding="utf-8") as handle:
        data = json.load(handle)
    assert data["profile"]["email"] == NEW_EMAIL
    assert {"account.email_changed", "account.password_changed"} <= {
        entry["action"] for entry in data["activity"]
    }

    # Deleting: password and the typed word; then logged out for good.
    page.get_by_role("link", name="Delete my account").click()
    page.wait_for_url("**/account/settings/delete")
    check_page(page, "account-settings-delete")
    page.get_by_label("Your password").fill(NEW_PASSWORD)
    page.get_by_label("Type DELETE to confirm").fill("delete")
    page.get_by_role("button", name="Delete my account").click()
    assert page.locator("#f-confirmation-error").is_visible()
    check_page(page, "account-settings-delete-errors")
    page.get_by_label("Your password").fill(NEW_PASSWORD)
    page.get_by_label("Type DELETE to confirm").fill("DELETE")
    page.get_by_role("button", name="Delete my account").click()
    wait_for_notice(page, "account_deleted")
    assert "Your account is deleted." in page.get_by_role("status").inner_text()

    page.goto("/account/settings")
    page.wait_for_url("**/login?next=*")
    page.get_by_label("Email").fill(NEW_EMAIL)
    page.get_by_label("Password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    assert "The email or password is wrong." in page.locator(".form-errors").inner_text()
