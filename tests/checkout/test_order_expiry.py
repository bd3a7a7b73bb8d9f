"""Unpaid orders expire (services/checkout/expiry.py): pending orders older than
``cmsshop.checkout.order_ttl`` are cancelled by the worker and give their coupon
redemptions back; nothing else is touched; the setting is checked at start-up."""

from __future__ import annotations

import datetime as dt
import signal
import time

import pytest
from fakes.shop import make_order, order_status
from helpers.app import write_admin_ini
from helpers.cli import run_admin, start_admin
from helpers.coupons import make_coupon, place_with_coupon, redemption_of, reserved_count
from pyramid.exceptions import ConfigurationError
from sqlalchemy import update
from sqlalchemy.orm import Session

from cmsshop.models import Order
from cmsshop.services.checkout import expiry
from cmsshop.util import utcnow

DAY = dt.timedelta(days=1)


def age(dbsession, order, by: dt.timedelta) -> None:
    dbsession.execute(update(Order).where(Order.id == order.id).values(created_at=utcnow() - by))
    dbsession.commit()


def test_old_pending_orders_are_cancelled_and_release_their_coupon(
    app, dbsession, catalogue, customer, other_customer
):
    make_coupon(dbsession, "ONCE", max_redemptions=1)
    old = place_with_coupon(dbsession, customer, "ONCE")
    age(dbsession, old, 2 * DAY)
    young = make_order(dbsession, other_customer)
    age(dbsession, young, dt.timedelta(hours=24))
    paid = make_order(dbsession, customer, status="paid")
    failed = make_order(dbsession, customer, status="failed")
    for order in (paid, failed):
        age(dbsession, order, 3 * DAY)

    assert expiry.expire_due_orders(app.registry, 90_000) == 1
    assert order_status(dbsession, old.number) == "cancelled"
    assert redemption_of(dbsession, old).status == "released"
    assert reserved_count(dbsession, "ONCE") == 0
    assert [order_status(dbsession, o.number) for o in (young, paid, failed)] == [
        "pending",
        "paid",
        "failed",
    ]
    # Nothing left to do: a second pass changes nothing.
    assert expiry.expire_due_orders(app.registry, 90_000) == 0
    assert reserved_count(dbsession, "ONCE") == 0


def test_batches_until_none_is_due(app, dbsession, catalogue, customer, monkeypatch):
    monkeypatch.setattr(expiry, "EXPIRY_BATCH", 2)
    orders = [make_order(dbsession, customer) for _ in range(5)]
    for order in orders:
        age(dbsession, order, 2 * DAY)
    assert expiry.expire_due_orders(app.registry, 3600) == 5
    assert {order_status(dbsession, o.number) for o in orders} == {"cancelled"}


def test_a_stop_request_ends_the_pass_between_batches(app, dbsession, catalogue, customer):
    order = make_order(dbsession, customer)
    age(dbsession, order, 2 * DAY)
    assert expiry.expire_due_orders(app.registry, 3600, stop=lambda: True) == 0
    assert order_status(dbsession, order.number) == "pending"


def test_an_order_being_paid_is_left_for_the_next_pass(app, dbsession, engine, catalogue, customer):
    if engine.dialect.name != "postgresql":
        pytest.skip("SKIP LOCKED is PostgreSQL's; SQLite has one writer at a time")
    busy = make_order(dbsession, customer)
    free = make_order(dbsession, customer)
    for order in (busy, free):
        age(dbsession, order, 2 * DAY)
    with Session(engine) as paying:  # a webhook holds the order's lock
        paying.execute(
            Order.__table__.select().where(Order.__table__.c.id == busy.id).with_for_update()
        )
        assert expiry.expire_due_orders(app.registry, 3600) == 1
        paying.rollback()
    assert order_status(dbsession, busy.number) == "pending"
    assert order_status(dbsession, free.number) == "cancelled"


def test_the_setting_defaults_to_25_hours_and_is_at_least_an_hour(make_app, monkeypatch):
    assert expiry.DEFAULT_ORDER_TTL == 25 * 3600
    app = make_app(**{"cmsshop.modules": "store"})
    assert app.registry.settings["cmsshop.checkout.order_ttl"] == 90_000
    monkeypatch.setenv("CMSSHOP_CHECKOUT_ORDER_TTL", "7200")
    app = make_app(**{"cmsshop.modules": "store"})
    assert app.registry.settings["cmsshop.checkout.order_ttl"] == 7200
    monkeypatch.delenv("CMSSHOP_CHECKOUT_ORDER_TTL")
    for bad in ("60", "soon", "-1"):
        with pytest.raises(ConfigurationError, match="cmsshop.checkout.order_ttl"):
            make_app(**{"cmsshop.modules": "store", "cmsshop.checkout.order_ttl": bad})


def test_expire_orders_command_makes_one_pass(ini, dbsession, catalogue, customer):
    order = make_order(dbsession, customer)
    age(dbsession, order, 2 * DAY)
    result = run_admin(ini, "expire-orders")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "expired orders: 1"
    assert order_status(dbsession, order.number) == "cancelled"


def test_the_worker_expires_orders_whatever_modules_are_on(
    tmp_path, settings, dbsession, catalogue, customer
):
    """No store module (so no checkout settings declared), no webhook module: the worker
    still cancels unpaid orders, with the setting read from the ini."""
    make_coupon(dbsession, "ONCE", max_redemptions=1)
    old = place_with_coupon(dbsession, customer, "ONCE")
    age(dbsession, old, dt.timedelta(hours=3))
    young = make_order(dbsession, customer)
    age(dbsession, young, dt.timedelta(minutes=30))
    ini = write_admin_ini(
        tmp_path / "worker.ini",
        {
            **{k: v for k, v in settings.items() if k != "cmsshop.modules"},
            "cmsshop.modules": "",
            "cmsshop.checkout.order_ttl": "7200",
        },
    )
    process = start_admin(ini, "worker")
    try:
        deadline = time.monotonic() + 60
        while order_status(dbsession, old.number) != "cancelled":
            assert time.monotonic() < deadline, "the worker did not expire the order"
            assert process.poll() is None, process.communicate()
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
        _, stderr = process.communicate()
    assert code == 0, stderr
    assert "unpaid orders expire after 7200 s" in stderr
    assert redemption_of(dbsession, old).status == "released"
    assert order_status(dbsession, young.number) == "pending"
