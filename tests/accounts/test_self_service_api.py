"""The account owner's self-service JSON API under /api/account: name, e-mail change by
a mailed link, password change, the data export and deleting the account, with the
hostile cases (wrong current password, another's address, token replay, CSRF missing,
malformed bodies)."""

from __future__ import annotations

import datetime as dt

import pytest
from helpers.app import PASSWORD
from helpers.clients import new_client
from helpers.mail_links import deliver_mail, mailed_link, mailed_text, mails_to, token_of
from sqlalchemy import func, select, update

from cmsshop.errors import ValidationFailed
from cmsshop.models import (
    AccountToken,
    AuditEntry,
    BillingProfile,
    Invoice,
    License,
    Order,
    User,
    UserSession,
)
from cmsshop.services.accounts import guests
from cmsshop.util import utcnow

OLD_EMAIL = "alice@example.com"  # the customer fixture's
NEW_EMAIL = "alice.new@example.com"
NEW_PASSWORD = "a brand new password"


def fresh(dbsession, model, ident):
    dbsession.rollback()
    dbsession.expire_all()  # the fixtures' objects live in this session's identity map
    return dbsession.get(model, ident)


def actions(dbsession, user) -> list[str]:
    dbsession.rollback()
    return list(
        dbsession.scalars(
            select(AuditEntry.action)
            .where(AuditEntry.object_type == "user", AuditEntry.object_id == str(user.id))
            .order_by(AuditEntry.id)
        )
    )


def ask_email_change(client, email=NEW_EMAIL, password=PASSWORD, status=202):
    return client.post_json(
        "/api/account/email",
        {"newEmail": email, "currentPassword": password},
        status=status,
    )


def change_link(dbsession, address=NEW_EMAIL) -> str:
    return mailed_link(dbsession, address, "email_change", "/account/settings/email/confirm")


def test_profile_and_name_change_are_recorded(customer_app, customer, dbsession):
    body = customer_app.get("/api/account/profile").json
    assert body["user"]["email"] == customer.email
    assert body["activity"] == []
    body = customer_app.patch_json("/api/account/profile", {"name": "Alice B."}).json
    assert body["user"]["name"] == "Alice B."
    assert [a["action"] for a in body["activity"]] == ["account.name_changed"]
    assert body["activity"][0]["description"] == "Name changed"
    assert fresh(dbsession, User, customer.id).name == "Alice B."


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"name": ""},
        {"name": 42},
        {"name": "x" * 201},
        {"name": "Alice", "role": "admin"},
        ["name"],
    ],
)
def test_malformed_profile_bodies_are_422(customer_app, customer, dbsession, body):
    response = customer_app.patch_json("/api/account/profile", body, status=422)
    assert response.json["code"] == "validation_failed"
    assert fresh(dbsession, User, customer.id).name == "Alice"
    assert fresh(dbsession, User, customer.id).role == "customer"


def test_not_json_and_broken_json(customer_app):
    customer_app.patch("/api/account/profile", "name=x", status=415)
    response = customer_app.patch(
        "/api/account/profile",
        b"{not json",
        headers={"Content-Type": "application/json"},
        status=400,
    )
    assert response.json["code"] == "malformed_json"


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("patch", "/api/account/profile", {"name": "Mallory"}),
        ("post", "/api/account/email", {"newEmail": NEW_EMAIL, "currentPassword": PASSWORD}),
        ("post", "/api/account/password", {"currentPassword": PASSWORD, "newPassword": "x" * 12}),
        ("post", "/api/account/delete", {"password": PASSWORD, "confirmation": "DELETE"}),
    ],
)
def test_unsafe_calls_need_the_csrf_token(customer_app, customer, dbsession, method, url, body):
    response = getattr(customer_app, f"{method}_json")(
        url, body, headers={"X-CSRF-Token": "wrong"}, status=403
    )
    assert response.json["code"] == "csrf_failed"
    customer_app.csrf_token = None  # now no header at all
    response = getattr(customer_app, f"{method}_json")(url, body, status=403)
    assert response.json["code"] == "csrf_failed"
    user = fresh(dbsession, User, customer.id)
    assert (user.name, user.email, user.deleted_at) == ("Alice", customer.email, None)
    assert actions(dbsession, customer) == []


@pytest.mark.parametrize("url", ["/api/account/profile", "/api/account/export"])
def test_anonymous_is_401(testapp, url):
    assert testapp.get(url, status=401).json["code"] == "not_authenticated"


def test_email_change_applies_only_when_the_link_is_opened(app, customer_app, customer, dbsession):
    answer = ask_email_change(customer_app).json
    assert answer == {
        "status": "check_your_email",
        "newEmail": NEW_EMAIL,
        "message": answer["message"],
    }
    assert fresh(dbsession, User, customer.id).email == customer.email
    [queued] = mails_to(dbsession, NEW_EMAIL, "email_change")
    assert "HIDDEN-UNTIL-SENT" in queued.text_body  # the outbox never holds the token
    token = token_of(change_link(dbsession))
    row = dbsession.scalar(select(AccountToken).where(AccountToken.purpose == "change_email"))
    assert row.new_email == NEW_EMAIL and row.user_id == customer.id
    # Anyone with the link may open it, logged in or not: it proves the new mailbox.
    anonymous = new_client(app)
    anonymous.refresh_csrf()
    answer = anonymous.post_json("/api/account/email/confirm", {"token": token}).json
    assert answer == {"status": "email_changed", "email": NEW_EMAIL}
    user = fresh(dbsession, User, customer.id)
    assert user.email == NEW_EMAIL
    notice = mailed_text(dbsession, OLD_EMAIL, "email_changed_notice")
    assert NEW_EMAIL in notice
    assert actions(dbsession, customer) == [
        "account.email_change_requested",
        "account.email_changed",
    ]
    # Replay: the link works once.
    again = anonymous.post_json("/api/account/email/confirm", {"token": token}, status=410)
    assert again.json["code"] == "token_used"
    # The new address logs in; the old one no longer does.
    new_client(app).login(NEW_EMAIL)
    old = new_client(app)
    old.refresh_csrf()
    old.post_json("/api/auth/login", {"email": OLD_EMAIL, "password": PASSWORD}, status=401)


def test_email_change_refusals(customer_app, customer, other_customer, dbsession):
    wrong = ask_email_change(customer_app, password="not my password", status=422).json
    assert set(wrong["errors"]) == {"currentPassword"}
    taken = ask_email_change(customer_app, email=other_customer.email.upper(), status=422).json
    assert set(taken["errors"]) == {"newEmail"}
    same = ask_email_change(customer_app, email=customer.email, status=422).json
    assert set(same["errors"]) == {"newEmail"}
    for bad in (
        {"newEmail": "not-an-address", "currentPassword": PASSWORD},
        {"newEmail": NEW_EMAIL},
    ):
        customer_app.post_json("/api/account/email", bad, status=422)
    assert mails_to(dbsession, other_customer.email, "email_change") == []
    assert actions(dbsession, customer) == []


def test_address_taken_before_the_link_is_opened(app, customer_app, customer, make_user, dbsession):
    ask_email_change(customer_app)
    token = token_of(change_link(dbsession))
    make_user(NEW_EMAIL)
    refused = customer_app.post_json("/api/account/email/confirm", {"token": token}, status=422)
    assert set(refused.json["errors"]) == {"newEmail"}
    assert fresh(dbsession, User, customer.id).email == customer.email


@pytest.mark.parametrize("token", ["", "short", "x" * 43, "HIDDEN-UNTIL-SENT", "é" * 43])
def test_unknown_or_malformed_tokens(customer_app, token):
    response = customer_app.post_json(
        "/api/account/email/confirm", {"token": token}, expect_errors=True
    )
    assert response.status_int in (400, 422)
    assert response.json["code"] in ("invalid_token", "validation_failed")


def test_a_password_reset_token_does_not_change_the_address(customer_app, customer, dbsession):
    customer_app.post_json("/api/auth/password-reset", {"email": customer.email}, status=202)
    token = token_of(mailed_link(dbsession, customer.email, "password_reset", "/reset-password"))
    response = customer_app.post_json("/api/account/email/confirm", {"token": token}, status=400)
    assert response.json["code"] == "invalid_token"


def test_email_change_requests_are_rate_limited(make_app, customer, dbsession):
    app = make_app(**{"cmsshop.password_reset_max_per_email": "2"})
    client = new_client(app)
    client.login(customer.email)
    ask_email_change(client, email="one@example.com")
    ask_email_change(client, email="two@example.com")
    limited = ask_email_change(client, email="three@example.com", status=429)
    assert limited.json["code"] == "rate_limited"
    assert mails_to(dbsession, "three@example.com") == []


def test_wrong_passwords_count_against_the_login_limit(make_app, customer, dbsession):
    app = make_app(**{"cmsshop.login_max_failures": "2"})
    client = new_client(app)
    client.login(customer.email)
    body = {"currentPassword": "guess one", "newPassword": NEW_PASSWORD}
    client.post_json("/api/account/password", body, status=422)
    client.post_json("/api/account/password", body, status=422)
    right = {"currentPassword": PASSWORD, "newPassword": NEW_PASSWORD}
    assert client.post_json("/api/account/password", right, status=429).json["code"] == (
        "rate_limited"
    )


def test_password_change_ends_the_other_sessions_only(app, customer, dbsession):
    here, elsewhere = new_client(app), new_client(app)
    here.login(customer.email)
    elsewhere.login(customer.email)
    answer = here.post_json(
        "/api/account/password", {"currentPassword": PASSWORD, "newPassword": NEW_PASSWORD}
    ).json
    assert answer == {"status": "password_changed", "otherSessionsEnded": 1}
    assert here.get("/api/account/profile").json["user"]["email"] == customer.email
    elsewhere.get("/api/account/profile", status=401)
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(UserSession)) == 1
    new_client(app).login(customer.email, NEW_PASSWORD)
    assert actions(dbsession, customer) == ["account.password_changed"]


def test_password_change_refusals(customer_app, customer, dbsession):
    wrong = customer_app.post_json(
        "/api/account/password",
        {"currentPassword": "nope", "newPassword": NEW_PASSWORD},
        status=422,
    ).json
    assert set(wrong["errors"]) == {"currentPassword"}
    short = customer_app.post_json(
        "/api/account/password", {"currentPassword": PASSWORD, "newPassword": "short"}, status=422
    ).json
    assert set(short["errors"]) == {"newPassword"}
    assert actions(dbsession, customer) == []


def test_export_holds_the_account_data(customer_app, customer, account, dbsession):
    customer_app.patch_json("/api/account/profile", {"name": "Alice Export"})
    response = customer_app.get("/api/account/export")
    assert response.content_type == "application/json"
    assert response.headers["Content-Disposition"].startswith("attachment; filename=")
    assert "no-store" in response.headers["Cache-Control"]
    data = response.json
    assert data["profile"]["email"] == customer.email
    assert [o["number"] for o in data["orders"]] == [account.order.number]
    assert {i["product"] for i in data["orders"][0]["items"]} == {"site-guard", "themes"}
    assert [i["number"] for i in data["invoices"]] == [account.invoice.number]
    assert [lic["key"] for lic in data["licenses"]] == [account.license.key]
    assert [a["action"] for a in data["activity"]] == ["account.name_changed"]
    text = response.text
    for secret in ("password", "token", "argon2"):
        assert secret not in text.lower()


def test_export_is_only_ever_the_callers(other_customer_app, account):
    data = other_customer_app.get("/api/account/export").json
    assert data["orders"] == [] and data["licenses"] == [] and data["invoices"] == []


def test_delete_account_erases_and_keeps_what_the_law_requires(
    app, customer_app, customer, account, dbsession
):
    dbsession.add(BillingProfile(user_id=customer.id, country="DE", name="Alice Example"))
    dbsession.commit()
    elsewhere = new_client(app)
    elsewhere.login(customer.email)
    refused = customer_app.post_json(
        "/api/account/delete", {"password": PASSWORD, "confirmation": "delete it"}, status=422
    )
    assert set(refused.json["errors"]) == {"confirmation"}
    wrong = customer_app.post_json(
        "/api/account/delete", {"password": "nope", "confirmation": "DELETE"}, status=422
    )
    assert set(wrong.json["errors"]) == {"password"}
    answer = customer_app.post_json(
        "/api/account/delete", {"password": PASSWORD, "confirmation": "DELETE"}
    ).json
    assert answer == {"status": "deleted"}
    user = fresh(dbsession, User, customer.id)
    assert user.deleted_at is not None
    assert user.email == f"deleted-{customer.id}@invalid"
    assert user.name == "Deleted account"
    assert dbsession.get(BillingProfile, customer.id) is None
    assert dbsession.scalar(select(func.count()).select_from(UserSession)) == 0
    customer_app.get("/api/account/profile", status=401)
    elsewhere.get("/api/account/profile", status=401)
    # Login is impossible, with the old address or the new one, and no reset is mailed.
    for email in (OLD_EMAIL, user.email):
        client = new_client(app)
        client.refresh_csrf()
        client.post_json("/api/auth/login", {"email": email, "password": PASSWORD}, status=401)
    # Orders, invoices and licenses stay as they were.
    order = dbsession.get(Order, account.order.id)
    assert order.user_id == customer.id and order.billing == account.order.billing
    assert dbsession.get(Invoice, account.invoice.id).number == account.invoice.number
    assert dbsession.get(License, account.license.id).status == "active"
    assert actions(dbsession, customer)[-1] == "account.deleted"


def test_a_deleted_account_gets_no_reset_link(app, customer, dbsession):
    client = new_client(app)
    client.login(customer.email)
    client.post_json("/api/account/delete", {"password": PASSWORD, "confirmation": "DELETE"})
    anonymous = new_client(app)
    anonymous.refresh_csrf()
    anonymous.post_json(
        "/api/auth/password-reset", {"email": f"deleted-{customer.id}@invalid"}, status=202
    )
    deliver_mail(dbsession)
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(AccountToken)) == 0


def test_an_admin_cannot_delete_their_account_here(admin_app, admin, dbsession):
    response = admin_app.post_json(
        "/api/account/delete", {"password": PASSWORD, "confirmation": "DELETE"}, status=403
    )
    assert response.json["code"] == "forbidden"
    assert fresh(dbsession, User, admin.id).deleted_at is None


def test_a_deleted_accounts_address_takes_no_order_and_no_mail(app, customer, dbsession):
    client = new_client(app)
    client.login(customer.email)
    client.post_json("/api/account/delete", {"password": PASSWORD, "confirmation": "DELETE"})
    placeholder = f"deleted-{customer.id}@invalid"
    # Guest checkout refuses the reserved domain, so no order lands on the deleted account.
    with pytest.raises(ValidationFailed) as refused:
        guests.customer_for_checkout(dbsession, placeholder.upper(), "Mallory")
    assert set(refused.value.extra["errors"]) == {"email"}
    # Registering the placeholder answers as usual and mails nobody.
    anonymous = new_client(app)
    anonymous.refresh_csrf()
    anonymous.post_json(
        "/api/auth/register", {"email": placeholder, "password": NEW_PASSWORD}, status=202
    )
    assert mails_to(dbsession, placeholder) == []


def test_an_expired_change_link_changes_nothing(customer_app, customer, dbsession):
    ask_email_change(customer_app)
    token = token_of(change_link(dbsession))
    dbsession.execute(
        update(AccountToken)
        .where(AccountToken.purpose == "change_email")
        .values(expires_at=utcnow() - dt.timedelta(seconds=1))
    )
    dbsession.commit()
    response = customer_app.post_json("/api/account/email/confirm", {"token": token}, status=410)
    assert response.json["code"] == "token_expired"
    assert fresh(dbsession, User, customer.id).email == OLD_EMAIL


def test_a_second_change_voids_the_first_link(customer_app, customer, dbsession):
    ask_email_change(customer_app, email="first@example.com")
    first = token_of(change_link(dbsession, "first@example.com"))
    ask_email_change(customer_app, email="second@example.com")
    second = token_of(change_link(dbsession, "second@example.com"))
    customer_app.post_json("/api/account/email/confirm", {"token": second})
    response = customer_app.post_json("/api/account/email/confirm", {"token": first}, status=410)
    assert response.json["code"] == "token_used"
    assert fresh(dbsession, User, customer.id).email == "second@example.com"
