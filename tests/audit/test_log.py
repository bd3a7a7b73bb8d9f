"""The audit log beyond the walk: console forms, refusals and rollbacks, the CLI, the
list's filters and CSV export, immutability, the licence and order pages, secrets."""

from __future__ import annotations

import csv
import io

import pytest
from fakes.shop import make_catalogue, make_order
from helpers.account_data import activate, paid_order
from helpers.audit import all_entries, entries_since, last_entry_id, token_for
from helpers.cli import run_admin
from helpers.clients import new_client
from helpers.support import open_ticket
from sqlalchemy import select

from cmsshop.models import (
    Activation,
    AuditEntry,
    License,
    OrderItem,
    Product,
    SupportTicket,
    User,
    WebhookDelivery,
    WebhookEndpoint,
)
from cmsshop.services.apitokens.tokens import create_token
from cmsshop.services.audit import capture
from cmsshop.services.audit.entries import record_change
from cmsshop.services.licensing.records import fingerprint_hash


@pytest.fixture
def shop(dbsession):
    return make_catalogue(dbsession)


def license_key_of(dbsession, customer) -> str:
    order = paid_order(dbsession, customer, ("site-guard",))
    return dbsession.scalar(
        select(License.key)
        .join(OrderItem, OrderItem.id == License.order_item_id)
        .where(OrderItem.order_id == order.id)
    )


def form_of(page, action_end: str):
    return next(f for f in page.forms.values() if (f.action or "").endswith(action_end))


# --- channels ---------------------------------------------------------------------------


def test_console_forms_are_recorded_as_the_console(admin_pages, admin, dbsession, shop, customer):
    order = make_order(dbsession, customer)
    page = admin_pages.get(f"/admin/orders/{order.number}")
    form = form_of(page, f"/admin/orders/{order.number}/notes")
    form["body"] = "Called the customer."
    form.submit(status=303)

    page = admin_pages.get("/admin/currencies/USD/edit")
    form = form_of(page, "/admin/currencies/USD/edit")
    form["name"] = "American dollar"
    form.submit(status=303)

    entries = all_entries(dbsession)
    by_action = {entry.action: entry for entry in entries}
    note = by_action["order_note.created"]
    assert (note.actor, note.channel, note.ip) == (f"user:{admin.id}", "console", "127.0.0.1")
    assert note.via == "POST /admin/orders/{number}/notes"
    assert note.summary["after"]["body"] == "Called the customer."
    currency = by_action["currency.updated"]
    assert currency.object_id == "USD" and currency.channel == "console"
    assert currency.summary == {"before": {"name": "USD"}, "after": {"name": "American dollar"}}


def test_reading_records_nothing(admin_app, admin_pages, dbsession, shop):
    admin_app.get("/api/admin/products")
    admin_pages.get("/admin/products")
    admin_app.get("/api/admin/audit")
    assert all_entries(dbsession) == []


def test_a_refused_change_leaves_no_entry(admin_app, dbsession, shop, customer):
    key = license_key_of(dbsession, customer)
    mark = last_entry_id(dbsession)
    admin_app.patch_json("/api/admin/products/site-guard", {"name": ""}, status=422)
    admin_app.post_json(f"/api/admin/licenses/{key}/reinstate", {}, status=409)
    assert entries_since(dbsession, mark) == []


def test_a_rolled_back_change_takes_its_entries_with_it(app, admin, dbsession, shop):
    session = app.registry["cmsshop.session_factory"]()
    try:
        capture.set_context(session, capture.AuditContext(actor=f"user:{admin.id}", channel="api"))
        product = session.scalar(select(Product).where(Product.slug == "themes"))
        product.name = "Renamed"
        session.flush()
        seen = session.scalars(select(AuditEntry.action)).all()
        assert seen == ["product.updated"]  # in the change's own transaction
        session.rollback()
    finally:
        session.close()
    assert all_entries(dbsession) == []


def test_without_a_context_nothing_is_recorded(app, dbsession, shop):
    session = app.registry["cmsshop.session_factory"]()
    with session.begin():
        session.scalar(select(Product).where(Product.slug == "themes")).name = "System"
    session.close()
    assert all_entries(dbsession) == []


def test_cli_create_user_is_recorded_as_the_operator(ini, dbsession):
    result = run_admin(
        ini,
        "create-user",
        "ops@example.com",
        "--admin",
        "--password-stdin",
        stdin="a long enough password\n",
    )
    assert result.returncode == 0, result.stderr
    (entry,) = all_entries(dbsession)
    user = dbsession.scalar(select(User).where(User.email == "ops@example.com"))
    assert (entry.action, entry.object_id) == ("user.created", str(user.id))
    assert entry.channel == "cli" and entry.actor.startswith("cli:")
    assert entry.via == "cmsshop-admin create-user"
    assert entry.summary["after"]["password_hash"] == "[redacted]"
    assert entry.summary["after"]["role"] == "admin"


# --- the list, its filters and export ---------------------------------------------------


def add_entry(dbsession, **fields) -> AuditEntry:
    values = {
        "actor": "user:1",
        "channel": "api",
        "action": "product.updated",
        "object_type": "product",
        "object_id": "site-guard",
        "summary": {},
        **fields,
    }
    entry = AuditEntry(**values)
    dbsession.add(entry)
    dbsession.commit()
    return entry


def test_the_api_filters_and_pages_newest_first(admin_app, admin, dbsession, shop):
    admin_app.patch_json("/api/admin/products/site-guard", {"name": "Guard"})
    admin_app.patch_json("/api/admin/products/themes", {"name": "Themes"})
    admin_app.patch_json("/api/admin/currencies/USD", {"name": "Dollar"})

    body = admin_app.get("/api/admin/audit").json
    assert body["total"] == 3 and body["page"] == 1
    assert [item["objectId"] for item in body["items"]] == ["USD", "themes", "site-guard"]
    first = body["items"][2]
    assert first["actor"] == f"user:{admin.id}" and first["actorUserId"] == admin.id
    assert first["summary"] == {"before": {"name": "SiteGuard"}, "after": {"name": "Guard"}}
    assert first["createdAt"].endswith("Z") and first["via"] == "PATCH /api/admin/products/{slug}"

    def ids(query):
        return [
            item["objectId"] for item in admin_app.get(f"/api/admin/audit?{query}").json["items"]
        ]

    assert ids("objectType=product") == ["themes", "site-guard"]
    assert ids("objectType=product&objectId=themes") == ["themes"]
    assert ids("action=currency.updated") == ["USD"]
    assert ids(f"actor=user:{admin.id}&perPage=1&page=2") == ["themes"]
    assert ids("actor=token:1") == []
    assert ids("from=2000-01-01&to=2000-12-31") == []
    assert len(ids("from=2000-01-01")) == 3
    assert admin_app.get("/api/admin/audit?from=yesterday", status=422).json["code"] == (
        "validation_failed"
    )


def test_csv_export_neutralises_formulas(admin_pages, dbsession, admin):
    add_entry(dbsession, object_id='=HYPERLINK("http://evil")', via="@SUM(A1)", ip="-1+2")
    add_entry(dbsession, object_type="coupon", object_id="SAVE10", action="coupon.created")
    response = admin_pages.get("/admin/audit.csv?objectType=product")
    assert response.content_type == "text/csv"
    assert "attachment" in response.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == 1  # the filter applies to the export
    (row,) = rows
    assert row["object_id"] == '\'=HYPERLINK("http://evil")'
    assert row["via"] == "'@SUM(A1)" and row["ip"] == "'-1+2"
    assert row["actor"] == "user:1"
    everything = list(csv.DictReader(io.StringIO(admin_pages.get("/admin/audit.csv").text)))
    assert [r["object_type"] for r in everything] == ["coupon", "product"]


def test_the_console_list_shows_who_what_and_the_change(admin_pages, admin, dbsession, shop):
    token, value = token_for(dbsession, admin, name="deploy bot")
    client = new_client(admin_pages.app)
    client.extra_environ["HTTP_AUTHORIZATION"] = f"Bearer {value}"
    client.patch_json("/api/admin/products/site-guard", {"name": "Guard"})
    page = admin_pages.get("/admin/audit")
    text = page.text
    assert admin.email in text and "deploy bot" in text and token.prefix in text
    assert "product.updated" in text and "SiteGuard → Guard" in text
    filtered = admin_pages.get("/admin/audit?objectType=coupon")
    assert "No entry matches." in filtered.text
    assert 'href="/admin/audit.csv?objectType=coupon"' in filtered.text


def test_no_route_edits_or_deletes_an_entry(admin_app, dbsession):
    entry = add_entry(dbsession)
    for method in ("put", "patch", "delete", "post"):
        response = getattr(admin_app, method)("/api/admin/audit", status="*")
        assert response.status_int in (404, 405)
        response = getattr(admin_app, method)(f"/api/admin/audit/{entry.id}", status="*")
        assert response.status_int in (404, 405)
    assert [e.id for e in all_entries(dbsession)] == [entry.id]


@pytest.mark.parametrize("change", ["edit", "delete"])
def test_the_orm_refuses_to_change_an_entry(app, dbsession, change):
    entry = add_entry(dbsession)
    session = app.registry["cmsshop.session_factory"]()
    try:
        row = session.get(AuditEntry, entry.id)
        if change == "edit":
            row.summary = {"after": {"name": "forged"}}
        else:
            session.delete(row)
        with pytest.raises(capture.AuditEntryImmutable):
            session.flush()
    finally:
        session.rollback()
        session.close()
    assert all_entries(dbsession)[0].summary == {}


# --- the licence and order pages ---------------------------------------------------------


def test_the_license_page_shows_its_entries(admin_app, admin_pages, dbsession, shop, customer):
    key = license_key_of(dbsession, customer)
    other = license_key_of(dbsession, customer)
    admin_app.post_json(f"/api/admin/licenses/{key}/seats", {"maxActivations": 7})
    admin_app.post_json(f"/api/admin/licenses/{other}/suspend", {})
    page = admin_pages.get(f"/admin/licenses/{key}")
    section = page.html.find("section", attrs={"aria-labelledby": "audit"})
    assert "license.updated" in section.text and "7" in section.text
    assert "suspended" not in section.text  # the other licence's entry


def test_the_order_page_shows_its_entries_and_its_notes(
    admin_pages, admin_app, dbsession, shop, customer
):
    order = make_order(dbsession, customer)
    other = make_order(dbsession, customer)
    admin_app.post_json(
        f"/api/admin/orders/{order.number}/fulfil", {"reason": "paid by bank transfer"}
    )
    admin_app.post_json(f"/api/admin/orders/{other.number}/fulfil", {"reason": "paid in cash"})
    page = admin_pages.get(f"/admin/orders/{order.number}")
    form = form_of(page, f"/admin/orders/{order.number}/notes")
    form["body"] = "Checked the transfer."
    form.submit(status=303)
    section = admin_pages.get(f"/admin/orders/{order.number}").html.find(
        "section", attrs={"aria-labelledby": "audit"}
    )
    assert "order.updated" in section.text and "order_note.created" in section.text
    assert other.number not in section.text


# --- secrets -----------------------------------------------------------------------------


def summaries(dbsession) -> str:
    return " ".join(repr(entry.summary) for entry in all_entries(dbsession))


def test_secrets_never_reach_a_summary(card_app, admin, dbsession):
    client = new_client(card_app)
    client.login(admin.email)
    client.put_json(
        "/api/admin/settings/payments",
        {"cardprovider": {"apiKey": "sk_live_topsecret1234", "webhookSecrets": ["whsec_hidden99"]}},
    )
    session = card_app.registry["cmsshop.session_factory"]()
    context = capture.AuditContext(actor=f"user:{admin.id}", channel="api")
    with capture.acting_as(context), session.begin():
        user = session.get(User, admin.id)
        token, value = create_token(session, name="bot", scopes=["all"], created_by=user)
        session.add(
            WebhookEndpoint(
                url="https://hooks.example.com/in",
                description="CRM",
                event_types=["order.paid"],
                secret_encrypted="ciphertext-of-the-signing-secret",
                created_by_id=admin.id,
            )
        )
        user.password_hash = "argon2$new-hash"
    session.close()
    text = summaries(dbsession)
    for secret in (
        "sk_live_topsecret1234",
        "whsec_hidden99",
        value,
        token.token_hash,
        "ciphertext-of-the-signing-secret",
        "argon2$new-hash",
    ):
        assert secret not in text
    actions = {entry.action for entry in all_entries(dbsession)}
    assert {"payment_setting.created", "api_token.created", "webhook_endpoint.created"} <= actions
    assert "user.updated" in actions and "[redacted]" in text


def test_long_text_is_shortened(app, admin, dbsession, shop):
    session = app.registry["cmsshop.session_factory"]()
    context = capture.AuditContext(actor="cli:ops", channel="cli")
    with capture.acting_as(context), session.begin():
        product = session.scalar(select(Product).where(Product.slug == "themes"))
        product.description = "x" * 5000
    session.close()
    (entry,) = all_entries(dbsession)
    assert len(entry.summary["after"]["description"]) <= 120
    assert entry.actor == "cli:ops" and entry.actor_id is None


def test_explicit_entries_get_the_channel_and_route(admin_app, admin, dbsession):
    admin_app.post_json(
        "/api/admin/legal/terms", {"title": "Terms of sale", "body": "# Terms\n\nOne."}
    )
    published = [e for e in all_entries(dbsession) if e.action == "legal.publish"]
    assert published and published[0].channel == "api"
    assert published[0].via == "POST /api/admin/legal/{kind}"


def test_an_account_owners_own_change_is_on_the_account_channel(app, dbsession, admin):
    session = app.registry["cmsshop.session_factory"]()
    with session.begin():
        record_change(
            session,
            action="account.name_changed",
            object_type="user",
            object_id=admin.id,
            actor=session.get(User, admin.id),
            summary={"name": "Ada"},
        )
    session.close()
    (entry,) = all_entries(dbsession)
    assert (entry.channel, entry.via, entry.actor) == ("account", None, f"user:{admin.id}")


def test_bulk_updates_are_recorded_row_by_row(admin_app, admin, dbsession, shop, customer):
    key = license_key_of(dbsession, customer)
    license = dbsession.scalar(select(License).where(License.key == key))
    for domain in ("a.example", "b.example"):
        dbsession.add(
            Activation(
                license_id=license.id,
                fingerprint=f"install-{domain}",
                fingerprint_sha256=fingerprint_hash(f"install-{domain}"),
                domain=domain,
                environment="production",
                active=True,
            )
        )
    dbsession.commit()
    mark = last_entry_id(dbsession)
    admin_app.post_json(f"/api/admin/licenses/{key}/reset", {})
    admin_app.patch_json("/api/admin/currencies/USD", {"default": True})
    entries = entries_since(dbsession, mark)
    reset = [e for e in entries if e.action == "activation.updated"]
    assert len(reset) == 2
    assert {e.via for e in reset} == {"POST /api/admin/licenses/{key}/{action}"}
    assert reset[0].summary["before"]["active"] is True
    assert reset[0].summary["after"]["active"] is False
    currencies = {e.object_id: e.summary for e in entries if e.action == "currency.updated"}
    assert currencies["EUR"] == {"before": {"is_default": True}, "after": {"is_default": False}}
    assert currencies["USD"]["after"]["is_default"] is True
    page = admin_app.get(f"/admin/licenses/{key}")  # the licence page lists its activations'
    assert page.text.count("activation.updated") == 2


def test_webhook_endpoints_are_recorded_without_their_secret(admin_app, dbsession):
    created = admin_app.post_json(
        "/api/admin/webhooks",
        {"url": "http://127.0.0.1:9/hook", "eventTypes": ["order.paid"], "description": "CRM"},
        status=201,
    ).json
    endpoint_id = created["id"]
    rotated = admin_app.post_json(f"/api/admin/webhooks/{endpoint_id}/rotate-secret", {}).json
    admin_app.post_json(f"/api/admin/webhooks/{endpoint_id}/test", {}, status=202)
    delivery = dbsession.scalar(
        select(WebhookDelivery).where(WebhookDelivery.endpoint_id == endpoint_id)
    )
    delivery.status = "failed"
    dbsession.commit()
    admin_app.post_json(
        f"/api/admin/webhooks/{endpoint_id}/deliveries/{delivery.id}/redeliver", {}, status=202
    )
    entries = [e for e in all_entries(dbsession) if e.object_type == "webhook_endpoint"]
    assert {e.object_id for e in entries} == {str(endpoint_id)}
    assert [e.action for e in entries] == [
        "webhook_endpoint.created",
        "webhook_endpoint.updated",
        "webhook_endpoint.test_sent",
        "webhook_endpoint.redelivered",
    ]
    assert entries[0].summary["after"]["secret_encrypted"] == "[redacted]"
    assert entries[1].summary["after"]["previous_secret_encrypted"] == "[redacted]"
    assert entries[3].summary["after"] == {"delivery": delivery.id, "status": "pending"}
    text = summaries(dbsession)
    for secret in (created["secret"], rotated["secret"]):
        assert secret not in text


def test_customers_and_runtimes_are_not_admin_changes(app, account, customer, dbsession):
    """A site activating its licence, a customer opening a ticket: rows of audited
    models change without an admin, and no entry is written."""
    activate(app, account.license.key, "shop.example", "install-one")
    client = new_client(app)
    client.login(customer.email)
    open_ticket(client)
    dbsession.rollback()
    assert dbsession.scalar(select(Activation.id)) is not None
    assert dbsession.scalar(select(SupportTicket.id)) is not None
    assert all_entries(dbsession) == []
