"""A licensed product bought with quantity q: one license with q x the product's seats,
whose renewal costs q x the renewal price (one more period, the same seats) and whose
upgrade costs q x the difference and gives q x the new product's seats -- taken back
to the seats before on a full refund. Bought through checkout, paid through the card
webhook (docs/licensing.md, "Seats")."""

from __future__ import annotations

import datetime as dt

import pytest
from fakes.shop import order_status
from fakes.stripe_api import charge_object, event
from helpers.account_data import paid_order
from helpers.license_changes import buy, fresh, order_of, pay
from helpers.payments import send
from sqlalchemy import select

from cmsshop.models import License, OrderItem, Product, ProductPrice
from cmsshop.services.licensing.issuing import seats_of
from cmsshop.services.payments import license_changes

YEAR = dt.timedelta(days=365)
GRACE = dt.timedelta(days=30)


def license_of(dbsession, order) -> License:
    return dbsession.scalar(
        select(License)
        .join(OrderItem, OrderItem.id == License.order_item_id)
        .where(OrderItem.order_id == order.id, OrderItem.product_slug == "site-guard")
    )


@pytest.fixture
def three_pack(dbsession, customer, tiers) -> License:
    """The customer's paid license of three SiteGuards (3 seats each): 9 seats."""
    order = paid_order(dbsession, customer, ("site-guard",), quantities={"site-guard": 3})
    return license_of(dbsession, order)


def add_product(dbsession, slug: str, seats: int | None, price: int, **fields) -> Product:
    product = Product(
        slug=slug,
        name=slug.replace("-", " ").title(),
        licensed=True,
        published=True,
        max_activations=seats,
        duration_days=365,
        **fields,
    )
    product.prices = [ProductPrice(currency="EUR", amount=price)]
    dbsession.add(product)
    dbsession.commit()
    return product


def test_a_quantity_is_one_license_with_that_many_times_the_seats(dbsession, customer, catalogue):
    add_product(dbsession, "unset-seats", None, 1000)  # a license's default: one seat
    add_product(dbsession, "staging-only", 0, 1000)  # no production seat, however many
    slugs = ("site-guard", "pixel-forge", "themes", "unset-seats", "staging-only")
    quantities = {"site-guard": 3, "pixel-forge": 5, "unset-seats": 4, "staging-only": 2}
    order = paid_order(dbsession, customer, slugs, quantities=quantities)
    dbsession.expire_all()
    seats = dict(
        dbsession.execute(
            select(OrderItem.product_slug, License.max_activations)
            .join(OrderItem, OrderItem.id == License.order_item_id)
            .where(OrderItem.order_id == order.id)
        ).all()
    )
    assert seats == {"site-guard": 9, "pixel-forge": 10, "unset-seats": 4, "staging-only": 0}
    assert seats_of(catalogue["site-guard"], 3) == 9 and seats_of(catalogue["themes"]) == 1


def test_a_renewal_of_three_costs_three_renewals_and_adds_one_period(
    card_buyer, webhook, fake_stripe, three_pack, dbsession, customer
):
    line = license_changes.price_renewal(
        dbsession, customer.id, three_pack.key, "EUR", dt.datetime.now(dt.UTC), GRACE
    )
    assert (line["quantity"], line["unit_amount"], line["discount"], line["amount"]) == (
        3,
        4900,
        0,
        3 * 4900,
    )
    old_expiry = three_pack.expires_at
    placed = buy(card_buyer, {"renew": three_pack.key}).json["order"]
    order = order_of(dbsession, placed["number"])
    assert order.total == 3 * 4900
    assert [(i.kind, i.quantity, i.unit_amount, i.amount) for i in order.items] == [
        ("renewal", 3, 4900, 14700)
    ]
    assert pay(webhook, fake_stripe, order)[0]["status"] == "processed"
    renewed = fresh(dbsession, License, three_pack.id)
    assert renewed.expires_at == old_expiry + YEAR  # one period, not three
    assert renewed.max_activations == 9


def test_an_upgrade_of_three_costs_three_differences_and_keeps_the_multiplier(
    card_buyer, webhook, fake_stripe, three_pack, dbsession, customer, tiers
):
    line = license_changes.price_upgrade(
        dbsession,
        customer.id,
        three_pack.key,
        "site-guard-agency",
        "EUR",
        dt.datetime.now(dt.UTC),
    )
    difference = 12900 - 4900
    assert (line["quantity"], line["unit_amount"], line["amount"]) == (
        3,
        difference,
        3 * difference,
    )
    placed = buy(card_buyer, {"upgrade": three_pack.key, "to": "site-guard-agency"})
    order = order_of(dbsession, placed.json["order"]["number"])
    assert order.total == 3 * difference
    assert [(i.kind, i.quantity, i.unit_amount) for i in order.items] == [
        ("upgrade", 3, difference)
    ]
    _, _, intent = pay(webhook, fake_stripe, order)
    upgraded = fresh(dbsession, License, three_pack.id)
    assert (upgraded.product_id, upgraded.max_activations) == (tiers["agency"].id, 3 * 10)

    # The money goes back in full: so do the seats, to the three-pack's 9.
    refund = event("charge.refunded", charge_object(intent, order.total))
    assert send(webhook, refund, 200).json["status"] == "processed"
    assert order_status(dbsession, order.number) == "refunded"
    restored = fresh(dbsession, License, three_pack.id)
    assert (restored.product_id, restored.max_activations) == (tiers["guard"].id, 9)


def test_the_multiplier_decides_which_tier_gives_more_seats(dbsession, customer, tiers, three_pack):
    """A 4-seat tier is an upgrade of the 9-seat three-pack (4 x 3 = 12 seats); a 2-seat
    one is not (6); for a license of one SiteGuard (3 seats) the 4-seat tier is too."""
    add_product(dbsession, "site-guard-plus", 4, 5900, upgrade_group="site-guard", tier=1)
    add_product(dbsession, "site-guard-lite", 2, 5400, upgrade_group="site-guard", tier=1)
    now = dt.datetime.now(dt.UTC)
    line = license_changes.price_upgrade(
        dbsession, customer.id, three_pack.key, "site-guard-plus", "EUR", now
    )
    assert (line["quantity"], line["amount"]) == (3, 3 * 1000)
    with pytest.raises(license_changes.ItemRefused, match="no more seats"):
        license_changes.price_upgrade(
            dbsession, customer.id, three_pack.key, "site-guard-lite", "EUR", now
        )
    single = license_of(dbsession, paid_order(dbsession, customer, ("site-guard",)))
    licenses = [fresh(dbsession, License, three_pack.id), single]
    offers = license_changes.license_offers(dbsession, licenses, {})
    for license in licenses:
        upgrades = {p.slug for p in offers[license.id]["upgrades"]}
        assert upgrades == {"site-guard-agency", "site-guard-plus"}
    assert license_changes.purchased_quantities(dbsession, licenses) == {
        three_pack.id: 3,
        single.id: 1,
    }
