"""API tokens in a real Chromium: an admin makes one in the console, sees it once (and
it works), then revokes it. Every page passes check_page."""

from __future__ import annotations

import urllib.error
import urllib.request

from helpers.browser import check_page, log_in
from helpers.notices import wait_for_notice


def admin_api_status(base_url: str, value: str) -> int:
    request = urllib.request.Request(
        f"{base_url}/api/admin/legal", headers={"Authorization": f"Bearer {value}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_an_admin_creates_sees_once_and_revokes_a_token(page, site, admin):
    log_in(page, admin.email, "/admin/api-tokens")
    check_page(page, "api-tokens-empty")
    page.get_by_label("Name").fill("Bookkeeping sync")
    page.get_by_label("orders: Orders, subscriptions, refunds").check()
    page.get_by_role("button", name="Create token").click()
    page.locator("#new-token").wait_for()
    value = page.get_by_label("The token").input_value()
    assert value.startswith("cms_")
    assert "will not be shown again" in page.locator("main").inner_text()
    check_page(page, "api-token-created")
    assert admin_api_status(site, value) == 403  # orders only: the legal pages are settings

    page.get_by_role("link", name="Back to the API tokens").click()
    page.wait_for_url("**/admin/api-tokens")
    assert value not in page.content()
    assert page.locator("tbody tr").count() == 1
    assert "Bookkeeping sync" in page.locator("tbody").inner_text()
    check_page(page, "api-tokens-list")
    page.get_by_role("button", name="Revoke Bookkeeping sync").click()
    page.wait_for_url("**/revoke")
    check_page(page, "api-token-revoke-confirm")
    page.get_by_role("button", name="Revoke Bookkeeping sync").click()
    wait_for_notice(page, "api_token_revoked")
    assert "Revoked" in page.locator("table").inner_text()
    check_page(page, "api-tokens-revoked")
    assert admin_api_status(site, value) == 401
