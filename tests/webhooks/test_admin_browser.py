"""Webhooks in a real Chromium: an admin creates an endpoint, sees its secret once, sends
a test event and reads the delivery log. Every page passes check_page."""

from __future__ import annotations

from fakes.webhook_receiver import WebhookReceiver
from helpers.browser import check_page, log_in
from helpers.notices import wait_for_notice

from cmsshop.services.webhooks.delivery import deliver_due

# A long URL must wrap on a phone rather than widen the page.
LONG_PATH = "/hooks/" + "cmsshop-orders-and-licences-" * 5


def test_an_admin_creates_an_endpoint_and_tests_it(page, site, app, admin):
    receiver = WebhookReceiver().start()
    try:
        log_in(page, admin.email, "/admin/webhooks")
        check_page(page, "webhooks-empty")
        page.get_by_role("link", name="New endpoint").click()
        page.wait_for_url("**/admin/webhooks/new")
        check_page(page, "webhook-new")
        page.get_by_label("URL").fill(receiver.url(LONG_PATH))
        page.get_by_label("order.paid").check()
        page.get_by_label("license.created").check()
        page.get_by_role("button", name="Create endpoint").click()
        page.locator("#signing-secret").wait_for()
        secret = page.locator("#signing-secret").input_value()
        assert secret.startswith("whsec_")
        assert "will not be shown again" in page.locator("main").inner_text()
        check_page(page, "webhook-secret")
        receiver.secrets = [secret]

        page.get_by_role("link", name="Go to the endpoint").click()
        page.wait_for_url("**/admin/webhooks/*")
        assert secret not in page.content()
        page.get_by_role("button", name="Send test event").click()
        wait_for_notice(page, "webhook_test_sent")
        assert deliver_due(app.registry).succeeded == 1
        assert receiver.received[0].verified_with == [secret]
        page.reload()
        log = page.locator("section", has=page.get_by_role("heading", name="Delivery log"))
        assert "webhook.test" in log.inner_text() and "HTTP 200" in log.inner_text()
        check_page(page, "webhook-endpoint-log")
        page.get_by_role("link", name="‹ All webhooks").click()
        page.wait_for_url("**/admin/webhooks")
        assert receiver.url(LONG_PATH) in page.locator("tbody").inner_text()
        check_page(page, "webhooks-list")
    finally:
        receiver.stop()
