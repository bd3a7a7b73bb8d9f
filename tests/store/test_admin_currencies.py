"""Content management of currencies: one enabled default, no silent surprises."""

from __future__ import annotations

import threading

import pytest
from helpers.app import requires_postgresql
from helpers.clients import new_client
from helpers.store import create_published
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from cmsshop.models import Currency, Product, ProductPrice


def euro(**overrides):
    body = {"code": "EUR", "name": "Euro", "symbol": "€", "decimals": 2, "default": True}
    body.update(overrides)
    return body


@pytest.fixture
def currencies(admin_app):
    admin_app.post_json("/api/admin/currencies", euro(), status=201)
    admin_app.post_json(
        "/api/admin/currencies",
        {"code": "USD", "name": "US Dollar", "symbol": "$"},
        status=201,
    )


def defaults(dbsession) -> list[str]:
    dbsession.rollback()  # a fresh snapshot: the app committed in its own transactions
    return list(dbsession.scalars(select(Currency.code).where(Currency.is_default.is_(True))))


def test_access_rules(testapp, customer_app, admin_app, currencies):
    for client, status, code in (
        (testapp, 401, "not_authenticated"),
        (customer_app, 403, "forbidden"),
    ):
        assert client.get("/api/admin/currencies", status=status).json["code"] == code
        assert client.post_json("/api/admin/currencies", euro(code="CHF"), status=status)
        assert client.patch_json("/api/admin/currencies/USD", {"enabled": False}, status=status)
    response = admin_app.patch_json(
        "/api/admin/currencies/USD", {"enabled": False}, headers={"X-CSRF-Token": ""}, status=403
    )
    assert response.json["code"] == "csrf_failed"
    assert admin_app.get("/api/admin/currencies").json["items"][1]["enabled"] is True


def test_create_and_list(admin_app, testapp, currencies):
    body = admin_app.get("/api/admin/currencies").json
    assert body["items"] == [
        {
            "code": "EUR",
            "name": "Euro",
            "symbol": "€",
            "decimals": 2,
            "default": True,
            "enabled": True,
        },
        {
            "code": "USD",
            "name": "US Dollar",
            "symbol": "$",
            "decimals": 2,
            "default": False,
            "enabled": True,
        },
    ]
    assert admin_app.get("/api/admin/currencies").headers["Cache-Control"] == "private, no-store"
    # The public list and the bootstrap see the same currencies.
    assert [c["code"] for c in testapp.get("/api/store/currencies").json["items"]] == ["EUR", "USD"]
    assert testapp.get("/api/bootstrap").json["defaultCurrency"] == "EUR"


def test_create_validation(admin_app, currencies):
    for body in (
        euro(code="eur"),
        euro(code="EURO"),
        euro(code="E1R"),
        euro(code=""),
        euro(code=978),
        euro(name=""),
        euro(symbol=""),
        euro(symbol="123456789"),
        euro(symbol="\x00"),
        euro(decimals=5),
        euro(decimals=-1),
        euro(decimals="2"),
        euro(enabled="yes"),
        euro(default=None),
        {**euro(), "rate": 1.1},
        {"code": "CHF"},
    ):
        response = admin_app.post_json("/api/admin/currencies", body, status=422)
        assert response.json["code"] == "validation_failed", body


def test_duplicate_code_is_409(admin_app, currencies):
    response = admin_app.post_json("/api/admin/currencies", euro(default=False), status=409)
    assert response.json["code"] == "currency_exists"


def test_a_new_default_unsets_the_old_one(admin_app, dbsession, currencies):
    admin_app.post_json(
        "/api/admin/currencies",
        {"code": "GBP", "name": "Pound", "symbol": "£", "default": True},
        status=201,
    )
    assert defaults(dbsession) == ["GBP"]
    body = admin_app.patch_json("/api/admin/currencies/usd", {"default": True}).json
    assert body["code"] == "USD" and body["default"] is True
    assert defaults(dbsession) == ["USD"]
    # Setting it again is a no-op.
    admin_app.patch_json("/api/admin/currencies/USD", {"default": True})
    assert defaults(dbsession) == ["USD"]


def test_the_default_cannot_be_disabled_or_unset(admin_app, dbsession, currencies):
    response = admin_app.patch_json("/api/admin/currencies/EUR", {"enabled": False}, status=409)
    assert response.json["code"] == "currency_is_default"
    assert response.json["hints"]
    response = admin_app.patch_json("/api/admin/currencies/EUR", {"default": False}, status=409)
    assert response.json["code"] == "currency_is_default"
    assert defaults(dbsession) == ["EUR"]


def test_a_disabled_currency_cannot_become_default(admin_app, dbsession, currencies):
    admin_app.patch_json("/api/admin/currencies/USD", {"enabled": False})
    response = admin_app.patch_json("/api/admin/currencies/USD", {"default": True}, status=409)
    assert response.json["code"] == "currency_disabled"
    response = admin_app.post_json(
        "/api/admin/currencies",
        {"code": "GBP", "name": "Pound", "symbol": "£", "default": True, "enabled": False},
        status=409,
    )
    assert response.json["code"] == "currency_disabled"
    # Enabling and making default in one request is fine.
    admin_app.patch_json("/api/admin/currencies/USD", {"enabled": True, "default": True})
    assert defaults(dbsession) == ["USD"]


def test_patch_validation_and_unknown_codes(admin_app, currencies):
    for body in ({"decimals": 0}, {"code": "EUR"}, {"enabled": 1}, {"name": ""}, [], {"x": 1}):
        admin_app.patch_json("/api/admin/currencies/USD", body, status=422)
    for code in ("XXX", "US", "USDD", "%E2%82%AC%E2%82%AC%E2%82%AC", "x" * 100):
        response = admin_app.patch_json(f"/api/admin/currencies/{code}", {"name": "x"}, status=404)
        assert response.json["code"] == "currency_not_found"
    response = admin_app.patch_json("/api/admin/currencies/%00", {"name": "x"}, status=400)
    assert response.json["code"] == "malformed_request"  # refused at the edge
    body = admin_app.patch_json("/api/admin/currencies/USD", {"name": "Dollar", "symbol": "US$"})
    assert body.json["name"] == "Dollar" and body.json["symbol"] == "US$"


def test_disabling_hides_the_currency_and_its_prices_from_the_public(
    admin_app, testapp, dbsession, currencies
):
    create_published(
        admin_app,
        dbsession,
        {
            "slug": "p",
            "name": "P",
            "prices": [{"currency": "EUR", "amount": 100}, {"currency": "USD", "amount": 120}],
        },
    )
    admin_app.patch_json("/api/admin/currencies/USD", {"enabled": False})
    assert [c["code"] for c in testapp.get("/api/store/currencies").json["items"]] == ["EUR"]
    assert [p["currency"] for p in testapp.get("/api/store/products/p").json["prices"]] == ["EUR"]
    testapp.get("/api/store/products?currency=USD", status=422)
    # Admins still see (and keep) the price.
    admin_prices = admin_app.get("/api/admin/products/p").json["prices"]
    assert [p["currency"] for p in admin_prices] == ["EUR", "USD"]
    admin_app.patch_json("/api/admin/currencies/USD", {"enabled": True})
    assert len(testapp.get("/api/store/products/p").json["prices"]) == 2
    assert (
        dbsession.scalar(select(ProductPrice.amount).where(ProductPrice.currency == "USD")) == 120
    )
    assert dbsession.scalar(select(Product.slug)) == "p"


def test_the_database_refuses_two_defaults(dbsession, currencies):
    dbsession.add(
        Currency(code="CHF", name="Franc", symbol="Fr", decimals=2, enabled=True, is_default=True)
    )
    with pytest.raises(IntegrityError):
        dbsession.commit()
    dbsession.rollback()


# PostgreSQL only: there the racers really overlap (row locks, the partial unique index).
# SQLite serialises writers; under this much write contention its deferred BEGIN makes a
# request fail "database is locked" on every retry attempt (a core matter, see docs/store.md).
@requires_postgresql
def test_racing_default_switches_leave_exactly_one_default(app, admin, dbsession, currencies):
    for code in ("GBP", "CHF"):
        dbsession.add(Currency(code=code, name=code, symbol=code, decimals=2, enabled=True))
    dbsession.commit()
    clients = []
    for code in ("USD", "GBP", "CHF"):
        client = new_client(app)
        client.login(admin.email)
        clients.append((client, code))
    barrier = threading.Barrier(len(clients))
    statuses = []

    def switch(client, code):
        barrier.wait()
        response = client.patch_json(
            f"/api/admin/currencies/{code}", {"default": True}, expect_errors=True
        )
        statuses.append(response.status_int)

    threads = [threading.Thread(target=switch, args=pair) for pair in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Changes to currencies are serialised by lock_currencies: every switch succeeds.
    assert statuses == [200, 200, 200], statuses
    assert len(defaults(dbsession)) == 1
