"""A coupon capped at one redemption, checked out by many buyers at the same moment:
exactly one order is placed with it, every other checkout is refused with
``coupon_used_up`` and changes nothing -- across two server processes on PostgreSQL,
and across the threads of one server on any database."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import requests
from helpers.app import PASSWORD, requires_postgresql, serve
from helpers.checkout import BILLING
from helpers.coupons import make_coupon
from sqlalchemy import func, select

from cmsshop.models import CartLine, Coupon, CouponRedemption, Order


def buyer_with_cart(url: str, email: str) -> tuple[requests.Session, str, str]:
    """A logged-in customer whose cart holds site-guard with coupon ONCE applied:
    (their HTTP session, the cart's id, their CSRF token)."""
    http = requests.Session()
    token = http.get(f"{url}/api/auth/session", timeout=30).json()["csrfToken"]
    login = http.post(
        f"{url}/api/auth/login",
        json={"email": email, "password": PASSWORD},
        headers={"X-CSRF-Token": token},
        timeout=30,
    )
    assert login.status_code == 200, login.text
    headers = {"X-CSRF-Token": login.json()["csrfToken"]}
    cart = http.post(f"{url}/api/store/carts", json={}, headers=headers, timeout=30).json()["id"]
    for method, path, body in (
        ("put", f"/api/store/carts/{cart}/lines/site-guard", {"quantity": 1}),
        ("put", f"/api/store/carts/{cart}/coupon", {"code": "once"}),
    ):
        answer = http.request(method, url + path, json=body, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
    assert answer.json()["discount"] == 490
    return http, cart, headers["X-CSRF-Token"]


def race(urls: list[str], dbsession, make_user, buyers: int) -> list[requests.Response]:
    make_coupon(dbsession, "ONCE", percent_off=10, max_redemptions=1)
    prepared = [
        buyer_with_cart(urls[i % len(urls)], make_user(f"racer{i}@example.com").email)
        for i in range(buyers)
    ]
    barrier = threading.Barrier(buyers)

    def check_out(index: int) -> requests.Response:
        http, cart, token = prepared[index]
        url = urls[(index + 1) % len(urls)]  # the other server than the one that built it
        barrier.wait(timeout=30)
        return http.post(
            f"{url}/api/store/carts/{cart}/checkout",
            json={"provider": "cardprovider", "billing": BILLING},
            headers={"X-CSRF-Token": token},
            timeout=120,
        )

    with ThreadPoolExecutor(max_workers=buyers) as pool:
        return list(pool.map(check_out, range(buyers)))


def check_one_redemption(dbsession, responses: list[requests.Response]) -> None:
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [201] + [422] * (len(responses) - 1), [r.text for r in responses]
    refused = [r.json() for r in responses if r.status_code == 422]
    assert {body["code"] for body in refused} == {"coupon_used_up"}
    assert all(body["errors"] == {"coupon": body["message"]} for body in refused)
    (placed,) = [r.json() for r in responses if r.status_code == 201]
    dbsession.commit()  # a fresh snapshot
    assert dbsession.scalar(select(Coupon.reserved)) == 1
    redemptions = dbsession.execute(
        select(CouponRedemption.status, Order.number, Order.coupon_code, Order.total).join(
            Order, Order.id == CouponRedemption.order_id
        )
    ).all()
    assert redemptions == [("reserved", placed["order"]["number"], "ONCE", 4410)]
    # The refused checkouts left nothing behind: no order, and their carts as they were.
    assert dbsession.scalar(select(func.count()).select_from(Order)) == 1
    assert dbsession.scalar(select(func.count()).select_from(CartLine)) == len(responses) - 1


@requires_postgresql
def test_twenty_checkouts_across_two_server_processes_redeem_once(
    two_servers, dbsession, make_user, catalogue, fake_stripe
):
    responses = race(two_servers, dbsession, make_user, 20)
    check_one_redemption(dbsession, responses)


def test_checkouts_across_the_threads_of_one_server_redeem_once(
    card_app, dbsession, make_user, catalogue, fake_stripe
):
    with serve(card_app) as url:
        responses = race([url], dbsession, make_user, 8)
    check_one_redemption(dbsession, responses)
