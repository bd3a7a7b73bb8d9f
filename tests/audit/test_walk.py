"""Every admin route that changes state writes audit entries: the walk of the OpenAPI
document's /api/admin operations with POST, PUT, PATCH or DELETE, each performed once
as a logged-in admin and once with an API token.

CASES says, per (method, path template), how to arrange the data and which valid call
changes something; a route added to the document without a case fails the walk.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable

import pytest
import webtest
from fakes.shop import event_row, make_catalogue, make_order
from fakes.stripe_api import closed_port_url, delivery, event, session_object
from helpers.account_data import paid_order
from helpers.audit import entries_since, last_entry_id, token_for
from helpers.clients import new_client
from helpers.outbox import queue
from helpers.refunds import card_paid_order
from helpers.store import add_release
from helpers.subscriptions import subscribe
from helpers.support import open_ticket
from helpers.tax import SELLER_DE_FIELDS
from PIL import Image
from sqlalchemy import select, update

from cmsshop.models import (
    Article,
    License,
    OrderItem,
    OutboxMessage,
    Product,
    Subscription,
    SubscriptionPlan,
    WebhookDelivery,
)
from cmsshop.services.apitokens.scopes import ALL, missing_scope
from cmsshop.util import utcnow

UNSAFE = ("post", "put", "patch", "delete")
TOKEN_IP = "198.51.100.7"


@dataclasses.dataclass
class World:
    """What the cases arrange with: the database, the people, the fakes."""

    dbsession: object
    customer: object
    customer_client: object
    fake_stripe: object
    make_app: Callable
    card_settings: dict
    card_app: object
    admin_client: object
    admin: object
    seq: int = 0

    def next(self) -> int:
        self.seq += 1
        return self.seq


@dataclasses.dataclass
class Call:
    method: str
    url: str
    body: dict | None = None
    kwargs: dict = dataclasses.field(default_factory=dict)
    # Object types one of the entries must be about.
    objects: tuple[str, ...] = ()


def png(shade: int) -> bytes:
    """A small PNG of its own shade (a product refuses the same picture twice)."""
    out = io.BytesIO()
    Image.new("RGB", (32, 24), (200, shade % 256, 30)).save(out, "PNG")
    return out.getvalue()


def article(world: World) -> str:
    slug = f"how-to-{world.next()}"
    world.dbsession.add(Article(slug=slug, title="How to", body="# Steps", published=True))
    world.dbsession.commit()
    return slug


def image_id(world: World) -> int:
    """An image of site-guard, uploaded through the admin API."""
    return world.admin_client.post(
        "/api/admin/products/site-guard/images",
        {"alt": "A square"},
        upload_files=[("file", "a.png", png(world.next()))],
        status=201,
    ).json["id"]


def a_license(world: World) -> str:
    order = paid_order(world.dbsession, world.customer, ("site-guard",))
    return world.dbsession.scalar(
        select(License.key)
        .join(OrderItem, OrderItem.id == License.order_item_id)
        .where(OrderItem.order_id == order.id)
    )


def sent_message(world: World) -> int:
    prefix = f"walk{world.next()}"
    queue(world.dbsession, 1, prefix=prefix)
    world.dbsession.execute(
        update(OutboxMessage)
        .where(OutboxMessage.dedupe_key.startswith(prefix))
        .values(status="sent", sent_at=utcnow())
    )
    world.dbsession.commit()
    return world.dbsession.scalar(
        select(OutboxMessage.id).where(OutboxMessage.dedupe_key.startswith(prefix))
    )


def failed_payment_event(world: World) -> int:
    """A checkout event whose confirmation failed (the provider API was down)."""
    order = make_order(world.dbsession, world.customer)
    stripe_session = world.fake_stripe.add_session(session_object(order.number, order.total))
    payload = event("checkout.session.completed", stripe_session)
    down = world.make_app(
        **{**world.card_settings, "cmsshop.cardprovider.api_base": closed_port_url()}
    )
    body, headers = delivery(payload)
    webtest.TestApp(down).post("/api/webhooks/cardprovider", body, headers=headers, status=503)
    return event_row(world.dbsession, payload["id"]).id


def ticket_id(world: World) -> int:
    return open_ticket(world.customer_client)["id"]


def coupon_code(world: World) -> str:
    from helpers.coupons import make_coupon

    code = f"WALK{world.next()}"
    make_coupon(world.dbsession, code)
    return code


def spare_token(world: World) -> int:
    """An API token of the admin's, to revoke."""
    token, _ = token_for(world.dbsession, world.admin, name=f"spare {world.next()}")
    return token.id


def webhook_endpoint(world: World) -> int:
    """An endpoint on loopback (allowed in tests), created through the admin API."""
    return world.admin_client.post_json(
        "/api/admin/webhooks",
        {"url": f"http://127.0.0.1:9/hook/{world.next()}", "eventTypes": ["order.paid"]},
        status=201,
    ).json["id"]


def failed_delivery(world: World) -> tuple[int, int]:
    """(endpoint id, delivery id) of a test event's delivery that failed."""
    endpoint_id = webhook_endpoint(world)
    world.admin_client.post_json(f"/api/admin/webhooks/{endpoint_id}/test", {}, status=202)
    delivery = world.dbsession.scalar(
        select(WebhookDelivery).where(WebhookDelivery.endpoint_id == endpoint_id)
    )
    delivery.status = "failed"
    world.dbsession.commit()
    return endpoint_id, delivery.id


def another_interval(world: World) -> str:
    """Not site-guard's current billing interval: the call changes something."""
    world.dbsession.commit()  # a fresh snapshot
    current = world.dbsession.scalar(select(SubscriptionPlan.interval))
    return "year" if current == "month" else "month"


def lost_renewal(world: World) -> int:
    """A paid monthly subscription of site-guard whose renewal's events were lost: the
    resync has something to record."""
    product_id = world.dbsession.scalar(select(Product.id).where(Product.slug == "site-guard"))
    if world.dbsession.scalar(select(SubscriptionPlan.id)) is None:
        world.dbsession.add(SubscriptionPlan(product_id=product_id, interval="month"))
        world.dbsession.commit()
    number, events = subscribe(world.customer_client, world.fake_stripe)
    body, headers = delivery(events["invoice.paid"])
    webtest.TestApp(world.card_app).post(
        "/api/webhooks/cardprovider", body, headers=headers, status=200
    )
    (sub_id,) = [
        ref
        for ref, found in world.fake_stripe.subscriptions.items()
        if found["metadata"].get("orderNumber") == number
    ]
    world.fake_stripe.renew(sub_id)
    world.dbsession.commit()
    return world.dbsession.scalar(
        select(Subscription.id).where(Subscription.provider_subscription_id == sub_id)
    )


CASES: dict[tuple[str, str], Callable[[World], Call]] = {
    ("put", "/api/admin/products/{slug}/subscription"): lambda w: Call(
        "put",
        "/api/admin/products/site-guard/subscription",
        {"interval": another_interval(w)},
        objects=("subscription_plan",),
    ),
    ("post", "/api/admin/subscriptions/{id}/resync"): lambda w: Call(
        "post",
        f"/api/admin/subscriptions/{lost_renewal(w)}/resync",
        objects=("subscription_period", "order"),
    ),
    ("post", "/api/admin/articles"): lambda w: Call(
        "post",
        "/api/admin/articles",
        {"slug": f"new-article-{w.next()}", "title": "New", "body": "# One"},
        objects=("article",),
    ),
    ("patch", "/api/admin/articles/{slug}"): lambda w: Call(
        "patch", f"/api/admin/articles/{article(w)}", {"title": "Renamed"}, objects=("article",)
    ),
    ("delete", "/api/admin/articles/{slug}"): lambda w: Call(
        "delete", f"/api/admin/articles/{article(w)}", objects=("article",)
    ),
    ("post", "/api/admin/coupons"): lambda w: Call(
        "post",
        "/api/admin/coupons",
        {"code": f"NEW{w.next()}", "kind": "percent", "percentOff": 10},
        objects=("coupon",),
    ),
    ("patch", "/api/admin/coupons/{code}"): lambda w: Call(
        "patch", f"/api/admin/coupons/{coupon_code(w)}", {"paused": True}, objects=("coupon",)
    ),
    ("post", "/api/admin/currencies"): lambda w: Call(
        "post",
        "/api/admin/currencies",
        {"code": ["CHF", "SEK"][w.next() % 2], "name": "Franc", "symbol": "F", "decimals": 2},
        objects=("currency",),
    ),
    ("patch", "/api/admin/currencies/{code}"): lambda w: Call(
        "patch", "/api/admin/currencies/USD", {"name": f"Dollar {w.next()}"}, objects=("currency",)
    ),
    ("post", "/api/admin/legal/{kind}"): lambda w: Call(
        "post",
        "/api/admin/legal/terms",
        {"title": "Terms of sale", "body": f"# Terms\n\nVersion {w.next()}."},
        objects=("legal_document",),
    ),
    ("post", "/api/admin/licenses/{key}/{action}"): lambda w: Call(
        "post", f"/api/admin/licenses/{a_license(w)}/suspend", {}, objects=("license",)
    ),
    ("post", "/api/admin/mail/{id}/resend"): lambda w: Call(
        "post", f"/api/admin/mail/{sent_message(w)}/resend", objects=("outbox_message",)
    ),
    ("post", "/api/admin/orders/{number}/fulfil"): lambda w: Call(
        "post",
        f"/api/admin/orders/{make_order(w.dbsession, w.customer).number}/fulfil",
        {"reason": "paid by bank transfer", "paymentReference": f"BT-{w.next()}"},
        objects=("order",),
    ),
    ("post", "/api/admin/orders/{number}/refunds"): lambda w: Call(
        "post",
        f"/api/admin/orders/{card_paid_order(w.dbsession, w.customer, w.fake_stripe).number}"
        "/refunds",
        {"full": True, "reason": "asked"},
        kwargs={"headers": {"Idempotency-Key": f"walk-{w.next()}"}},
        objects=("refund",),
    ),
    ("post", "/api/admin/payment-events/{id}/reprocess"): lambda w: Call(
        "post",
        f"/api/admin/payment-events/{failed_payment_event(w)}/reprocess",
        objects=("payment_event", "order"),
    ),
    ("post", "/api/admin/products"): lambda w: Call(
        "post",
        "/api/admin/products",
        {
            "slug": f"new-product-{w.next()}",
            "name": "New product",
            "published": False,
            "prices": [{"currency": "EUR", "amount": 900}],
        },
        objects=("product",),
    ),
    ("patch", "/api/admin/products/{slug}"): lambda w: Call(
        "patch",
        "/api/admin/products/site-guard",
        {"name": f"SiteGuard {w.next()}"},
        objects=("product",),
    ),
    ("delete", "/api/admin/products/{slug}"): lambda w: Call(
        "delete", "/api/admin/products/draft", objects=("product",)
    ),
    ("post", "/api/admin/products/{slug}/images"): lambda w: Call(
        "post",
        "/api/admin/products/site-guard/images",
        kwargs={
            "params": {"alt": "A red square"},
            "upload_files": [("file", "a.png", png(w.next()))],
        },
        objects=("product_image",),
    ),
    ("patch", "/api/admin/products/{slug}/images/{image_id}"): lambda w: Call(
        "patch",
        f"/api/admin/products/site-guard/images/{image_id(w)}",
        {"alt": "Another alt"},
        objects=("product_image",),
    ),
    ("delete", "/api/admin/products/{slug}/images/{image_id}"): lambda w: Call(
        "delete",
        f"/api/admin/products/site-guard/images/{image_id(w)}",
        objects=("product_image",),
    ),
    ("post", "/api/admin/products/{slug}/releases"): lambda w: Call(
        "post",
        "/api/admin/products/site-guard/releases",
        kwargs={
            "params": {"version": f"9.9.{w.next()}"},
            "upload_files": [("file", "walk.zip", b"PK\x03\x04 walk")],
        },
        objects=("release",),
    ),
    ("put", "/api/admin/settings/brand"): lambda w: Call(
        "put",
        "/api/admin/settings/brand",
        {"headline": f"Hello {w.next()}"},
        objects=("shop_setting",),
    ),
    ("put", "/api/admin/settings/payments"): lambda w: Call(
        "put",
        "/api/admin/settings/payments",
        {"cardprovider": {"apiKey": f"sk_live_walk{w.next():08d}"}},
        objects=("payment_setting",),
    ),
    ("put", "/api/admin/settings/seller"): lambda w: Call(
        "put",
        "/api/admin/settings/seller",
        {**SELLER_DE_FIELDS, "city": f"Berlin {w.next()}"},
        objects=("shop_setting",),
    ),
    ("patch", "/api/admin/tickets/{id}"): lambda w: Call(
        "patch", f"/api/admin/tickets/{ticket_id(w)}", {"status": "closed"}, objects=("ticket",)
    ),
    ("post", "/api/admin/tickets/{id}/messages"): lambda w: Call(
        "post",
        f"/api/admin/tickets/{ticket_id(w)}/messages",
        {"body": "Here is a new link."},
        objects=("ticket_message",),
    ),
    # The routes of API tokens (session only: a token walk expects 403 there).
    ("post", "/api/admin/api-tokens"): lambda w: Call(
        "post",
        "/api/admin/api-tokens",
        {"name": f"deploy {w.next()}", "scopes": ["catalogue"]},
        objects=("api_token",),
    ),
    ("delete", "/api/admin/api-tokens/{id}"): lambda w: Call(
        "delete", f"/api/admin/api-tokens/{spare_token(w)}", objects=("api_token",)
    ),
    # Outgoing webhooks: the endpoints, and the two deliveries only an admin starts.
    ("post", "/api/admin/webhooks"): lambda w: Call(
        "post",
        "/api/admin/webhooks",
        {"url": f"http://127.0.0.1:9/hook/{w.next()}", "eventTypes": ["order.paid"]},
        objects=("webhook_endpoint",),
    ),
    ("patch", "/api/admin/webhooks/{id}"): lambda w: Call(
        "patch",
        f"/api/admin/webhooks/{webhook_endpoint(w)}",
        {"description": "The CRM"},
        objects=("webhook_endpoint",),
    ),
    ("delete", "/api/admin/webhooks/{id}"): lambda w: Call(
        "delete", f"/api/admin/webhooks/{webhook_endpoint(w)}", objects=("webhook_endpoint",)
    ),
    ("post", "/api/admin/webhooks/{id}/rotate-secret"): lambda w: Call(
        "post",
        f"/api/admin/webhooks/{webhook_endpoint(w)}/rotate-secret",
        {"overlapHours": 1},
        objects=("webhook_endpoint",),
    ),
    ("post", "/api/admin/webhooks/{id}/test"): lambda w: Call(
        "post", f"/api/admin/webhooks/{webhook_endpoint(w)}/test", objects=("webhook_endpoint",)
    ),
    ("post", "/api/admin/webhooks/{id}/deliveries/{delivery_id}/redeliver"): lambda w: Call(
        "post",
        "/api/admin/webhooks/{}/deliveries/{}/redeliver".format(*failed_delivery(w)),
        objects=("webhook_endpoint",),
    ),
}

# Operations that take an unsafe method but change nothing stored: the walk checks that
# they answer and leave no entry (nothing to record).
READ_ONLY: dict[tuple[str, str], Callable[[World], Call]] = {
    ("post", "/api/admin/settings/payments/{provider}/test"): lambda w: Call(
        "post", "/api/admin/settings/payments/cardprovider/test"
    ),
}


def unsafe_admin_operations(client) -> set[tuple[str, str]]:
    document = client.get("/api/openapi.json").json
    return {
        (method, path)
        for path, operations in document["paths"].items()
        if path.startswith("/api/admin/")
        for method in operations
        if method in UNSAFE
    }


@pytest.fixture
def card_admin(card_app, admin):
    client = new_client(card_app)
    client.login(admin.email)
    return client


@pytest.fixture
def world(
    dbsession,
    customer,
    fake_stripe,
    make_app,
    card_settings,
    card_app,
    card_admin,
    admin,
    storage_dir,
):
    make_catalogue(dbsession)
    add_release(dbsession, "site-guard", "2.0.0")
    customer_client = new_client(card_app)
    customer_client.login(customer.email)
    return World(
        dbsession,
        customer,
        customer_client,
        fake_stripe,
        make_app,
        card_settings,
        card_app,
        card_admin,
        admin,
    )


def perform(client, call: Call, **extra):
    kwargs = {**call.kwargs, **extra}
    if "upload_files" in kwargs:
        return client.post(call.url, kwargs.pop("params"), **kwargs)
    if call.method == "delete":
        return client.delete(call.url, **kwargs)
    return getattr(client, f"{call.method}_json")(call.url, call.body or {}, **kwargs)


def test_every_unsafe_admin_operation_has_a_case(card_admin):
    documented = unsafe_admin_operations(card_admin)
    covered = set(CASES) | set(READ_ONLY)
    assert documented - covered == set(), "add a case to CASES for each new admin route"
    assert covered - documented == set(), "a case names a route the document lacks"


def walk(world, client, dbsession, *, actor: str, ip: str, token_id: int | None, user_id: int):
    problems = []
    for (method, template), arrange in sorted(CASES.items()):
        call = arrange(world)
        mark = last_entry_id(dbsession)
        response = perform(client, call, status="*")
        if token_id is not None and missing_scope([ALL], template, method.upper()) is not None:
            # No token may call it (token management needs a browser session).
            assert response.status_int == 403, template
            assert entries_since(dbsession, mark) == [], template
            continue
        if response.status_int >= 400:
            problems.append(f"{method.upper()} {template}: {response.status} {response.text[:300]}")
            continue
        entries = entries_since(dbsession, mark)
        via = f"{method.upper()} {template}"
        if not entries:
            problems.append(f"{via}: no audit entry")
            continue
        for entry in entries:
            assert (entry.actor, entry.channel, entry.ip) == (actor, "api", ip), via
            assert (entry.actor_id, entry.actor_token_id) == (user_id, token_id), via
        assert {entry.via for entry in entries} == {via}, via
        # A token's use (last used at, from) is bookkeeping, not the admin's change.
        assert str(token_id) not in {e.object_id for e in entries if e.object_type == "api_token"}
        if not {entry.object_type for entry in entries} & set(call.objects):
            problems.append(f"{via}: entries about {[e.action for e in entries]}")
    for (_method, template), arrange in READ_ONLY.items():
        call = arrange(world)
        mark = last_entry_id(dbsession)
        perform(client, call, status=200)
        assert entries_since(dbsession, mark) == [], template
    assert problems == []


def test_each_admin_change_through_a_session_is_recorded(world, card_admin, admin, dbsession):
    walk(
        world,
        card_admin,
        dbsession,
        actor=f"user:{admin.id}",
        ip="127.0.0.1",
        token_id=None,
        user_id=admin.id,
    )


def test_each_admin_change_with_an_api_token_is_recorded(world, card_app, admin, dbsession):
    token, value = token_for(dbsession, admin)
    client = webtest.TestApp(
        card_app,
        extra_environ={"REMOTE_ADDR": TOKEN_IP, "HTTP_AUTHORIZATION": f"Bearer {value}"},
    )
    walk(
        world,
        client,
        dbsession,
        actor=f"token:{token.id}",
        ip=TOKEN_IP,
        token_id=token.id,
        user_id=admin.id,
    )
