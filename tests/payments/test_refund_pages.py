"""The console's refund of an order (/admin/orders/{number}/refund): the form (full, by
line or part of one, an amount), the confirmation step naming what will happen, the
result page, refusals beside their fields, the provider down, both providers."""

from __future__ import annotations

from fakes.shop import order_status
from fakes.stripe_api import delivery
from helpers.app import serve
from helpers.browser import check_page, log_in
from helpers.clients import logged_in
from helpers.html import errors_of, h1_of
from helpers.refunds import card_paid_order, grant_states, refund_rows, wallet_paid_order


def text(page) -> str:
    """The page's words, tags left out, spaces normalised."""
    return " ".join(page.html.get_text(" ").split())


def refund_form(page):
    return next(f for f in page.forms.values() if f.action.endswith("/refund"))


def open_form(pages, order):
    page = pages.get(f"/admin/orders/{order.number}")
    link = page.html.find("a", string="Refund")
    assert link is not None and link["href"] == f"/admin/orders/{order.number}/refund"
    return pages.get(link["href"])


def review(pages, order, status=200, **fields):
    form = refund_form(open_form(pages, order))
    lines = fields.pop("lines", [])
    for name, value in fields.items():
        form[name] = value
    for checkbox in form.fields.get("line", []):
        if checkbox._value in lines:
            checkbox.checked = True
    return form.submit(status=status)


def confirm(page, status=303):
    form = next(f for f in page.forms.values() if f.action.endswith("/refund/confirm"))
    return form.submit(status=status)


def item_id(order, name):
    return str(next(item.id for item in order.items if item.name == name))


def test_full_refund_confirmed_once_then_the_event_revokes(
    card_admin_pages, webhook, dbsession, catalogue, customer, fake_stripe
):
    order = card_paid_order(dbsession, customer, fake_stripe)
    page = review(card_admin_pages, order, kind="full", reason="buyer asked")
    assert h1_of(page) == f"Confirm the refund of order {order.number}"
    assert "EUR68.00" in text(page) and "downloads and licenses are revoked" in text(page)
    assert fake_stripe.refund_calls == [] and refund_rows(dbsession, order) == []  # no writes

    done = confirm(page)
    again = confirm(page)  # a double click: the same one-time token
    assert again.location == done.location
    assert len(fake_stripe.refund_calls) == 1 and len(fake_stripe.refunds) == 1
    result = done.follow()
    assert "notice=" not in done.location
    assert "accepted the refund of EUR68.00" in text(result)
    assert "downloads and licenses are revoked" in text(result)
    assert order_status(dbsession, order.number) == "paid"  # until the provider's event

    refund = refund_rows(dbsession, order)[0]
    body, headers = delivery(fake_stripe.refund_event(refund.provider_refund_id))
    webhook(body, headers)
    webhook(*delivery(fake_stripe.refund_event(refund.provider_refund_id)))  # once more
    assert order_status(dbsession, order.number) == "refunded"
    states = grant_states(dbsession, order)
    assert states["licenses"] == ["revoked"] and states["entitlements"] == ["revoked"] * 2
    assert "The provider confirmed the refund" in text(card_admin_pages.get(done.location))
    order_page = card_admin_pages.get(f"/admin/orders/{order.number}")
    assert order_page.html.find("a", string="Refund") is None


def test_refund_of_a_line_and_of_part_of_one_holds_licenses(
    card_admin_pages, webhook, dbsession, catalogue, customer, fake_stripe
):
    order = card_paid_order(dbsession, customer, fake_stripe)
    themes, guard = item_id(order, "Theme Pack"), item_id(order, "SiteGuard")
    page = review(card_admin_pages, order, kind="lines", lines=[themes])
    assert "Theme Pack: EUR19.00" in text(page) and "held for your review" in text(page)
    confirm(page).follow()
    part = review(
        card_admin_pages, order, kind="lines", lines=[guard], **{f"line_amount_{guard}": "10.5"}
    )
    assert "SiteGuard: EUR10.50" in text(part)
    confirm(part)
    rows = refund_rows(dbsession, order)
    assert [(r.amount, r.lines) for r in rows] == [
        (1900, [{"item": int(themes), "amount": 1900}]),
        (1050, [{"item": int(guard), "amount": 1050}]),
    ]
    # More than is left of a line (49.00 - 10.50): refused beside that line.
    again = review(card_admin_pages, order, status=422, kind="lines", lines=[guard],
                   **{f"line_amount_{guard}": "40.00"})  # fmt: skip
    assert "left of this line" in errors_of(again)[f"line_amount_{guard}"]
    body, headers = delivery(fake_stripe.refund_event(rows[0].provider_refund_id))
    webhook(body, headers)
    states = grant_states(dbsession, order)
    assert states["licenses"] == ["active"] and states["reviews"] == 1
    assert order_status(dbsession, order.number) == "paid"


def test_refund_by_amount_and_refusals_beside_the_fields(
    card_admin_pages, dbsession, catalogue, customer, fake_stripe
):
    order = card_paid_order(dbsession, customer, fake_stripe)
    too_much = review(card_admin_pages, order, status=422, kind="amount", amount="68.01")
    assert "more than what is left" in errors_of(too_much)["amount"]
    for bad in ("0", "-1", "abc", "1.234"):
        refused = review(card_admin_pages, order, status=422, kind="amount", amount=bad)
        assert "amount" in errors_of(refused)
    nothing = review(card_admin_pages, order, status=422, kind="lines")
    assert "lines" in errors_of(nothing)
    page = review(card_admin_pages, order, kind="amount", amount="25")
    assert "Refund EUR25.00 of EUR68.00" in text(page) and "held for your review" in text(page)
    confirm(page)
    assert [r.amount for r in refund_rows(dbsession, order)] == [2500]
    assert fake_stripe.refunds and next(iter(fake_stripe.refunds.values()))["amount"] == 2500
    left = card_admin_pages.get(f"/admin/orders/{order.number}/refund")
    assert "Everything left: EUR43.00" in text(left)


def test_unpaid_order_cannot_be_refunded(card_admin_pages, dbsession, catalogue, order):
    page = card_admin_pages.get(f"/admin/orders/{order.number}")
    assert page.html.find("a", string="Refund") is None
    form_page = card_admin_pages.get(f"/admin/orders/{order.number}/refund")
    assert "only a paid order" in text(form_page)
    assert not [f for f in form_page.forms.values() if f.action.endswith("/refund")]
    csrf = page.html.find("input", {"name": "csrf_token"})["value"]
    refused = card_admin_pages.post(
        f"/admin/orders/{order.number}/refund/confirm",
        {"csrf_token": csrf, "kind": "full", "token": "t" * 32},
        status=409,
    )
    assert "only a paid order" in text(refused)
    assert refund_rows(dbsession, order) == []


def test_provider_down_shows_the_error_changes_nothing_and_retry_works(
    card_admin_pages, dbsession, catalogue, customer, fake_stripe
):
    order = card_paid_order(dbsession, customer, fake_stripe)
    fake_stripe.refund_fail_with = 500
    result = confirm(review(card_admin_pages, order, kind="full")).follow()
    assert "fake refund outage" in text(result) and "Nothing was refunded" in text(result)
    assert order_status(dbsession, order.number) == "paid" and fake_stripe.refunds == {}
    assert grant_states(dbsession, order)["licenses"] == ["active"]
    fake_stripe.refund_fail_with = None
    retry = card_admin_pages.get(result.html.find("a", string="Try again")["href"])
    form = refund_form(retry)
    form["kind"] = "full"
    confirm(form.submit()).follow()
    assert [r.status for r in refund_rows(dbsession, order)] == ["failed", "succeeded"]
    assert len(fake_stripe.refunds) == 1


def test_wallet_order_refunded_from_the_console(
    wallet_app, admin, send, dbsession, catalogue, customer, paypal
):
    pages = logged_in(wallet_app, admin)
    order = wallet_paid_order(dbsession, customer, paypal)
    result = confirm(review(pages, order, kind="amount", amount="20.00")).follow()
    assert "PayPal accepted the refund of EUR20.00" in text(result)
    assert len(paypal.refund_calls) == 1
    assert paypal.refund_calls[0]["body"]["amount"]["value"] == "20.00"
    refund = refund_rows(dbsession, order)[0]
    send(paypal.refund_event_of(refund.provider_refund_id), status=200)
    assert refund_rows(dbsession, order)[0].confirmed_at is not None
    assert grant_states(dbsession, order)["reviews"] == 1


def test_the_refund_pages_in_a_browser(
    new_page, card_app, admin, dbsession, catalogue, customer, fake_stripe
):
    """No JavaScript needed; axe and phone width on the form (with a refusal), the
    confirmation and the result."""
    order = card_paid_order(dbsession, customer, fake_stripe)
    with serve(card_app) as url:
        page = new_page(url)
        log_in(page, admin.email, f"/admin/orders/{order.number}")
        page.get_by_role("link", name="Refund").click()
        page.get_by_label("An amount").check()
        page.get_by_label("Amount (EUR, e.g. 10.00)").fill("99")
        page.get_by_role("button", name="Review the refund").click()
        assert "more than what is left" in page.text_content("main")
        check_page(page, "admin-refund-form")
        page.get_by_label("Amount (EUR, e.g. 10.00)").fill("10")
        page.get_by_role("button", name="Review the refund").click()
        check_page(page, "admin-refund-confirm")
        page.get_by_role("button", name="Confirm the refund of EUR10.00").click()
        page.wait_for_url(f"**/admin/orders/{order.number}/refunds/*")
        assert "accepted the refund of EUR10.00" in " ".join(page.text_content("main").split())
        check_page(page, "admin-refund-result")
    assert len(fake_stripe.refunds) == 1
