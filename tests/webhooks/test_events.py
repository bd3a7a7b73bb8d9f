"""Each outgoing webhook event is written by its real cause, through the real app, in
the cause's transaction: nothing for a rolled-back change, nothing for an endpoint not
subscribed to the type, nothing for a disabled one. Every event written here is the body
the OpenAPI document's ``webhooks`` describe for its type."""

from __future__ import annotations

import json

import jsonschema_rs
import pytest
import webtest
from fakes.shop import make_order
from fakes.stripe_api import charge_object, delivery, event, session_object
from helpers.clients import logged_in
from helpers.license_changes import buy, order_of, pay
from helpers.licensing import call_body, make_license, make_product, post, runtime
from helpers.payments import send
from helpers.support import open_ticket as open_ticket_by_api
from helpers.webhook_events import deliveries_to, events, subscribe, types_of
from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import Activation, License, WebhookEvent
from cmsshop.openapi import build_document
from cmsshop.services.licensing import admin as license_admin
from cmsshop.services.payments.events import queue
from cmsshop.services.payments.registry import REGISTRY_KEY
from cmsshop.services.support import tickets
from cmsshop.services.webhooks.events import event_body

SECRET_WORDS = ("password", "secret", "whsec_", "sk_", "hash")


def assert_no_secret(data: dict) -> None:
    text = repr(data).lower()
    for word in SECRET_WORDS:
        assert word not in text, word


@pytest.fixture(autouse=True)
def events_match_the_document(app, engine):
    """After each test: every event it wrote matches its type's schema in the document."""
    yield
    webhooks = build_document(app.registry)["webhooks"]
    with Session(engine) as session:
        for event in session.scalars(select(WebhookEvent)):
            request = webhooks[event.type]["post"]["requestBody"]
            schema = request["content"]["application/json"]["schema"]
            body = json.loads(json.dumps(event_body(event)))
            errors = [e.message for e in jsonschema_rs.validator_for(schema).iter_errors(body)]
            assert errors == [], (event.type, body)


@pytest.fixture
def everything(dbsession):
    """An endpoint subscribed to every event type."""
    return subscribe(dbsession)


def test_order_paid_and_license_created_by_the_card_webhook(
    webhook, fake_stripe, catalogue, customer, everything, dbsession
):
    only_tickets = subscribe(dbsession, event_types=["ticket.created"])
    disabled = subscribe(dbsession, enabled=False)
    order = make_order(dbsession, customer, ("site-guard", "themes"))
    answer, _, _ = pay(webhook, fake_stripe, order)
    assert answer["status"] == "processed"
    assert types_of(dbsession) == ["license.created", "order.paid"]
    paid = events(dbsession, "order.paid")[0]
    assert paid.subject == f"order:{order.number}"
    data = paid.data
    assert data["orderNumber"] == order.number and data["status"] == "paid"
    assert data["customerEmail"] == customer.email
    assert data["total"] == order.total and data["currency"] == order.currency
    assert [item["productSlug"] for item in data["items"]] == ["site-guard", "themes"]
    assert data["paidAt"].endswith("Z")
    license = dbsession.scalar(select(License))
    created = events(dbsession, "license.created")[0]
    assert created.subject == f"license:{license.id}"
    assert created.data["licenseKey"] == license.key
    assert created.data["productSlug"] == "site-guard"
    assert created.data["status"] == "active" and created.data["seats"] == license.max_activations
    assert created.data["orderNumber"] == order.number
    for found in (paid, created):
        assert_no_secret(found.data)
    assert len(deliveries_to(dbsession, everything)) == 2
    assert deliveries_to(dbsession, only_tickets) == []
    assert deliveries_to(dbsession, disabled) == []
    # The provider sends it again: no second event.
    pay(webhook, fake_stripe, order_of(dbsession, order.number))
    assert types_of(dbsession) == ["license.created", "order.paid"]


def test_no_endpoint_no_event(webhook, fake_stripe, catalogue, customer, dbsession):
    subscribe(dbsession, enabled=False)
    order = make_order(dbsession, customer, ("site-guard",))
    assert pay(webhook, fake_stripe, order)[0]["status"] == "processed"
    assert events(dbsession) == []


def test_the_batch_path_writes_the_same_events(
    make_app, card_settings, webhook, fake_stripe, catalogue, customer, everything, dbsession
):
    queued = make_app(**card_settings, **{"cmsshop.payments.webhook_processing": "queued"})
    client = webtest.TestApp(queued)
    inline = make_order(dbsession, customer, ("site-guard", "themes"))
    batched = [make_order(dbsession, customer, ("site-guard", "themes")) for _ in range(3)]
    assert pay(webhook, fake_stripe, inline)[0]["status"] == "processed"
    for order in batched:
        session = fake_stripe.add_session(session_object(order.number, order.total))
        body, headers = delivery(event("checkout.session.completed", session))
        for _ in range(2):  # each delivered twice
            client.post("/api/webhooks/cardprovider", body, headers=headers, status=200)
    done = queue.process_due_events(queued.registry, queued.registry[REGISTRY_KEY])
    assert done == {"processed": 3}
    paid = events(dbsession, "order.paid")
    assert sorted(e.subject for e in paid) == sorted(
        f"order:{o.number}" for o in [inline, *batched]
    )
    created = events(dbsession, "license.created")
    assert len(created) == 4
    by_order = {e.data["orderNumber"]: e for e in paid}

    def shape(data, number):
        return {k: v for k, v in data.items() if k not in ("orderNumber", "paidAt")}

    for order in batched:
        assert shape(by_order[order.number].data, order.number) == shape(
            by_order[inline.number].data, inline.number
        )
    licenses = {row.id: row for row in dbsession.scalars(select(License))}
    inline_created = next(e for e in created if e.data["orderNumber"] == inline.number)
    for found in created:
        license = licenses[found.data["licenseId"]]
        assert found.subject == f"license:{license.id}"
        assert found.data["licenseKey"] == license.key
        assert set(found.data) == set(inline_created.data)
    assert len(deliveries_to(dbsession, everything)) == 8


def test_a_full_refund_writes_order_refunded_and_license_revoked(
    webhook, fake_stripe, catalogue, customer, everything, dbsession
):
    order = make_order(dbsession, customer, ("site-guard",))
    _, _, intent = pay(webhook, fake_stripe, order)
    partial = event("charge.refunded", charge_object(intent, order.total, order.total - 100))
    send(webhook, partial, 200)
    assert "order.refunded" not in types_of(dbsession)
    refund = event("charge.refunded", charge_object(intent, order.total))
    assert send(webhook, refund, 200).json["status"] == "processed"
    assert send(webhook, refund, 200).json["status"] == "duplicate"
    refunded = events(dbsession, "order.refunded")
    assert len(refunded) == 1
    assert refunded[0].data["status"] == "refunded" and refunded[0].data["reason"] == "refund"
    revoked = events(dbsession, "license.revoked")
    assert len(revoked) == 1 and revoked[0].data["status"] == "revoked"


def test_an_admin_revoke_writes_license_revoked(
    admin_app, license_for_customer, everything, dbsession
):
    admin_app.post(f"/api/admin/licenses/{license_for_customer.key}/revoke", status=200)
    revoked = events(dbsession, "license.revoked")
    assert [e.subject for e in revoked] == [f"license:{license_for_customer.id}"]
    admin_app.post(f"/api/admin/licenses/{license_for_customer.key}/revoke", status=409)
    assert len(events(dbsession, "license.revoked")) == 1


@pytest.fixture
def license_for_customer(dbsession, customer):
    return make_license(dbsession, make_product(dbsession, "site-guard-pro"), user_id=customer.id)


def test_activations_created_and_deleted_by_the_runtime_the_owner_and_an_admin(
    app, admin, customer, license_for_customer, everything, dbsession
):
    client = runtime(app)
    lic = license_for_customer
    post(client, "activate", call_body(lic), status=201)
    post(client, "activate", call_body(lic), status="*")  # the same installation again
    post(client, "validate", call_body(lic), status="*")
    created = events(dbsession, "activation.created")
    assert len(created) == 1
    assert created[0].subject == f"license:{lic.id}"
    assert created[0].data["licenseKey"] == lic.key
    assert created[0].data["fingerprint"] == "install-0001"
    post(client, "deactivate", call_body(lic), status=200)
    post(client, "deactivate", call_body(lic), status="*")
    assert len(events(dbsession, "activation.deleted")) == 1
    post(client, "activate", call_body(lic, fingerprint="install-0002"), status=201)
    assert len(events(dbsession, "activation.created")) == 2
    owner = logged_in(app, customer)
    dbsession.rollback()
    active = dbsession.scalar(
        select(Activation).where(Activation.license_id == lic.id, Activation.active.is_(True))
    )
    owner.post_json(
        f"/api/dashboard/licenses/{lic.key}/activations/{active.id}/deactivate",
        {},
        headers={"X-CSRF-Token": owner.get("/api/auth/session").json["csrfToken"]},
        status=200,
    )
    assert len(events(dbsession, "activation.deleted")) == 2
    post(client, "activate", call_body(lic, fingerprint="install-0003"), status=201)
    dbsession.rollback()
    third = dbsession.scalar(
        select(Activation).where(Activation.license_id == lic.id, Activation.active.is_(True))
    )
    with Session(dbsession.get_bind()) as session, session.begin():
        who = license_admin.Admin(id=admin.id, email=admin.email, ip="127.0.0.1")
        license_admin.deactivate_activation(session, lic.key, who, third.id)
    deleted = events(dbsession, "activation.deleted")
    assert len(deleted) == 3 and deleted[-1].data["activationId"] == third.id
    assert all(e.subject == f"license:{lic.id}" for e in events(dbsession))


def test_renewal_and_upgrade_write_their_events(
    card_buyer, webhook, fake_stripe, tiered_license, tiers, everything, dbsession
):
    placed = buy(card_buyer, {"renew": tiered_license.key}).json["order"]
    pay(webhook, fake_stripe, order_of(dbsession, placed["number"]))
    renewed = events(dbsession, "license.renewed")
    assert [e.subject for e in renewed] == [f"license:{tiered_license.id}"]
    assert renewed[0].data["orderNumber"] == placed["number"]
    placed = buy(card_buyer, {"upgrade": tiered_license.key, "to": "site-guard-agency"})
    pay(webhook, fake_stripe, order_of(dbsession, placed.json["order"]["number"]))
    upgraded = events(dbsession, "license.upgraded")
    assert len(upgraded) == 1
    assert upgraded[0].data["productSlug"] == "site-guard-agency"
    assert upgraded[0].data["seats"] == 10
    assert "license.created" not in types_of(dbsession)


def test_ticket_created_by_the_customer(customer_app, customer, everything, dbsession):
    ticket = open_ticket_by_api(customer_app, subject="Where is my key?")
    found = events(dbsession, "ticket.created")
    assert len(found) == 1
    assert found[0].data["subject"] == "Where is my key?"
    assert found[0].data["customerEmail"] == customer.email
    assert found[0].subject == f"ticket:{ticket['id']}"
    assert found[0].data["ticketId"] == ticket["id"]


def test_a_rolled_back_cause_writes_no_event(customer, everything, dbsession):
    with Session(dbsession.get_bind()) as session:
        user = session.get(type(customer), customer.id)
        tickets.open_ticket(session, user, "Rolled back", "This never happened.", None)
        assert session.scalar(select(WebhookEvent.id)) is not None  # written, uncommitted
        session.rollback()
    assert events(dbsession) == []
