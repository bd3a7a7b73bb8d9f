"""Admin licenses: the /admin/licenses pages and the JSON routes under
/api/admin/licenses, on one service (search, actions, audit entries naming the admin)."""

from __future__ import annotations

import datetime as dt

import pytest
from helpers.clients import logged_in, new_client, page_client
from helpers.confirm import cancel_link, confirm, confirmation_of
from helpers.html import title_of
from helpers.notices import flashed
from sqlalchemy import select

from cmsshop.models import Activation, License, LicenseAuditEntry, Product
from cmsshop.services.licensing.issuing import generate_license_key
from cmsshop.services.licensing.records import fingerprint_hash
from cmsshop.util import utcnow


def seed_license(
    session, user=None, *, slug="site-guard", status="active", expires_in_days=30, seats=3
) -> License:
    product = session.scalar(select(Product).where(Product.slug == slug))
    if product is None:
        product = Product(slug=slug, name=slug.title(), licensed=True, published=True)
        session.add(product)
        session.flush()
    license = License(
        key=generate_license_key(),
        product_id=product.id,
        user_id=user.id if user else None,
        status=status,
        max_activations=seats,
        expires_at=(utcnow() + dt.timedelta(days=expires_in_days)) if expires_in_days else None,
    )
    session.add(license)
    session.commit()
    return license


def add_activation(session, license: License, domain: str, active: bool = True) -> Activation:
    activation = Activation(
        license_id=license.id,
        fingerprint=f"install-{domain}",
        fingerprint_sha256=fingerprint_hash(f"install-{domain}"),
        domain=domain,
        environment="production",
        active=active,
    )
    session.add(activation)
    session.commit()
    return activation


def reload(session, license: License) -> License:
    session.commit()
    session.expire_all()
    return session.get(License, license.id)


def audit_of(session, license: License) -> list[LicenseAuditEntry]:
    session.commit()
    session.expire_all()
    return list(
        session.scalars(
            select(LicenseAuditEntry)
            .where(LicenseAuditEntry.license_id == license.id)
            .order_by(LicenseAuditEntry.id)
        )
    )


@pytest.fixture
def lic(dbsession, customer):
    license = seed_license(dbsession, customer)
    add_activation(dbsession, license, "shop.example.com")
    return license


# --- pages --------------------------------------------------------------------------------------


def test_search_by_key_email_and_domain(admin_pages, dbsession, customer, other_customer, lic):
    other = seed_license(dbsession, other_customer, slug="pixel-forge")
    listing = admin_pages.get("/admin/licenses")
    assert title_of(listing).startswith("Licenses")
    assert len(listing.html.find_all("h1")) == 1
    assert lic.key in listing.text and other.key in listing.text
    by_email = admin_pages.get("/admin/licenses", {"q": "ALICE@"})
    assert lic.key in by_email.text and other.key not in by_email.text
    by_domain = admin_pages.get("/admin/licenses", {"q": "shop.example"})
    assert lic.key in by_domain.text and other.key not in by_domain.text
    by_key = admin_pages.get("/admin/licenses", {"q": other.key})
    assert other.key in by_key.text and lic.key not in by_key.text
    # LIKE wildcards are text, not patterns.
    assert "No license matches" in admin_pages.get("/admin/licenses", {"q": "%"}).text
    paged = admin_pages.get("/admin/licenses", {"perPage": "1", "page": "2"})
    assert paged.html.find("a", rel="prev") is not None


def test_detail_shows_facts_activations_and_forms(admin_pages, lic):
    page = admin_pages.get(f"/admin/licenses/{lic.key}")
    assert title_of(page).startswith(f"License {lic.key}")
    assert "shop.example.com" in page.text and "alice@example.com" in page.text
    actions = {form.action.rsplit("/", 1)[-1] for form in page.forms.values()}
    assert {"suspend", "reset", "revoke", "extend", "seats"} <= actions
    assert "reinstate" not in actions


def submit(page, action: str, **fields):
    form = next(f for f in page.forms.values() if f.action.endswith(f"/{action}"))
    for name, value in fields.items():
        form[name] = value
    return form


def test_suspend_and_reinstate_are_audited_with_the_admin(admin_pages, dbsession, admin, lic):
    page = admin_pages.get(f"/admin/licenses/{lic.key}")
    done = confirm(submit(page, "suspend").submit())
    assert done.location.endswith(f"/admin/licenses/{lic.key}")
    assert flashed(done) == "license_suspend"
    assert reload(dbsession, lic).status == "suspended"
    page = done.follow()
    assert "The license is suspended." in page.text
    done = submit(page, "reinstate").submit(status=303)
    assert reload(dbsession, lic).status == "active"
    entries = audit_of(dbsession, lic)
    assert [e.action for e in entries] == ["admin.suspend", "admin.reinstate"]
    assert all(e.admin_id == admin.id for e in entries)
    assert "active -> suspended" in entries[0].detail and admin.email in entries[0].detail
    shown = done.follow()
    audit = shown.html.find("section", attrs={"aria-labelledby": "audit"}).get_text(" ")
    assert "admin.suspend" in audit and "admin.reinstate" in audit and admin.email in audit


def test_revoke_is_final(admin_pages, dbsession, lic):
    page = admin_pages.get(f"/admin/licenses/{lic.key}")
    confirm(submit(page, "revoke").submit())
    assert reload(dbsession, lic).status == "revoked"
    # A stale page's reinstate (or suspend) form is refused with a clear message.
    refused = admin_pages.post(
        f"/admin/licenses/{lic.key}/reinstate",
        {"csrf_token": page.forms[0]["csrf_token"].value},
        status=409,
    )
    assert "revoking is final" in refused.text
    assert reload(dbsession, lic).status == "revoked"
    revoked_page = admin_pages.get(f"/admin/licenses/{lic.key}")
    actions = {form.action.rsplit("/", 1)[-1] for form in revoked_page.forms.values()}
    assert actions & {"reinstate", "suspend", "extend", "seats", "revoke"} == set()
    assert [e.action for e in audit_of(dbsession, lic)] == ["admin.revoke"]


def test_extend_by_days_and_to_a_date(admin_pages, dbsession, lic):
    before = reload(dbsession, lic).expires_at
    page = admin_pages.get(f"/admin/licenses/{lic.key}")
    submit(page, "extend", days="10").submit(status=303)
    after = reload(dbsession, lic).expires_at
    assert after - before == dt.timedelta(days=10)
    target = (utcnow() + dt.timedelta(days=400)).date()
    page = admin_pages.get(f"/admin/licenses/{lic.key}")
    submit(page, "extend", until=target.isoformat()).submit(status=303)
    assert reload(dbsession, lic).expires_at.date() == target
    details = [e.detail for e in audit_of(dbsession, lic)]
    assert "+10 days" in details[0] and f"to {target.isoformat()}" in details[1]


def test_extend_revives_an_expired_license(admin_pages, dbsession, customer):
    license = seed_license(dbsession, customer, status="expired", expires_in_days=-5)
    page = admin_pages.get(f"/admin/licenses/{license.key}")
    submit(page, "extend", days="30").submit(status=303)
    fresh = reload(dbsession, license)
    assert fresh.status == "active" and fresh.expires_at > utcnow() + dt.timedelta(days=29)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"days": "0"}, "days"),
        ({"days": "-3"}, "days"),
        ({"days": "abc"}, "days"),
        ({"days": "9" * 5000}, "days"),
        ({"until": "2001-01-01"}, "until"),
        ({"until": "2026-13-45"}, "until"),
        ({"until": "tomorrow"}, "until"),
        ({"days": "", "until": ""}, "days"),
    ],
)
def test_bad_extensions_are_form_errors(admin_pages, dbsession, lic, fields, field):
    page = admin_pages.get(f"/admin/licenses/{lic.key}")
    response = submit(page, "extend", **fields).submit(status=422)
    assert response.html.find(id=f"f-{field}-error") is not None
    assert audit_of(dbsession, lic) == []


def test_seat_limit(admin_pages, dbsession, lic):
    page = admin_pages.get(f"/admin/licenses/{lic.key}")
    submit(page, "seats", maxActivations="0").submit(status=303)
    assert reload(dbsession, lic).max_activations == 0
    page = admin_pages.get(f"/admin/licenses/{lic.key}")
    bad = submit(page, "seats", maxActivations="-1").submit(status=422)
    assert "0 or more" in bad.html.find(id="f-maxActivations-error").get_text()
    assert bad.html.find(id="f-maxActivations")["value"] == "-1"
    assert [e.detail.split(" (by")[0] for e in audit_of(dbsession, lic)] == ["seat limit 3 -> 0"]


def test_reset_deactivates_every_activation(admin_pages, dbsession, lic):
    add_activation(dbsession, lic, "other.example.com")
    page = admin_pages.get(f"/admin/licenses/{lic.key}")
    confirm(submit(page, "reset").submit())
    dbsession.commit()
    dbsession.expire_all()
    rows = dbsession.scalars(select(Activation).where(Activation.license_id == lic.id)).all()
    assert rows and not any(a.active for a in rows)
    assert all(a.deactivated_at is not None for a in rows)
    assert "2 active activation(s) deactivated" in audit_of(dbsession, lic)[0].detail


def test_forms_need_the_csrf_token(admin_pages, dbsession, lic):
    response = admin_pages.post(f"/admin/licenses/{lic.key}/suspend", {}, status=403)
    assert response.content_type == "text/html"
    assert reload(dbsession, lic).status == "active"


@pytest.mark.parametrize(
    ("action", "says"),
    [
        (
            "revoke",
            ["Revoke license", "2 active installations stop validating", "cannot be undone"],
        ),
        ("suspend", ["Suspend license", "2 active installations stop validating", "reinstate"]),
        ("reset", ["Deactivate all 2 active installations", "other.example.com", "seat back"]),
    ],
)
def test_destructive_actions_are_confirmed_first(admin_pages, dbsession, lic, action, says):
    add_activation(dbsession, lic, "other.example.com")
    page = admin_pages.get(f"/admin/licenses/{lic.key}")
    asked = submit(page, action).submit()
    text = confirmation_of(asked)
    assert lic.key in text and "Site-Guard" in text
    assert "alice@example.com" in text or action == "reset"
    assert all(phrase in text for phrase in says), text
    # The first post changed nothing.
    assert reload(dbsession, lic).status == "active"
    assert audit_of(dbsession, lic) == []
    assert cancel_link(asked) == f"/admin/licenses/{lic.key}"
    admin_pages.get(cancel_link(asked), status=200)
    # The confirm post without the token is refused, and changes nothing either.
    form = asked.forms["confirm-form"]
    fields = {name: form[name].value for name in form.fields if name != "csrf_token"}
    admin_pages.post(form.action, fields, status=403)
    assert audit_of(dbsession, lic) == []
    done = confirm(asked)
    assert flashed(done) == f"license_{action}"
    assert [e.action for e in audit_of(dbsession, lic)] == [f"admin.{action}"]


def test_a_license_without_installations_says_so(admin_pages, dbsession, customer):
    license = seed_license(dbsession, customer)
    page = admin_pages.get(f"/admin/licenses/{license.key}")
    assert "it has no active installation now" in confirmation_of(submit(page, "revoke").submit())
    assert "nothing but its audit changes" in confirmation_of(submit(page, "reset").submit())


def test_one_installation_is_deactivated_after_its_confirmation(admin_pages, dbsession, lic):
    other = add_activation(dbsession, lic, "other.example.com")
    page = admin_pages.get(f"/admin/licenses/{lic.key}")
    action = f"/admin/licenses/{lic.key}/activations/{other.id}/deactivate"
    asked = next(f for f in page.forms.values() if f.action == action).submit()
    text = confirmation_of(asked)
    assert "Deactivate the installation at other.example.com (production)" in text
    assert lic.key in text and "stops validating at its next check" in text
    assert cancel_link(asked) == f"/admin/licenses/{lic.key}"
    dbsession.expire_all()
    assert dbsession.get(Activation, other.id).active and audit_of(dbsession, lic) == []
    admin_pages.post(action, {"confirm": "1"}, status=403)
    assert audit_of(dbsession, lic) == []
    done = confirm(asked)
    assert done.location.endswith(f"/admin/licenses/{lic.key}")
    assert flashed(done) == "license_deactivate"
    assert "The installation is deactivated" in done.follow().text
    entries = audit_of(dbsession, lic)  # a fresh transaction: sees the confirm post's writes
    assert [e.action for e in entries] == ["admin.deactivate"]
    assert "activation other.example.com (production) deactivated" in entries[0].detail
    rows = dbsession.scalars(select(Activation).where(Activation.license_id == lic.id)).all()
    assert {a.domain: a.active for a in rows} == {
        "shop.example.com": True,
        "other.example.com": False,
    }
    assert dbsession.get(Activation, other.id).deactivated_at is not None
    # A stale confirmation of the same installation is refused; nothing else changes.
    refused = confirm(asked, status=409)
    assert "not active" in refused.text
    assert len(audit_of(dbsession, lic)) == 1


def test_deactivating_unknown_installations_is_404(admin_pages, dbsession, lic, customer):
    token = admin_pages.get(f"/admin/licenses/{lic.key}").forms[0]["csrf_token"].value
    elsewhere = add_activation(dbsession, seed_license(dbsession, customer), "else.example.com")
    for raw in ("999999", "0", "x", "9" * 20, "-1", str(elsewhere.id)):
        admin_pages.post(
            f"/admin/licenses/{lic.key}/activations/{raw}/deactivate",
            {"csrf_token": token},
            status=404,
        )
    admin_pages.post(
        "/admin/licenses/NO-SUCH/activations/1/deactivate", {"csrf_token": token}, status=404
    )
    assert audit_of(dbsession, lic) == []


def test_hostile_input_is_4xx(admin_pages, lic):
    token = admin_pages.get(f"/admin/licenses/{lic.key}").forms[0]["csrf_token"].value
    admin_pages.get("/admin/licenses/NO-SUCH-KEY", status=404)
    admin_pages.get("/admin/licenses/" + "K" * 500, status=404)
    admin_pages.get("/admin/licenses/%00", status=400)
    admin_pages.get("/admin/licenses/%F0%9F%92%A5", status=404)
    admin_pages.get("/admin/licenses", {"q": "x" * 1000}, status=422)
    admin_pages.get("/admin/licenses?q=a&q=b", status=422)
    admin_pages.get("/admin/licenses", {"page": "9" * 50}, status=200)
    admin_pages.get("/admin/licenses", {"page": "x"}, status=422)
    admin_pages.post(f"/admin/licenses/{lic.key}/explode", {"csrf_token": token}, status=404)
    admin_pages.post("/admin/licenses/NO-SUCH-KEY/suspend", {"csrf_token": token}, status=404)
    admin_pages.post(
        f"/admin/licenses/{lic.key}/seats",
        {"csrf_token": token, "maxActivations": "1\x00"},
        status=422,
    )


def test_customers_get_403_and_visitors_the_login(app, customer, lic):
    visitor = page_client(app)
    for path in ("/admin/licenses", f"/admin/licenses/{lic.key}"):
        response = visitor.get(path, status=303)
        assert "/login?next=" in response.location
    client = logged_in(app, customer.email)
    for path in ("/admin/licenses", f"/admin/licenses/{lic.key}"):
        assert client.get(path, status=403).content_type == "text/html"
    token = client.get("/").html.find("input", attrs={"name": "csrf_token"})["value"]
    client.post(f"/admin/licenses/{lic.key}/suspend", {"csrf_token": token}, status=403)


# --- JSON routes ---------------------------------------------------------------------------------


def test_json_list_detail_and_actions(admin_app, dbsession, admin, lic):
    listing = admin_app.get("/api/admin/licenses", {"q": "alice"}).json
    assert listing["total"] == 1 and listing["items"][0]["key"] == lic.key
    assert listing["items"][0]["customer"]["email"] == "alice@example.com"
    assert listing["items"][0]["activationsUsed"] == 1
    one = admin_app.get(f"/api/admin/licenses/{lic.key}").json
    assert one["activations"][0]["domain"] == "shop.example.com" and one["audit"] == []

    body = admin_app.post(f"/api/admin/licenses/{lic.key}/suspend").json
    assert body["status"] == "suspended"
    assert body["audit"][0]["action"] == "admin.suspend"
    assert body["audit"][0]["adminId"] == admin.id
    assert body["audit"][0]["adminEmail"] == admin.email
    body = admin_app.post_json(f"/api/admin/licenses/{lic.key}/reinstate", {}).json
    assert body["status"] == "active"
    body = admin_app.post_json(f"/api/admin/licenses/{lic.key}/seats", {"maxActivations": 7}).json
    assert body["maxActivations"] == 7
    body = admin_app.post_json(f"/api/admin/licenses/{lic.key}/extend", {"days": 1}).json
    assert body["audit"][0]["action"] == "admin.extend"
    body = admin_app.post(f"/api/admin/licenses/{lic.key}/reset").json
    assert not any(a["active"] for a in body["activations"])
    body = admin_app.post(f"/api/admin/licenses/{lic.key}/revoke").json
    assert body["status"] == "revoked"
    refused = admin_app.post(f"/api/admin/licenses/{lic.key}/reinstate", status=409).json
    assert refused["code"] == "license_action_refused" and "final" in refused["message"]
    assert len(audit_of(dbsession, lic)) == 6


def test_json_validation(admin_app, lic, dbsession):
    path = f"/api/admin/licenses/{lic.key}"
    assert admin_app.post_json(f"{path}/seats", {"maxActivations": -1}, status=422).json["errors"]
    assert admin_app.post_json(f"{path}/seats", {"maxActivations": "2"}, status=422)
    assert admin_app.post_json(f"{path}/seats", {}, status=422).json["errors"]["maxActivations"]
    assert admin_app.post_json(f"{path}/extend", {"days": 0}, status=422)
    assert admin_app.post_json(f"{path}/extend", {"days": 1, "until": "2099-01-01"}, status=422)
    assert admin_app.post_json(f"{path}/extend", {"until": "2000-01-01"}, status=422)
    assert admin_app.post_json(f"{path}/extend", {"bogus": 1}, status=422)
    assert admin_app.post_json(f"{path}/extend", [1], status=422)
    admin_app.post(f"{path}/extend", "days=1", status=415)
    admin_app.post(f"{path}/nope", status=404)
    admin_app.get("/api/admin/licenses/NOPE", status=404)
    admin_app.get("/api/admin/licenses?perPage=1000", status=422)
    perpetual = seed_license(dbsession, None, slug="forever", expires_in_days=None)
    refused = admin_app.post_json(
        f"/api/admin/licenses/{perpetual.key}/extend", {"days": 3}, status=409
    )
    assert refused.json["code"] == "license_action_refused"
    assert audit_of(dbsession, lic) == []


def test_json_routes_need_an_admin_and_csrf(app, customer_app, admin_app, lic, dbsession):
    customer_app.get("/api/admin/licenses", status=403)
    customer_app.get(f"/api/admin/licenses/{lic.key}", status=403)
    customer_app.post(f"/api/admin/licenses/{lic.key}/suspend", status=403)
    new_client(app).get("/api/admin/licenses", status=401)
    response = admin_app.post(
        f"/api/admin/licenses/{lic.key}/suspend", headers={"X-CSRF-Token": "wrong"}, status=403
    )
    assert response.json["code"] == "csrf_failed"
    assert reload(dbsession, lic).status == "active"
