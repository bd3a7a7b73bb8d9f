"""The accounts of guest checkout: an order placed with an e-mail address alone belongs to
the account of that address -- the existing one as it is, or a new one without a
password, made once however many checkouts race for it. An account without a password
cannot log in (answered exactly as a wrong password). Its receipt carries a
set-password link (a token the sender issues as it sends, stored nowhere) that works
once, confirms the address, logs the buyer in and lands on the order; the receipt of an
account with a password links to the login page instead, and carries no token."""

from __future__ import annotations

import datetime as dt
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from fakes.shop import make_catalogue, make_order
from helpers.app import PASSWORD
from helpers.checkout import BILLING, visitor_with_cart
from helpers.clients import client_from, logged_in, page_client
from helpers.mail_links import link_in, mails_to, reset_link, stored_text, token_of
from helpers.notices import flashed
from helpers.payments import deliver, paid_at_the_provider
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cmsshop.errors import RateLimited, ValidationFailed
from cmsshop.models import AccountToken, User
from cmsshop.services.accounts import guests
from cmsshop.services.accounts.users import PasswordHasher, has_password
from cmsshop.services.mail.delivery import make_mail_backend
from cmsshop.services.mail.sender import send_due
from cmsshop.services.payments import fulfilment
from cmsshop.services.ratelimit import RateLimiter
from cmsshop.settings import load_settings

GUEST = "guest@example.com"
NEW_PASSWORD = "a long new password"
LOGIN = "/api/auth/login"


def guest_account(dbsession, email: str = GUEST, name: str = "") -> User:
    user = guests.customer_for_checkout(dbsession, email, name)
    dbsession.commit()
    return user


def paid_order(app, dbsession, user, number: str):
    """``user``'s order of site-guard, fulfilled as a payment would: its receipt queued."""
    order = make_order(dbsession, user, ("site-guard",), number=number)
    locked = fulfilment.lock_order(dbsession, order.id)
    fulfilment.fulfil_order(
        dbsession,
        locked,
        settings=app.registry.settings,
        provider="cardprovider",
        payment_reference=f"pi_{number}",
    )
    dbsession.commit()
    return order


def send_over_smtp(engine, smtp_server, count: int):
    """One pass of the real sender to the SMTP fake; the ``count`` messages received."""
    settings = load_settings(
        {"cmsshop.database_url": "sqlite://", **smtp_server.settings()}, environ={}
    )
    send_due(engine, make_mail_backend(settings), settings)
    return smtp_server.wait_for(count)


def text_of(message) -> str:
    return message.get_body(preferencelist=("plain",)).get_content()


def tokens_of(dbsession, user) -> list[AccountToken]:
    dbsession.rollback()
    return list(dbsession.scalars(select(AccountToken).where(AccountToken.user_id == user.id)))


def fresh(dbsession, user) -> User:
    dbsession.rollback()
    dbsession.expire_all()
    return dbsession.get(User, user.id)


def set_password_form(page):
    """The page's set-password form (a logged-in page also has the header's log-out form)."""
    (form,) = [form for form in page.forms.values() if form.action == "/set-password"]
    return form


def visible_text(response) -> str:
    return " ".join(response.html.get_text().split())


@pytest.fixture
def guest_receipt_link(app, dbsession, engine, smtp_server):
    """A new guest's paid order and the set-password link of its receipt, as mailed."""
    make_catalogue(dbsession)
    guest = guest_account(dbsession, GUEST, "Gus")
    order = paid_order(app, dbsession, guest, "ORD-GUEST-1")
    (received,) = send_over_smtp(engine, smtp_server, 1)
    return guest, order, link_in(text_of(received), "/set-password")


# --- the account of a checkout --------------------------------------------------------------


def test_a_new_address_gets_a_customer_account_without_a_password(dbsession):
    user = guest_account(dbsession, "  Guest@Example.COM ", "Gus Guest")
    stored = fresh(dbsession, user)
    assert stored.email == GUEST  # normalised as registration does
    assert stored.name == "Gus Guest" and stored.role == "customer"
    assert stored.password_hash == "" and not has_password(stored)
    assert stored.email_verified_at is None
    assert guest_account(dbsession, "another@example.com").name == "another"  # the local part


def test_an_address_with_an_account_gets_that_account_unchanged(dbsession, make_user):
    for user in (
        make_user("alice@example.com", name="Alice"),
        make_user("root@example.com", role="admin", name="Admin"),
    ):
        before = fresh(dbsession, user)
        snapshot = (before.password_hash, before.name, before.role, before.email_verified_at)
        found = guest_account(dbsession, user.email.upper(), "Someone Else")
        after = fresh(dbsession, user)
        assert found.id == user.id
        assert (after.password_hash, after.name, after.role, after.email_verified_at) == snapshot
    # A guest's account is found again as it is: still no password.
    first = guest_account(dbsession, GUEST)
    assert guest_account(dbsession, GUEST, "Other").id == first.id
    assert dbsession.scalar(select(func.count()).select_from(User)) == 3


@pytest.mark.parametrize(
    ("email", "name", "field"),
    [
        ("no-at-sign", "", "email"),
        ("a@b@example.com", "", "email"),
        ("@example.com", "", "email"),
        ("a b@example.com", "", "email"),
        ("a\x00b@example.com", "", "email"),
        ("x" * 320 + "@example.com", "", "email"),
        (GUEST, "n" * 201, "name"),
    ],
)
def test_a_bad_address_or_name_is_refused_and_nothing_is_created(dbsession, email, name, field):
    with pytest.raises(ValidationFailed) as refused:
        guests.customer_for_checkout(dbsession, email, name)
    assert set(refused.value.extra["errors"]) == {field}
    dbsession.rollback()
    assert dbsession.scalar(select(func.count()).select_from(User)) == 0


def test_a_checkout_waiting_on_another_of_the_same_new_address_gets_its_account(engine):
    """The other checkout has inserted the address and not committed yet: this one waits
    (PostgreSQL: on the unique index, then reads the winner's row after its savepoint
    failed; SQLite: on the write lock, then finds the row) and gets that account."""
    with Session(engine) as first, Session(engine) as second:
        winner = guests.customer_for_checkout(first, GUEST, "First")
        first.flush()
        result = {}

        def other_checkout():
            result["user"] = guests.customer_for_checkout(second, GUEST, "Second")
            second.commit()

        thread = threading.Thread(target=other_checkout)
        thread.start()
        thread.join(0.5)
        assert thread.is_alive()  # waiting for the first checkout's transaction
        first.commit()
        thread.join(30)
        assert not thread.is_alive()
        assert result["user"].id == winner.id
    with Session(engine) as check:
        assert check.scalar(select(func.count()).select_from(User)) == 1
        assert check.scalar(select(User.name)) == "First"


def test_concurrent_checkouts_of_a_new_address_make_one_account(engine):
    start = threading.Barrier(8)

    def checkout(i: int) -> int:
        with Session(engine) as session:
            start.wait(timeout=30)
            user = guests.customer_for_checkout(session, GUEST, f"Buyer {i}")
            session.commit()
            return user.id

    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(checkout, range(8)))
    assert len(ids) == 1
    with Session(engine) as check:
        assert check.scalar(select(func.count()).select_from(User)) == 1


# --- rate limits ----------------------------------------------------------------------------


@pytest.fixture
def limiter(engine, app) -> RateLimiter:
    """A limiter with the guest checkout policies the app declares (registration's numbers:
    5 per hour in these tests)."""
    limiter = RateLimiter(engine)
    for policy in guests.rate_policies(app.registry.settings):
        limiter.add_policy(*policy)
    return limiter


def test_guest_checkouts_are_limited_per_ip_as_registrations_are(limiter, app, make_user):
    settings = app.registry.settings
    assert settings["cmsshop.register_max_per_ip"] == 5
    make_user("alice@example.com")
    # Addresses with and without an account count alike.
    for email in ("alice@example.com", "a@example.com", "b@example.com", "c@x.org", "d@x.org"):
        guests.check_guest_checkout_rate(limiter, email, "10.1.1.1")
    with pytest.raises(RateLimited) as refused:
        guests.check_guest_checkout_rate(limiter, "e@x.org", "10.1.1.1")
    assert refused.value.status == 429 and 0 < int(refused.value.headers["Retry-After"]) <= 3600
    guests.check_guest_checkout_rate(limiter, "e@x.org", "10.1.1.2")  # another IP


def test_guest_checkouts_are_limited_per_address_from_any_ip(limiter):
    for i in range(5):
        guests.check_guest_checkout_rate(limiter, "Victim@Example.com", f"10.2.0.{i}")
    with pytest.raises(RateLimited):
        guests.check_guest_checkout_rate(limiter, " victim@example.com", "10.2.0.99")
    guests.check_guest_checkout_rate(limiter, "other@example.com", "10.2.0.99")


# --- logging in -----------------------------------------------------------------------------


def without_support_code(body: dict) -> dict:
    return {name: value for name, value in body.items() if name != "supportCode"}


def test_an_account_without_a_password_is_refused_as_a_wrong_password(app, dbsession, customer):
    guest_account(dbsession)
    wrong = client_from(app, "10.3.0.1").post_json(
        LOGIN, {"email": customer.email, "password": "not the password"}, status=401
    )
    # Any password, the empty one's neighbours and the dummy hash's own included.
    for password in ("not the password", " ", "not-a-real-password"):
        answer = client_from(app, "10.3.0.2").post_json(
            LOGIN, {"email": GUEST, "password": password}, status=401
        )
        assert without_support_code(answer.json) == without_support_code(wrong.json)
    # The hasher spends the dummy's argon2 work on an empty hash, and matches nothing.
    hasher = PasswordHasher("cheapest")
    assert not hasher.verify("", "not-a-real-password") and not hasher.verify("", "")
    assert not hasher.verify(None, "not-a-real-password")


def test_the_login_page_answers_a_password_less_account_as_a_wrong_password(
    app, dbsession, customer
):
    guest_account(dbsession)

    def attempt(email: str):
        form = page_client(app).get("/login").forms[0]
        form["email"], form["password"] = email, "some password"
        return form.submit(status=401)

    assert visible_text(attempt(GUEST)).replace(GUEST, "X") == visible_text(
        attempt(customer.email)
    ).replace(customer.email, "X")


# --- the receipt's link ---------------------------------------------------------------------


def test_a_guest_receipt_carries_a_set_password_link_stored_nowhere(
    app, dbsession, guest_receipt_link
):
    guest, order, link = guest_receipt_link
    (queued,) = mails_to(dbsession, GUEST)
    assert queued.kind == "receipt_set_password" and queued.status == "sent"
    assert queued.dedupe_key == f"receipt:order:{order.id}"
    assert "/set-password?token=HIDDEN-UNTIL-SENT&next=/account/orders/ORD-GUEST-1" in (
        queued.text_body
    )
    assert "Set a password and see your order" in queued.text_body
    assert "/login" not in queued.text_body  # one link about the account, no other
    token = token_of(link)
    assert len(token) >= 40 and token not in stored_text(dbsession)
    assert "next=/account/orders/ORD-GUEST-1" in link
    (row,) = tokens_of(dbsession, guest)
    assert row.purpose == "password_reset" and row.used_at is None
    assert row.expires_at - row.created_at == dt.timedelta(days=7)  # cmsshop.guest_link_ttl


def test_the_link_sets_the_password_logs_in_and_lands_on_the_order(
    app, dbsession, guest_receipt_link
):
    guest, order, link = guest_receipt_link
    client = page_client(app)
    page = client.get(link)
    assert GUEST in visible_text(page)  # the page names the account it sets a password for
    form = set_password_form(page)
    form["password"] = NEW_PASSWORD
    answer = form.submit(status=303)
    assert answer.location.endswith("/account/orders/ORD-GUEST-1")
    assert flashed(answer) == "password_set"
    order_page = answer.follow(status=200)
    assert "ORD-GUEST-1" in order_page.text and "Your password is set" in order_page.text
    assert client.get("/api/auth/session").json["user"]["email"] == GUEST

    stored = fresh(dbsession, guest)
    assert has_password(stored) and stored.email_verified_at is not None
    client_from(app, "10.4.0.1").post_json(
        LOGIN, {"email": GUEST, "password": NEW_PASSWORD}, status=200
    )


def test_the_link_works_once(app, guest_receipt_link):
    _, _, link = guest_receipt_link
    first, second = page_client(app), page_client(app)
    forms = [set_password_form(client.get(link)) for client in (first, second)]
    forms[0]["password"] = NEW_PASSWORD
    forms[0].submit(status=303)
    forms[1]["password"] = "an attacker's password"
    used = forms[1].submit(status=410)
    assert "This link has been used already." in used.text
    assert "/login?next=%2Faccount%2Forders%2FORD-GUEST-1" in used.text
    assert second.get("/api/auth/session").json["user"] is None
    again = page_client(app).get(link, status=410)
    assert "This link has been used already." in again.text
    client_from(app).post_json(LOGIN, {"email": GUEST, "password": NEW_PASSWORD}, status=200)


def test_a_bad_password_keeps_the_link_and_a_bad_token_is_refused(app, guest_receipt_link):
    _, _, link = guest_receipt_link
    client = page_client(app)
    form = set_password_form(client.get(link))
    form["password"] = "short"
    again = form.submit(status=422)
    assert GUEST in visible_text(again)
    form = set_password_form(again)
    form["password"] = NEW_PASSWORD
    form.submit(status=303)
    for bad in ("HIDDEN-UNTIL-SENT", "x" * 43, "", "<script>"):
        page_client(app).get("/set-password", {"token": bad}, status=400)


@pytest.mark.parametrize(
    "next_path", ["https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:x"]
)
def test_the_link_leads_only_to_a_local_path(app, guest_receipt_link, next_path):
    _, _, link = guest_receipt_link
    client = page_client(app)
    page = client.get(link.replace("next=", "ignored="))
    assert 'name="next"' not in page.text  # no next on the page: the form posts none
    form = set_password_form(page)
    fields = {name: form[name].value for name in ("token", "csrf_token")}
    answer = client.post(
        "/set-password", {**fields, "password": NEW_PASSWORD, "next": next_path}, status=303
    )
    assert answer.location.endswith("/account")
    assert flashed(answer) == "password_set"
    assert "evil" not in answer.location


def test_setting_the_password_while_someone_else_is_logged_in_says_so_and_switches(
    app, customer, guest_receipt_link
):
    _, _, link = guest_receipt_link
    client = logged_in(app, customer)
    page = client.get(link)
    assert f"You are logged in as {customer.email}" in visible_text(page)
    form = set_password_form(page)
    form["password"] = NEW_PASSWORD
    form.submit(status=303)
    assert client.get("/api/auth/session").json["user"]["email"] == GUEST


def test_a_password_set_otherwise_spends_every_receipt_link(
    app, dbsession, engine, smtp_server, guest_receipt_link
):
    """A second order's receipt also carries a link; a reset sets the password first:
    both links then answer "used", and point to the login page."""
    guest, _, first_link = guest_receipt_link
    paid_order(app, dbsession, guest, "ORD-GUEST-2")
    second = send_over_smtp(engine, smtp_server, 2)[1]
    second_link = link_in(text_of(second), "/set-password")
    assert token_of(second_link) != token_of(first_link)

    client_from(app).post_json("/api/auth/password-reset", {"email": GUEST}, status=202)
    form = page_client(app).get(reset_link(dbsession, GUEST)).forms[0]
    form["password"] = NEW_PASSWORD
    form.submit(status=303)
    for link in (first_link, second_link):
        assert "used already" in page_client(app).get(link, status=410).text
    assert fresh(dbsession, guest).email_verified_at is not None


def test_an_account_with_a_password_gets_the_login_link_and_no_token(
    app, dbsession, engine, smtp_server, customer
):
    make_catalogue(dbsession)
    paid_order(app, dbsession, customer, "ORD-OWNER-1")
    (queued,) = mails_to(dbsession, customer.email)
    assert queued.kind == "receipt"
    (received,) = send_over_smtp(engine, smtp_server, 1)
    text = text_of(received)
    assert link_in(text, "/login") == "/login?next=/account/orders/ORD-OWNER-1"
    assert "token=" not in text and "set-password" not in text.lower()
    assert "password" not in text.lower()
    assert tokens_of(dbsession, customer) == []
    # The link leads there once logged in.
    client = page_client(app)
    form = client.get("/login?next=/account/orders/ORD-OWNER-1").forms[0]
    form["email"], form["password"] = customer.email, PASSWORD
    assert form.submit(status=303).location.endswith("/account/orders/ORD-OWNER-1")


def test_registering_a_guests_address_changes_nothing_and_mails_the_way_to_a_password(
    app, dbsession
):
    guest = guest_account(dbsession)
    fresh_address = client_from(app, "10.5.0.1").post_json(
        "/api/auth/register", {"email": "new@example.com", "password": NEW_PASSWORD}, status=202
    )
    taken = client_from(app, "10.5.0.2").post_json(
        "/api/auth/register", {"email": GUEST, "password": NEW_PASSWORD}, status=202
    )
    assert taken.json == fresh_address.json
    assert not has_password(fresh(dbsession, guest))  # whoever typed it may not own it
    (mail,) = mails_to(dbsession, GUEST, "account_exists")
    assert "has no password yet" in mail.text_body and "/forgot-password" in mail.text_body
    client_from(app, "10.5.0.3").post_json(
        LOGIN, {"email": GUEST, "password": NEW_PASSWORD}, status=401
    )


def test_a_guest_checkout_of_the_cart_mails_a_link_that_leads_to_the_order(
    card_app, fake_stripe, dbsession, engine, smtp_server
):
    """The whole way: a visitor's cart checked out with an address alone, paid through the
    signed webhook, the receipt through the real sender, its link to the order."""
    make_catalogue(dbsession)
    client, cart = visitor_with_cart(card_app, {"site-guard": 2, "themes": 1}, "10.6.0.1")
    placed = client.post_json(
        f"/api/store/carts/{cart['id']}/checkout",
        {"billing": BILLING, "email": "Bea@Example.com", "name": "Bea"},
        status=201,
    ).json
    number = placed["order"]["number"]
    deliver(card_app, paid_at_the_provider(fake_stripe, placed["redirectUrl"]), status=200)
    (received,) = send_over_smtp(engine, smtp_server, 1)
    assert received["To"] == "bea@example.com"
    link = link_in(text_of(received), "/set-password")
    assert f"next=/account/orders/{number}" in link

    browser = page_client(card_app)
    form = set_password_form(browser.get(link))
    form["password"] = NEW_PASSWORD
    order_page = form.submit(status=303).follow(status=200)
    assert number in order_page.text and "SiteGuard" in order_page.text
    assert browser.get("/api/auth/session").json["user"]["email"] == "bea@example.com"
