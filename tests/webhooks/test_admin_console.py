"""The console's webhooks pages (WebTest): the list, the forms, the secret shown once on
the post's own answer, rotate, enable/disable, delete with a confirm step, the test
event, the delivery log and redelivery; hostile forms and who may see the pages."""

from __future__ import annotations

from fakes.webhook_receiver import WebhookReceiver
from helpers.app import TEST_SECRET
from helpers.clients import logged_in, page_client
from helpers.confirm import confirm, confirmation_of
from helpers.notices import flashed
from helpers.webhook_events import deliveries_to, subscribe
from sqlalchemy import select

from cmsshop.models import WebhookEndpoint
from cmsshop.services.webhooks import signing
from cmsshop.services.webhooks.delivery import deliver_due


def new_endpoint(admin_pages, url="http://127.0.0.1:9/hook", types=("order.paid",)):
    form = admin_pages.get("/admin/webhooks/new").forms["webhook-form"]
    form["url"] = url
    form["description"] = "ERP"
    for field in form.fields["event_types"]:
        if field._value in types:
            field.checked = True
    return form.submit(status="*")


def stored(dbsession) -> list[WebhookEndpoint]:
    dbsession.rollback()
    dbsession.expire_all()
    return list(dbsession.scalars(select(WebhookEndpoint).order_by(WebhookEndpoint.id)))


def test_create_shows_the_secret_once_on_the_answer(admin_pages, dbsession):
    assert "No webhook endpoint yet" in admin_pages.get("/admin/webhooks").text
    answer = new_endpoint(admin_pages, types=("order.paid", "ticket.created"))
    assert answer.status_int == 200  # rendered, not redirected: nothing keeps the secret
    assert answer.headers["Cache-Control"] == "private, no-store"
    secret = answer.html.find(id="signing-secret")["value"]
    assert secret.startswith("whsec_")
    assert "will not be shown again" in answer.text
    [endpoint] = stored(dbsession)
    assert endpoint.event_types == ["order.paid", "ticket.created"]
    assert signing.decrypt_secret(TEST_SECRET, endpoint.secret_encrypted) == secret
    listed = admin_pages.get("/admin/webhooks")
    assert endpoint.url in listed.text and secret not in listed.text
    page = admin_pages.get(f"/admin/webhooks/{endpoint.id}")
    assert secret not in page.text and f"whsec_…{secret[-4:]}" in page.text


def test_hostile_forms_are_refused_with_field_errors(admin_pages, dbsession):
    for url, types in (
        ("", ("order.paid",)),
        ("ftp://example.com/", ("order.paid",)),
        ("http://127.0.0.1:9/hook", ()),
        ("x" * 3000, ("order.paid",)),
    ):
        answer = new_endpoint(admin_pages, url=url, types=types)
        assert answer.status_int == 422
        assert answer.html.find(class_="error") is not None
    form = admin_pages.get("/admin/webhooks/new").forms["webhook-form"]
    fields = {"csrf_token": form["csrf_token"].value, "url": "http://127.0.0.1:9/",
              "event_types": "order.shipped"}  # fmt: skip
    assert admin_pages.post("/admin/webhooks/new", fields, status=422)
    admin_pages.post("/admin/webhooks/new", {"url": "http://127.0.0.1:9/"}, status=403)
    assert stored(dbsession) == []


def test_edit_disable_enable_rotate_and_delete(admin_pages, dbsession):
    new_endpoint(admin_pages)
    [endpoint] = stored(dbsession)
    here = f"/admin/webhooks/{endpoint.id}"
    form = admin_pages.get(f"{here}/edit").forms["webhook-form"]
    form["description"] = "Bookkeeping"
    done = form.submit(status=303)
    assert flashed(done) == "webhook_updated"
    assert stored(dbsession)[0].description == "Bookkeeping"
    page = admin_pages.get(here)
    done = page.forms["toggle-form"].submit(status=303)
    assert flashed(done) == "webhook_disabled"
    assert "Disabled" in admin_pages.get("/admin/webhooks").text
    done = admin_pages.get(here).forms["toggle-form"].submit(status=303)
    assert flashed(done) == "webhook_enabled" and stored(dbsession)[0].enabled
    old = stored(dbsession)[0].secret_encrypted
    rotate = admin_pages.get(here).forms["rotate-form"]
    rotate["overlap_hours"] = "72"
    answer = rotate.submit(status=200)
    assert answer.headers["Cache-Control"] == "private, no-store"
    secret = answer.html.find(id="signing-secret")["value"]
    row = stored(dbsession)[0]
    assert signing.decrypt_secret(TEST_SECRET, row.secret_encrypted) == secret
    assert row.previous_secret_encrypted == old
    assert "72 hours" in answer.text
    asked = admin_pages.get(here).forms["delete-form"].submit()
    assert "Delete the webhook endpoint" in confirmation_of(asked)
    assert stored(dbsession)
    done = confirm(asked)
    assert flashed(done) == "webhook_deleted" and stored(dbsession) == []


def test_test_event_log_and_redeliver(admin_pages, dbsession, app):
    receiver = WebhookReceiver().start()
    try:
        answer = new_endpoint(admin_pages, url=receiver.url())
        receiver.secrets = [answer.html.find(id="signing-secret")["value"]]
        [endpoint] = stored(dbsession)
        here = f"/admin/webhooks/{endpoint.id}"
        done = admin_pages.get(here).forms["test-form"].submit(status=303)
        assert flashed(done) == "webhook_test_sent"
        assert deliver_due(app.registry).succeeded == 1
        [got] = receiver.received
        assert got.event["type"] == "webhook.test"
        assert got.verified_with == receiver.secrets
        page = admin_pages.get(here)
        assert "webhook.test" in page.text and "HTTP 200" in page.text
        [delivery] = deliveries_to(dbsession, endpoint)
        action = f"{here}/deliveries/{delivery.id}/redeliver"
        form = next(f for f in page.forms.values() if f.action == action)
        done = form.submit(status=303)
        assert flashed(done) == "webhook_redelivered"
        assert deliver_due(app.registry).succeeded == 1
        assert len(receiver.received) == 2
        assert "(redelivery)" in admin_pages.get(here).text
    finally:
        receiver.stop()


def test_unknown_ids_and_actions_are_404(admin_pages, dbsession):
    endpoint = subscribe(dbsession)
    admin_pages.get("/admin/webhooks/999", status=404)
    admin_pages.get("/admin/webhooks/abc/edit", status=404)
    token = admin_pages.get("/admin/webhooks/new").forms["webhook-form"]["csrf_token"].value
    admin_pages.post(f"/admin/webhooks/{endpoint.id}/explode", {"csrf_token": token}, status=404)
    admin_pages.post(
        f"/admin/webhooks/{endpoint.id}/deliveries/5/redeliver", {"csrf_token": token}, status=404
    )


def test_only_admins_see_the_pages(app, customer, dbsession):
    endpoint = subscribe(dbsession)
    anonymous = page_client(app)
    assert "/login" in anonymous.get("/admin/webhooks", status=303).location
    shopper = logged_in(app, customer)
    for path in ("/admin/webhooks", "/admin/webhooks/new", f"/admin/webhooks/{endpoint.id}"):
        shopper.get(path, status=403)
