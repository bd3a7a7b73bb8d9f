"""The development sandbox's "Simulate payment" button: the provider's signed event sent
through the real webhook route (both providers), exactly once; never in production; the
order's owner only; CSRF. And cmsshop-admin simulate-payment naming the ini it uses."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys

import pytest
import requests
from fakes.shop import counts, make_order, order_status
from fakes.smtp import free_port
from helpers.app import ROOT, TEST_SECRET, serve, write_admin_ini
from helpers.cli import run_admin
from helpers.clients import logged_in, page_client
from helpers.html import assert_error_page, title_of
from sqlalchemy import func, select

from cmsshop.models import OutboxMessage, PaymentEvent

DEVELOPMENT = {
    "cmsshop.environment": "development",
    # development.ini's: no provider API account, so the verified event is the payment.
    "cmsshop.payments.trust_verified_events": "true",
}
EVENT_TYPES = {
    "cardprovider": "checkout.session.completed",
    "walletprovider": "PAYMENT.CAPTURE.COMPLETED",
}


@pytest.fixture
def wallet_development(tmp_path) -> dict:
    """development.ini's wallet settings: a loopback cert host for the development
    certificate, the development root trusted through ca_bundle."""
    return {
        "cmsshop.walletprovider.webhook_id": "WH-DEVELOPMENT",
        "cmsshop.walletprovider.cert_hosts": f"paypal.com localhost:{free_port()}",
        "cmsshop.walletprovider.ca_bundle": str(tmp_path / "walletprovider-dev" / "ca.pem"),
    }


@pytest.fixture
def dev_app(make_app, wallet_development):
    """A development site, both providers without API accounts (checkout's sandbox)."""
    return make_app(**DEVELOPMENT, **wallet_development)


@pytest.fixture
def production_app(make_app):
    return make_app(
        **{
            "cmsshop.environment": "production",
            "cmsshop.secret": TEST_SECRET,
            "cmsshop.password_hashing": "default",
            "cmsshop.base_url": "https://localhost",
        }
    )


def simulate_form(page):
    """The sandbox page's "Simulate payment" form, or None."""
    forms = [f for f in page.forms.values() if f.action.endswith("/simulate")]
    assert len(forms) <= 1
    return forms[0] if forms else None


def page_token(client) -> str:
    """The CSRF token of the client's session, from a page's form."""
    return client.get("/").html.find("input", {"name": "csrf_token"})["value"]


def effects(session) -> dict:
    """Everything a payment writes, counted (all zero changes = nothing happened)."""
    found = counts(session)
    found["receipts"] = session.scalar(
        select(func.count()).select_from(OutboxMessage).where(OutboxMessage.kind == "receipt")
    )
    found["mails"] = session.scalar(select(func.count()).select_from(OutboxMessage))
    return found


NOTHING = {
    "paid": 0,
    "fulfilments": 0,
    "invoices": 0,
    "entitlements": 0,
    "licenses": 0,
    "events": 0,
    "receipts": 0,
    "mails": 0,
}


@pytest.mark.parametrize("provider", ["cardprovider", "walletprovider"])
def test_the_button_pays_the_order_once_through_the_real_webhook(
    dev_app, catalogue, customer, dbsession, provider
):
    order = make_order(dbsession, customer, ("site-guard", "themes"), provider=provider)
    client = logged_in(dev_app, customer)
    page = client.get(f"/checkout/sandbox/{order.number}")
    form = simulate_form(page)
    assert form is not None and form.method.upper() == "POST"
    assert form.action == f"/checkout/sandbox/{order.number}/simulate"
    assert form["csrf_token"].value  # a plain form: works without JavaScript
    assert page.html.find("button", string="Simulate payment") is not None

    response = form.submit(status=303)
    assert response.location.endswith(f"/checkout/success?order={order.number}")
    shown = response.follow()
    assert title_of(shown).startswith(f"Thank you – order {order.number} is paid")
    paid = effects(dbsession)
    assert paid == {
        **NOTHING,
        "paid": 1,
        "fulfilments": 1,
        "invoices": 1,
        "entitlements": 2,
        "licenses": 1,
        "events": 1,
        "receipts": 1,
        "mails": 1,
    }
    # The webhook view verified and logged it as any provider's delivery.
    event = dbsession.scalar(select(PaymentEvent))
    assert (event.provider, event.event_type, event.status) == (
        provider,
        EVENT_TYPES[provider],
        "processed",
    )
    # The paid order offers no button; pressing the old one again changes nothing more.
    assert simulate_form(client.get(f"/checkout/sandbox/{order.number}")) is None
    form.submit(status=303)
    assert effects(dbsession) == paid


def test_two_presses_at_once_pay_once(dev_app, catalogue, customer, dbsession):
    """A double click: both requests send a delivery, the second is a duplicate."""
    order = make_order(dbsession, customer, ("site-guard",))
    client = logged_in(dev_app, customer)
    token = page_token(client)
    cookies = {c.name: c.value for c in client.cookiejar}
    with serve(dev_app) as url:

        def press(_):
            return requests.post(
                f"{url}/checkout/sandbox/{order.number}/simulate",
                data={"csrf_token": token},
                cookies=cookies,
                allow_redirects=False,
                timeout=30,
            ).status_code

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            assert list(pool.map(press, range(2))) == [303, 303]
    found = effects(dbsession)
    assert (found["paid"], found["fulfilments"], found["receipts"]) == (1, 1, 1)
    assert found["events"] <= 2


def test_a_settled_order_sends_nothing(dev_app, catalogue, customer, dbsession):
    order = make_order(dbsession, customer, ("themes",), status="cancelled")
    client = logged_in(dev_app, customer)
    page = client.get(f"/checkout/sandbox/{order.number}")
    assert simulate_form(page) is None
    assert "simulate-payment" in page.html.find("pre").get_text()  # the command stays
    client.post(
        f"/checkout/sandbox/{order.number}/simulate",
        {"csrf_token": page_token(client)},
        status=303,
    )
    assert effects(dbsession) == NOTHING
    assert order_status(dbsession, order.number) == "cancelled"


def test_only_the_orders_customer_may_press_it(
    dev_app, catalogue, customer, other_customer, dbsession
):
    order = make_order(dbsession, customer, ("themes",))
    other = logged_in(dev_app, other_customer)
    token = page_token(other)
    for number in (order.number, "ORD-NOPE-00000", "a" * 70):
        response = other.post(
            f"/checkout/sandbox/{number}/simulate", {"csrf_token": token}, status=404
        )
        assert response.content_type == "text/html"
    # Anonymous, with the anonymous visitor's own token: the sandbox page's access (a
    # guest reaches only the orders this browser placed; anyone else is asked to log in).
    anonymous = page_client(dev_app)
    anonymous_token = anonymous.get("/login").forms[0]["csrf_token"].value
    response = anonymous.post(
        f"/checkout/sandbox/{order.number}/simulate",
        {"csrf_token": anonymous_token},
        status=303,
    )
    assert response.location.startswith("http://localhost/login?next=")
    assert effects(dbsession) == NOTHING
    assert order_status(dbsession, order.number) == "pending"


def test_without_the_csrf_token_it_is_refused(dev_app, catalogue, customer, dbsession):
    order = make_order(dbsession, customer, ("themes",))
    client = logged_in(dev_app, customer)
    path = f"/checkout/sandbox/{order.number}/simulate"
    assert_error_page(client.post(path, status=403), 403)
    client.post(path, {"csrf_token": "forged"}, status=403)
    # Another session's token is not this session's.
    client.post(path, {"csrf_token": page_token(logged_in(dev_app, customer))}, status=403)
    assert effects(dbsession) == NOTHING


def test_never_in_production(production_app, dev_app, catalogue, customer, dbsession):
    order = make_order(dbsession, customer, ("site-guard",))
    https = {"wsgi.url_scheme": "https", "HTTP_ORIGIN": "https://localhost"}
    client = logged_in(production_app, customer, **https)
    sandbox = client.get(f"/checkout/sandbox/{order.number}", status=404)
    assert simulate_form(sandbox) is None and "Simulate payment" not in sandbox.text
    success = client.get(f"/checkout/success?order={order.number}")
    assert simulate_form(success) is None and "Simulate payment" not in success.text
    response = client.post(
        f"/checkout/sandbox/{order.number}/simulate",
        {"csrf_token": page_token(client)},
        status=404,
    )
    assert response.content_type == "text/html"
    assert "not available on a production site" in response.text
    assert effects(dbsession) == NOTHING
    assert order_status(dbsession, order.number) == "pending"
    # The same order on a development site does show the button.
    development = logged_in(dev_app, customer)
    assert simulate_form(development.get(f"/checkout/sandbox/{order.number}")) is not None


def test_a_provider_that_cannot_sign_is_a_clear_error(make_app, catalogue, customer, dbsession):
    app = make_app(**DEVELOPMENT, **{"cmsshop.cardprovider.webhook_secrets": ""})
    order = make_order(dbsession, customer, ("themes",))
    client = logged_in(app, customer)
    response = simulate_form(client.get(f"/checkout/sandbox/{order.number}")).submit(status=503)
    assert_error_page(response, 503)
    assert "cardprovider webhookSecrets is not configured" in response.text
    assert effects(dbsession) == NOTHING


def test_a_webhook_refusal_is_shown(make_app, catalogue, customer, dbsession):
    """Without trusting verified events the webhook asks the provider's API, which this
    site has no account for: its 503 is the page's, and the order stays pending."""
    app = make_app(**{"cmsshop.environment": "development"})
    order = make_order(dbsession, customer, ("themes",))
    client = logged_in(app, customer)
    response = simulate_form(client.get(f"/checkout/sandbox/{order.number}")).submit(status=503)
    assert_error_page(response, 503)
    assert "The webhook refused the simulated payment" in response.text
    assert order_status(dbsession, order.number) == "pending"
    assert dbsession.scalar(select(PaymentEvent.status)) == "confirm_failed"


def test_the_pages_never_load_the_development_pki():
    """The button's code is imported in production too; the development PKI is not."""
    code = (
        "import sys, cmsshop.views.checkout.pages, cmsshop.views.checkout.sandbox, "
        "cmsshop.services.payments.simulation; "
        "print(sorted(m for m in sys.modules if m.startswith('cmsshop.devtools')))"
    )
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert out.stdout.strip() == "[]"


# --- cmsshop-admin simulate-payment ------------------------------------------------------


def admin_ini(tmp_path, database_url, storage_dir, **settings) -> str:
    return write_admin_ini(
        tmp_path / "dev.ini",
        {
            "cmsshop.environment": "development",
            "cmsshop.database_url": database_url,
            "cmsshop.secret": TEST_SECRET,
            "cmsshop.storage_dir": storage_dir,
            "cmsshop.password_hashing": "cheapest",
            "cmsshop.modules": "store webhooks.cardprovider",
            "cmsshop.cardprovider.webhook_secrets": "whsec_test_conftest_0123456789abcdef",
            **settings,
        },
    )


def test_simulate_payment_names_the_ini_it_uses(
    make_app, tmp_path, database_url, storage_dir, catalogue, customer, dbsession
):
    ini = admin_ini(tmp_path, database_url, storage_dir)
    order = make_order(dbsession, customer, ("themes",))
    relative = os.path.relpath(ini, ROOT)  # as typed in the project's folder
    with serve(make_app(**DEVELOPMENT)) as url:
        done = run_admin(relative, "simulate-payment", order.number, "--url", url)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"using {os.path.realpath(ini)}"
    assert lines[1].endswith("-> 200")
    assert order_status(dbsession, order.number) == "paid"


def test_simulate_payment_names_the_ini_when_it_refuses(
    tmp_path, database_url, storage_dir, catalogue, customer, dbsession
):
    order = make_order(dbsession, customer, ("themes",))
    production = {"cmsshop.environment": "production", "cmsshop.password_hashing": "default"}
    ini = admin_ini(tmp_path, database_url, storage_dir, **production)
    done = run_admin(ini, "simulate-payment", order.number)
    assert done.returncode == 2
    assert done.stdout.splitlines() == [f"using {os.path.realpath(ini)}"]
    assert "refusing to simulate payments on a production site" in done.stderr
    # Named before the app starts, so also when its settings cannot work.
    ini = admin_ini(tmp_path, database_url, storage_dir, **{"cmsshop.environment": "production"})
    done = run_admin(ini, "simulate-payment", order.number)
    assert done.returncode == 2
    assert done.stdout.splitlines() == [f"using {os.path.realpath(ini)}"]
    assert "configuration error: cmsshop.password_hashing" in done.stderr
    assert order_status(dbsession, order.number) == "pending"


def test_the_command_after_the_button_shares_the_servers_certificate(
    dev_app,
    wallet_development,
    tmp_path,
    database_url,
    storage_dir,
    catalogue,
    customer,
    dbsession,
):
    """The button leaves the development certificate served by the server's process on
    the loopback cert host; the command then finds its port taken by a server of the
    same PKI's chain, and uses it."""
    first, second = (
        make_order(dbsession, customer, ("themes",), provider="walletprovider") for _ in range(2)
    )
    client = logged_in(dev_app, customer)
    simulate_form(client.get(f"/checkout/sandbox/{first.number}")).submit(status=303)
    assert order_status(dbsession, first.number) == "paid"
    ini = admin_ini(
        tmp_path,
        database_url,
        storage_dir,
        **DEVELOPMENT,
        **wallet_development,
        **{"cmsshop.modules": "store webhooks.walletprovider"},
    )
    with serve(dev_app) as url:
        done = run_admin(ini, "simulate-payment", second.number, "--url", url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert order_status(dbsession, second.number) == "paid"
