"""Coupons (services/checkout/coupons.py): the discount arithmetic at its edges, every
refusal, and the redemption count: reserved with the order, capped in total and per
customer, released exactly once when the order closes unpaid, redeemed by both
fulfilment paths (and again after a release, when the money comes late)."""

from __future__ import annotations

import datetime as dt
import random

import pytest
import webtest
from fakes.shop import make_order, order_status
from fakes.stripe_api import delivery, event, session_object
from helpers.checkout import order_count
from helpers.coupons import make_coupon, place_with_coupon, redemption_of, reserved_count
from helpers.payments import send
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from cmsshop.models import Coupon, CouponRedemption, Order, Product
from cmsshop.services.checkout import coupons
from cmsshop.services.checkout.coupons import CouponRefused, DiscountLine, split_discount
from cmsshop.services.payments import fulfilment
from cmsshop.services.payments.events import queue
from cmsshop.services.payments.registry import REGISTRY_KEY
from cmsshop.util import utcnow

# --- arithmetic -----------------------------------------------------------------------------


def test_one_minor_unit_over_three_equal_lines_goes_to_the_first():
    assert split_discount(1, [100, 100, 100]) == [1, 0, 0]
    assert split_discount(2, [100, 100, 100]) == [1, 1, 0]


def test_a_hundred_percent_takes_each_line_whole():
    subtotals = [4900, 1900, 1]
    assert split_discount(coupons.percent_of(sum(subtotals), 100), subtotals) == subtotals


def test_zero_subtotals_get_nothing_and_cannot_carry_a_discount():
    assert split_discount(0, [0, 0]) == [0, 0]
    assert split_discount(0, []) == []
    assert split_discount(5, [0, 10]) == [0, 5]
    with pytest.raises(ValueError):
        split_discount(1, [0, 0])
    with pytest.raises(ValueError):
        split_discount(11, [5, 5])
    with pytest.raises(ValueError):
        split_discount(-1, [5])


def test_thirty_three_percent_rounds_once_for_the_order_and_splits_exactly():
    subtotals = [333, 333, 334]
    total = coupons.percent_of(sum(subtotals), 33)
    assert total == 330
    assert split_discount(total, subtotals) == [110, 110, 110]
    # Rounding per line would take 2 + 2 + 2 (1.65 each) off three lines of 5; the order's
    # 33 % of 15 is 4.95, so 5.
    assert coupons.percent_of(15, 33) == 5
    assert split_discount(5, [5, 5, 5]) == [2, 2, 1]


def test_half_a_minor_unit_rounds_up():
    assert coupons.percent_of(50, 1) == 1  # 0.5
    assert coupons.percent_of(150, 1) == 2  # 1.5
    assert coupons.percent_of(250, 1) == 3  # 2.5: half up, not to even
    assert coupons.percent_of(149, 1) == 1
    assert coupons.percent_of(0, 50) == 0


def test_shares_always_sum_exactly_and_never_exceed_their_line():
    rng = random.Random(28)
    for _ in range(2000):
        subtotals = [rng.choice([0, 1, 7, 99, 1900, 4900, 10**9]) for _ in range(rng.randint(1, 6))]
        whole = sum(subtotals)
        total = rng.randint(0, whole) if whole else 0
        shares = split_discount(total, subtotals)
        assert sum(shares) == total
        assert all(0 <= share <= line for share, line in zip(shares, subtotals, strict=True))


@pytest.mark.parametrize(
    "typed, code",
    [(" save10 ", "SAVE10"), ("Summer_2026-x", "SUMMER_2026-X"), ("abc", "ABC"), ("A" * 40, None)],
)
def test_codes_are_trimmed_and_upper_cased(typed, code):
    assert coupons.normalise_code(typed) == (code or typed)


@pytest.mark.parametrize(
    "typed",
    ["", "ab", "-ABC", "_ABC", "SAVE 10", "SÄVE10", "A" * 41, "SAVE10;", "save\n10", None, 10],
)
def test_what_cannot_be_a_code_is_unknown(typed):
    with pytest.raises(CouponRefused) as refused:
        coupons.normalise_code(typed)
    assert refused.value.code == "coupon_unknown"
    assert refused.value.message == "There is no coupon with this code."


# --- check_coupon ---------------------------------------------------------------------------


def lines_of(session, *slugs, currency="EUR", kind="purchase") -> list[DiscountLine]:
    products = {p.slug: p for p in session.scalars(select(Product))}
    return [
        DiscountLine(
            products[slug].id,
            next(p.amount for p in products[slug].prices if p.currency == currency),
            kind,
        )
        for slug in slugs
    ]


def check(session, code, lines, *, currency="EUR", user_id=None, now=None):
    session.commit()
    session.expire_all()
    return coupons.check_coupon(
        session,
        coupons.find_coupon(session, code),
        currency=currency,
        lines=lines,
        user_id=user_id,
        now=now or utcnow(),
    )


def refusal(session, code, lines, **kwargs) -> CouponRefused:
    with pytest.raises(CouponRefused) as refused:
        check(session, code, lines, **kwargs)
    return refused.value


def test_percent_off_every_purchase_line(dbsession, catalogue):
    make_coupon(dbsession, "TEN", percent_off=10)
    lines = lines_of(dbsession, "site-guard", "themes")  # 4900 + 1900
    assert check(dbsession, " ten ", lines) == [490, 190]


def test_renewals_and_upgrades_are_never_discounted(dbsession, catalogue):
    make_coupon(dbsession, "TEN", percent_off=10)
    lines = [
        *lines_of(dbsession, "site-guard", kind="renewal"),
        *lines_of(dbsession, "themes"),
        *lines_of(dbsession, "pixel-forge", kind="upgrade"),
    ]
    assert check(dbsession, "TEN", lines) == [0, 190, 0]
    refused = refusal(dbsession, "TEN", [lines[0], lines[2]])
    assert refused.code == "coupon_not_applicable"


def test_product_scope(dbsession, catalogue):
    make_coupon(dbsession, "THEMES", percent_off=50, products=("themes",))
    assert check(dbsession, "THEMES", lines_of(dbsession, "site-guard", "themes")) == [0, 950]
    refused = refusal(dbsession, "THEMES", lines_of(dbsession, "site-guard", "pixel-forge"))
    assert refused.code == "coupon_not_applicable"
    assert refused.message == "This coupon does not apply to anything in this order."


def test_fixed_amount_is_split_and_capped_at_the_eligible_subtotal(dbsession, catalogue):
    make_coupon(dbsession, "FIVE", kind="fixed", amounts={"EUR": {"amount_off": 500}})
    make_coupon(dbsession, "LOTS", kind="fixed", amounts={"EUR": {"amount_off": 100_000}})
    make_coupon(
        dbsession,
        "THEMEFIX",
        kind="fixed",
        amounts={"EUR": {"amount_off": 5000}},
        products=("themes",),
    )
    lines = lines_of(dbsession, "site-guard", "themes")
    assert check(dbsession, "FIVE", lines) == [360, 140]  # 360.29 + 139.71: remainder to 2nd
    assert check(dbsession, "LOTS", lines) == [4900, 1900]
    assert check(dbsession, "THEMEFIX", lines) == [0, 1900]


def test_a_fixed_coupon_without_an_amount_in_the_currency_does_not_apply(dbsession, catalogue):
    make_coupon(dbsession, "FIVE", kind="fixed", amounts={"EUR": {"amount_off": 500}})
    refused = refusal(
        dbsession, "FIVE", lines_of(dbsession, "themes", currency="USD"), currency="USD"
    )
    assert refused.code == "coupon_not_applicable"
    assert "USD" in refused.message


def test_minimum_order_counts_every_line_before_discount(dbsession, catalogue):
    make_coupon(
        dbsession,
        "BIG",
        percent_off=10,
        products=("themes",),
        amounts={"EUR": {"min_subtotal": 6800}, "USD": {"min_subtotal": 99_999}},
    )
    # site-guard is out of scope but counts towards the minimum: 4900 + 1900 = 6800.
    assert check(dbsession, "BIG", lines_of(dbsession, "site-guard", "themes")) == [0, 190]
    refused = refusal(dbsession, "BIG", lines_of(dbsession, "themes"))
    assert refused.code == "coupon_minimum_not_met"
    assert refused.message == "This coupon needs an order of at least EUR68.00."
    usd = lines_of(dbsession, "site-guard", "themes", currency="USD")
    assert refusal(dbsession, "BIG", usd, currency="USD").code == "coupon_minimum_not_met"


def test_a_currency_without_a_minimum_has_none(dbsession, catalogue):
    make_coupon(dbsession, "EURMIN", percent_off=10, amounts={"EUR": {"min_subtotal": 100_000}})
    usd = lines_of(dbsession, "themes", currency="USD")
    assert check(dbsession, "EURMIN", usd, currency="USD") == [210]


def test_unknown_code(dbsession, catalogue):
    with pytest.raises(CouponRefused) as refused:
        coupons.find_coupon(dbsession, "NOSUCH")
    assert refused.value.code == "coupon_unknown"


def test_paused_not_started_and_expired(dbsession, catalogue):
    now = utcnow()
    make_coupon(dbsession, "PAUSED", paused=True)
    make_coupon(dbsession, "SOON", valid_from=now + dt.timedelta(days=1))
    make_coupon(dbsession, "OVER", valid_until=now - dt.timedelta(seconds=1))
    make_coupon(
        dbsession,
        "WINDOW",
        valid_from=now - dt.timedelta(days=1),
        valid_until=now + dt.timedelta(days=1),
    )
    lines = lines_of(dbsession, "themes")
    assert refusal(dbsession, "PAUSED", lines).code == "coupon_paused"
    soon = refusal(dbsession, "SOON", lines)
    assert soon.code == "coupon_not_started"
    assert soon.message.startswith("This coupon can be used from ") and "UTC" in soon.message
    over = refusal(dbsession, "OVER", lines)
    assert over.code == "coupon_expired" and over.message.startswith("This coupon expired on")
    assert check(dbsession, "WINDOW", lines) == [190]
    # The end is exclusive; the start inclusive.
    until = now + dt.timedelta(days=1)
    assert refusal(dbsession, "WINDOW", lines, now=until).code == "coupon_expired"
    assert check(dbsession, "WINDOW", lines, now=now - dt.timedelta(days=1)) == [190]


def test_used_up_and_per_customer_limit(dbsession, catalogue, customer, other_customer):
    make_coupon(dbsession, "ONCE", max_redemptions=1)
    make_coupon(dbsession, "EACH", max_per_customer=1)
    place_with_coupon(dbsession, customer, "ONCE")
    first = place_with_coupon(dbsession, customer, "EACH")
    lines = lines_of(dbsession, "themes")
    assert refusal(dbsession, "ONCE", lines, user_id=other_customer.id).code == "coupon_used_up"
    assert refusal(dbsession, "ONCE", lines).code == "coupon_used_up"
    limited = refusal(dbsession, "EACH", lines, user_id=customer.id)
    assert limited.code == "coupon_limit_reached"
    assert check(dbsession, "EACH", lines, user_id=other_customer.id) == [190]
    assert check(dbsession, "EACH", lines) == [190]  # a guest: checked when reserving
    # A released redemption no longer counts.
    order = fulfilment.lock_order(dbsession, first.id)
    fulfilment.close_order(dbsession, order, "cancelled")
    dbsession.commit()
    assert check(dbsession, "EACH", lines, user_id=customer.id) == [190]


# --- reserving ------------------------------------------------------------------------------


def test_the_cap_holds_when_reserving(dbsession, catalogue, customer, other_customer):
    make_coupon(dbsession, "ONCE", max_redemptions=1)
    order = place_with_coupon(dbsession, customer, "ONCE", ("site-guard", "themes"))
    assert (order.total, order.discount, order.coupon_code) == (6120, 680, "ONCE")
    assert [(i.unit_amount, i.discount, i.amount) for i in order.items] == [
        (4900, 490, 4410),
        (1900, 190, 1710),
    ]
    redemption = redemption_of(dbsession, order)
    assert (redemption.status, redemption.discount, redemption.currency) == ("reserved", 680, "EUR")
    assert redemption.user_id == customer.id
    # A checkout that checked before the first one reserved still finds the cap full.
    stale = coupons.find_coupon(dbsession, "ONCE")
    dbsession.execute(update(Coupon).values(reserved=0))  # as it was when checked...
    lines = lines_of(dbsession, "themes")
    assert coupons.check_coupon(
        dbsession, stale, currency="EUR", lines=lines, user_id=other_customer.id, now=utcnow()
    ) == [190]
    dbsession.rollback()  # ...but the reservation is there
    with pytest.raises(CouponRefused) as refused:
        place_with_coupon(dbsession, other_customer, "ONCE", ("themes",))
    assert refused.value.code == "coupon_used_up"
    assert reserved_count(dbsession, "ONCE") == 1
    assert order_count(dbsession) == 1


def test_reserving_names_a_pause_since_the_check(dbsession, engine, catalogue, customer):
    make_coupon(dbsession, "TEN")
    with Session(engine) as placing:
        coupon = coupons.find_coupon(placing, "TEN")
        placing.rollback()
        with Session(engine) as admin:
            admin.execute(update(Coupon).values(paused=True))
            admin.commit()
        order = Order(
            number="ORD-PAUSE-00001",
            user_id=customer.id,
            currency="EUR",
            total=1710,
            status="pending",
            provider="cardprovider",
        )
        placing.add(order)
        placing.flush()
        with pytest.raises(CouponRefused) as refused:
            coupons.reserve_redemption(placing, coupon, order=order, discount=190, now=utcnow())
        placing.rollback()
    assert refused.value.code == "coupon_paused"
    assert reserved_count(dbsession, "TEN") == 0


def test_the_per_customer_limit_holds_when_reserving(
    dbsession, catalogue, customer, other_customer
):
    make_coupon(dbsession, "EACH", max_per_customer=2)
    place_with_coupon(dbsession, customer, "EACH")
    place_with_coupon(dbsession, customer, "EACH", ("themes",))
    with pytest.raises(CouponRefused) as refused:
        place_with_coupon(dbsession, customer, "EACH", ("pixel-forge",))
    assert refused.value.code == "coupon_limit_reached"
    assert reserved_count(dbsession, "EACH") == 2  # the refused one's count rolled back
    place_with_coupon(dbsession, other_customer, "EACH")
    assert reserved_count(dbsession, "EACH") == 3
    assert order_count(dbsession) == 3


def test_the_per_customer_limit_is_checked_under_the_coupon_lock(
    dbsession, engine, catalogue, customer
):
    """A stale check (the customer had no redemption) still cannot reserve a second."""
    make_coupon(dbsession, "EACH", max_per_customer=1)
    with Session(engine) as placing:
        coupon = coupons.find_coupon(placing, "EACH")
        assert coupons.check_coupon(
            placing,
            coupon,
            currency="EUR",
            lines=lines_of(placing, "themes"),
            user_id=customer.id,
            now=utcnow(),
        ) == [190]
        placing.rollback()
        place_with_coupon(dbsession, customer, "EACH")  # meanwhile, another checkout
        order = Order(
            number="ORD-LIMIT-00001",
            user_id=customer.id,
            currency="EUR",
            total=1710,
            status="pending",
            provider="cardprovider",
        )
        placing.add(order)
        placing.flush()
        with pytest.raises(CouponRefused) as refused:
            coupons.reserve_redemption(placing, coupon, order=order, discount=190, now=utcnow())
        placing.rollback()
    assert refused.value.code == "coupon_limit_reached"
    assert reserved_count(dbsession, "EACH") == 1


# --- releasing and redeeming ----------------------------------------------------------------


def close(dbsession, order, status="cancelled"):
    dbsession.commit()
    locked = fulfilment.lock_order(dbsession, order.id)
    result = fulfilment.close_order(dbsession, locked, status)
    dbsession.commit()
    return result


def test_an_order_closed_unpaid_gives_its_redemption_back_once(dbsession, catalogue, customer):
    make_coupon(dbsession, "ONCE", max_redemptions=1)
    failed = place_with_coupon(dbsession, customer, "ONCE")
    assert close(dbsession, failed, "failed").status == "processed"
    assert redemption_of(dbsession, failed).status == "released"
    assert reserved_count(dbsession, "ONCE") == 0
    assert close(dbsession, failed, "failed").status == "duplicate"
    assert close(dbsession, failed, "cancelled").status == "ignored"
    assert coupons.release_redemption(dbsession, failed.id, utcnow()) is False
    assert reserved_count(dbsession, "ONCE") == 0
    # The count given back lets the next buyer use the coupon.
    again = place_with_coupon(dbsession, customer, "ONCE", ("themes",))
    assert redemption_of(dbsession, again).status == "reserved"
    assert reserved_count(dbsession, "ONCE") == 1


def test_an_order_without_a_coupon_closes_as_before(dbsession, catalogue, customer, order):
    assert close(dbsession, order).status == "processed"
    assert dbsession.scalar(select(func.count()).select_from(CouponRedemption)) == 0


def pay(webhook, fake_stripe, order):
    session = fake_stripe.add_session(session_object(order.number, order.total))
    return send(webhook, event("checkout.session.completed", session), status=200).json


def test_a_paid_order_redeems_its_coupon(webhook, fake_stripe, dbsession, catalogue, customer):
    make_coupon(dbsession, "ONCE", max_redemptions=1)
    order = place_with_coupon(dbsession, customer, "ONCE", ("site-guard", "themes"))
    assert pay(webhook, fake_stripe, order)["status"] == "processed"
    assert order_status(dbsession, order.number) == "paid"
    redemption = redemption_of(dbsession, order)
    assert redemption.status == "redeemed"
    assert reserved_count(dbsession, "ONCE") == 1
    # The provider was asked for (and confirmed) the discounted total.
    assert order.total == 6120


def test_a_late_payment_redeems_a_released_redemption_again_past_the_cap(
    webhook, fake_stripe, app, dbsession, catalogue, customer, other_customer, admin
):
    make_coupon(dbsession, "ONCE", max_redemptions=1)
    late = place_with_coupon(dbsession, customer, "ONCE")
    close(dbsession, late)  # expired unpaid: the count is given back...
    taken = place_with_coupon(dbsession, other_customer, "ONCE", ("themes",))  # ...and taken
    assert reserved_count(dbsession, "ONCE") == 1
    # The first buyer's payment arrives after all: held for review, then fulfilled by hand.
    assert pay(webhook, fake_stripe, late)["status"] == "needs_review"
    assert redemption_of(dbsession, late).status == "released"
    fulfilment.manual_fulfil(
        dbsession,
        late.number,
        settings=app.registry.settings,
        admin_id=admin.id,
        reason="paid after it expired",
        payment_reference=None,
    )
    dbsession.commit()
    assert redemption_of(dbsession, late).status == "redeemed"
    assert redemption_of(dbsession, taken).status == "reserved"
    assert reserved_count(dbsession, "ONCE") == 2  # the money came: over the cap, on purpose


def test_the_worker_batch_redeems_coupons_as_one_fulfilment_does(
    make_app, card_settings, fake_stripe, dbsession, catalogue, customer, other_customer
):
    queued = make_app(**card_settings, **{"cmsshop.payments.webhook_processing": "queued"})
    client = webtest.TestApp(queued)
    make_coupon(dbsession, "TEN", max_redemptions=5)
    orders = [
        place_with_coupon(dbsession, customer, "TEN", ("site-guard", "themes")),
        place_with_coupon(dbsession, other_customer, "TEN", ("themes",)),
        make_order(dbsession, customer, ("pixel-forge",)),  # no coupon, same batch
    ]
    for order in orders:
        payload = event(
            "checkout.session.completed",
            fake_stripe.add_session(session_object(order.number, order.total)),
        )
        body, headers = delivery(payload)
        answer = client.post("/api/webhooks/cardprovider", body, headers=headers)
        assert answer.json["status"] == "queued"
    outcomes = queue.process_due_events(queued.registry, queued.registry[REGISTRY_KEY])
    assert outcomes == {"processed": 3}
    for order in orders:
        assert order_status(dbsession, order.number) == "paid"
    assert [redemption_of(dbsession, o).status for o in orders[:2]] == ["redeemed"] * 2
    assert redemption_of(dbsession, orders[2]) is None
    assert reserved_count(dbsession, "TEN") == 2


def test_a_refund_gives_back_a_redemption_only_if_the_order_was_never_delivered(
    webhook, fake_stripe, app, dbsession, catalogue, customer, other_customer
):
    make_coupon(dbsession, "TWICE", max_redemptions=2)
    held = place_with_coupon(dbsession, customer, "TWICE")
    paid = place_with_coupon(dbsession, other_customer, "TWICE", ("themes",))
    # The money for one does not add up: held for review, nothing delivered.
    wrong = fake_stripe.add_session(session_object(held.number, held.total + 1))
    assert (
        send(webhook, event("checkout.session.completed", wrong), status=200).json["status"]
        == "needs_review"
    )
    assert pay(webhook, fake_stripe, paid)["status"] == "processed"
    for order in (held, paid):
        locked = fulfilment.lock_order(dbsession, order.id)
        assert fulfilment.refund(dbsession, locked, settings=app.registry.settings).status == (
            "processed"
        )
        dbsession.commit()
    assert redemption_of(dbsession, held).status == "released"
    assert redemption_of(dbsession, paid).status == "redeemed"
    assert reserved_count(dbsession, "TWICE") == 1
