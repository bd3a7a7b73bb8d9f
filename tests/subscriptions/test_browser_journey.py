"""A monthly subscription as the customer lives it, in a real Chromium, on the real app
served by waitress with the fake card provider's hosted page at the edge:

logged in -> the product sold monthly into the cart -> billing country and the terms ->
pay on the provider's page (a subscription-mode session) -> the return page, paid once
the provider's signed events (sent from threads, in no promised order) have arrived ->
the account's subscriptions page: paid through and the next charge, amount and date ->
cancel at the end of the period (it ends on the paid-through date, it will not renew)
-> keep renewing after all -> the hand-off to the provider's page to replace the card.

Every page of the account passes ``check_page`` (one <h1>, axe-core, no sideways
scrolling on a phone).
"""

from __future__ import annotations

import time

from helpers.browser import check_page, log_in
from helpers.legal import publish_legal
from helpers.notices import wait_for_notice
from helpers.subscriptions import period_end, state, the_subscription

from cmsshop.web import format_date

# How long the provider's deliveries may take to reach the app and be applied; ample for
# a loaded CI machine, and only ever reached when something is broken.
DELIVERY_WAIT = 60.0


def wait_for_deliveries(fake_stripe, count: int) -> list[tuple[str, int]]:
    """The provider's deliveries once ``count`` of them have been answered by the app.

    The fake sends each from its own thread after the browser is on its way, so the page
    alone cannot tell when the app is done with them; the fake records each delivery
    after the app's answer, that is after its transaction committed."""
    deadline = time.monotonic() + DELIVERY_WAIT
    while len(fake_stripe.delivered) < count:
        assert time.monotonic() < deadline, (
            f"waited for {count} deliveries, the provider made {fake_stripe.delivered}"
        )
        time.sleep(0.05)
    return list(fake_stripe.delivered)


def shown(page, selector: str) -> str:
    return " ".join(page.locator(selector).inner_text().split())


# The shop before the browser: fixtures are torn down in reverse, so the browser's
# kept-alive connections are closed before the server stops, which would wait them out.
def test_subscribe_monthly_then_cancel_at_the_period_end_and_keep_renewing(
    hosted_shop, new_page, fake_stripe, dbsession, customer, monthly
):
    publish_legal(dbsession)
    page = new_page(hosted_shop)

    # The product sold monthly, into the cart; the billing country and the terms; pay.
    log_in(page, customer.email, "/products/site-guard")
    page.get_by_role("button", name="Add to cart").click()
    page.wait_for_url("**/cart")
    assert "SiteGuard" in page.locator("table.cart tbody").inner_text()
    page.get_by_label("Country", exact=True).select_option("US")
    page.get_by_label("I accept the terms of sale").check()
    # Said to be a subscription before paying: on the button and under it.
    terms = page.locator("#subscription-terms").inner_text()
    assert "again every month, until you cancel" in terms
    page.get_by_role("button", name="Subscribe: EUR49.00 every month").click()

    # The provider's page: a subscription-mode session of EUR 49 a month.
    page.wait_for_url(f"{fake_stripe.url}/c/pay/*")
    (created,) = fake_stripe.created
    assert created["mode"] == "subscription"
    (line,) = created["line_items"]
    assert line["price_data"]["recurring"]["interval"] == "month"
    assert "49.00 EUR" in page.locator("main").inner_text()
    page.get_by_role("button", name="Pay").click()
    page.wait_for_url("**/checkout/success?order=*")
    number = page.url.rsplit("=", 1)[1]
    # The page asks again every 5 s and reloads once the order is paid.
    page.get_by_role("heading", name="Thank you, your order is paid").wait_for(timeout=60_000)
    check_page(page, "subscription-return-paid")

    # The session completed, the subscription created and its first invoice paid: each
    # delivery accepted whatever order they came in.
    delivered = wait_for_deliveries(fake_stripe, 3)
    assert sorted(delivered) == [
        ("checkout.session.completed", 200),
        ("customer.subscription.created", 200),
        ("invoice.paid", 200),
    ]
    subscription, license, periods = state(dbsession, number)
    assert subscription.status == "active" and len(periods) == 1
    paid_through = format_date(period_end(fake_stripe))
    assert format_date(subscription.paid_through) == paid_through

    # The account's subscriptions page, reached from the account's navigation.
    page.goto("/account")
    account_nav = page.get_by_role("navigation", name="Your account")
    account_nav.get_by_role("link", name="Subscriptions").click()
    page.wait_for_url("**/account/subscriptions")
    card = "section.subscription"
    assert page.locator(card).count() == 1
    assert page.get_by_role("heading", name="SiteGuard", level=2).is_visible()
    facts = shown(page, f"{card} dl.facts")
    assert "Status active" in facts
    assert f"Paid through {paid_through}" in facts
    assert shown(page, f"{card} .next-charge") == f"EUR49.00 on {paid_through}"
    assert license.key in facts
    assert page.locator(f"{card} .ends-at").count() == 0
    assert page.get_by_role("button", name="Keep renewing").count() == 0
    check_page(page, "subscriptions-active")

    # Cancel at the end of the period: asked of the provider, shown at once.
    page.get_by_role("button", name="Cancel at the end of the period").click()
    wait_for_notice(page, "subscription_cancelled")
    page.wait_for_url("**/account/subscriptions")
    notice = shown(page, "#page-notice")
    assert notice == "Your subscription ends at the end of the period you paid for."
    assert shown(page, f"{card} .ends-at") == f"{paid_through}; it will not renew"
    assert page.locator(f"{card} .next-charge").count() == 0
    assert "Status cancel scheduled" in shown(page, f"{card} dl.facts")
    assert page.get_by_role("button", name="Cancel at the end of the period").count() == 0
    assert the_subscription(fake_stripe)["cancel_at_period_end"] is True
    check_page(page, "subscriptions-cancel-scheduled")
    # The provider's own event about the change follows and changes nothing more.
    assert wait_for_deliveries(fake_stripe, 4)[3] == ("customer.subscription.updated", 200)
    page.reload()
    assert shown(page, f"{card} .ends-at") == f"{paid_through}; it will not renew"

    # Keep renewing after all: the next charge is back.
    page.get_by_role("button", name="Keep renewing").click()
    wait_for_notice(page, "subscription_resumed")
    page.wait_for_url("**/account/subscriptions")
    assert shown(page, "#page-notice") == "Your subscription renews itself again."
    assert shown(page, f"{card} .next-charge") == f"EUR49.00 on {paid_through}"
    assert page.locator(f"{card} .ends-at").count() == 0
    assert the_subscription(fake_stripe)["cancel_at_period_end"] is False
    check_page(page, "subscriptions-resumed")
    assert wait_for_deliveries(fake_stripe, 5)[4] == ("customer.subscription.updated", 200)
    page.reload()
    assert shown(page, f"{card} .next-charge") == f"EUR49.00 on {paid_through}"
    assert state(dbsession, number)[0].status == "active"

    # Replacing the card is the provider's page, asked for this customer at click time.
    assert fake_stripe.portal_sessions == []
    page.get_by_role("button", name="Update the card").click()
    page.wait_for_url(f"{fake_stripe.url}/p/session/*")
    (portal,) = fake_stripe.portal_sessions
    assert page.url == portal["url"]
    assert portal["customer"] == the_subscription(fake_stripe)["customer"]
    assert portal["return_url"] == f"{hosted_shop}/account/subscriptions"
