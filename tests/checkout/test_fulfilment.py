"""The order state machine, gap-free invoice numbers, and simulate-payment end to end
(the command signs an event and POSTs it to a running server's real webhook route)."""

from __future__ import annotations

import datetime as dt

import pytest
from fakes.shop import counts, make_order, order_status
from fakes.stripe_api import SECRET
from helpers.app import HASHER, TEST_SECRET, serve
from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import Order, PaymentEvent
from cmsshop.scripts.admin import main as admin_main
from cmsshop.services import demo
from cmsshop.services.payments import fulfilment


def test_states_only_move_forward():
    transitions = fulfilment.TRANSITIONS
    assert transitions["refunded"] == frozenset()
    assert all("pending" not in targets for targets in transitions.values())
    for closed in ("failed", "cancelled"):
        assert transitions[closed] == {"needs_review"}
    order = Order(number="ORD-1", status="refunded")
    with pytest.raises(fulfilment.TransitionRefused):
        fulfilment.move(order, "paid")


def test_invoice_numbers_given_back_on_rollback(engine):
    year = dt.datetime.now(dt.UTC).year
    with Session(engine) as session:
        assert fulfilment.next_invoice_number(session, year) == (1, f"INV-{year}-000001")
        session.rollback()
        assert fulfilment.next_invoice_number(session, year)[0] == 1
        assert fulfilment.next_invoice_number(session, year)[0] == 2
        session.commit()
    with Session(engine) as session:
        assert fulfilment.next_invoice_number(session, year)[1] == f"INV-{year}-000003"
        assert fulfilment.next_invoice_number(session, year + 1)[1] == f"INV-{year + 1}-000001"
        session.commit()


@pytest.fixture
def ini_file(tmp_path, database_url, storage_dir):
    path = tmp_path / "test.ini"
    path.write_text(
        "[app:main]\n"
        "use = egg:cmsshop\n"
        "cmsshop.environment = testing\n"
        f"cmsshop.database_url = {database_url}\n"
        f"cmsshop.secret = {TEST_SECRET}\n"
        "cmsshop.modules = store webhooks.cardprovider\n"
        f"cmsshop.storage_dir = {storage_dir}\n"
        "cmsshop.password_hashing = cheapest\n"
        f"cmsshop.cardprovider.webhook_secrets = {SECRET}\n"
        "cmsshop.payments.trust_verified_events = true\n"
    )
    return str(path)


@pytest.fixture
def dev_server(make_app):
    """A development-like server: signs with SECRET, trusts verified events."""
    app = make_app(
        **{
            "cmsshop.cardprovider.webhook_secrets": SECRET,
            "cmsshop.payments.trust_verified_events": "true",
        }
    )
    with serve(app) as url:
        yield url


def test_simulate_payment_pays_a_pending_order(
    ini_file, dev_server, dbsession, catalogue, customer, capsys
):
    order = make_order(dbsession, customer, ("site-guard", "themes"), checkout_id="cs_test_sim")
    code = admin_main([ini_file, "simulate-payment", order.number, "--url", dev_server])
    out = capsys.readouterr().out
    assert code == 0, out
    assert '"status": "processed"' in out
    assert order_status(dbsession, order.number) == "paid"
    assert counts(dbsession)["licenses"] == 1
    event = dbsession.scalar(select(PaymentEvent))
    assert event.event_type == "checkout.session.completed"
    assert '"id":"cs_test_sim"' in event.payload.replace(" ", "")
    # Running it again is a different event for the same payment: nothing new.
    assert admin_main([ini_file, "simulate-payment", order.number, "--url", dev_server]) == 0
    assert '"status": "duplicate"' in capsys.readouterr().out
    assert counts(dbsession)["fulfilments"] == 1


def test_simulate_payment_refusals(
    ini_file, tmp_path, dev_server, dbsession, catalogue, customer, capsys
):
    assert admin_main([ini_file, "simulate-payment", "ORD-NONE", "--url", dev_server]) == 1
    order = make_order(dbsession, customer)
    assert (
        admin_main(
            [ini_file, "simulate-payment", order.number, "--provider", "bank", "--url", dev_server]
        )
        == 2
    )
    # A server that is not running.
    assert (
        admin_main([ini_file, "simulate-payment", order.number, "--url", "http://127.0.0.1:9"]) == 1
    )
    assert "could not reach" in capsys.readouterr().err
    assert order_status(dbsession, order.number) == "pending"


def test_simulate_payment_signature_must_match_the_server(
    make_app, ini_file, dbsession, catalogue, customer, capsys
):
    app = make_app(**{"cmsshop.cardprovider.webhook_secrets": "whsec_server_has_another_0123"})
    order = make_order(dbsession, customer)
    with serve(app) as url:
        assert admin_main([ini_file, "simulate-payment", order.number, "--url", url]) == 1
    assert "invalid_signature" in capsys.readouterr().out
    assert order_status(dbsession, order.number) == "pending"


def test_demo_data_has_a_pending_order_to_simulate(
    ini_file, dev_server, dbsession, storage_dir, capsys
):
    report = demo.seed_demo(dbsession, {"cmsshop.storage_dir": str(storage_dir)}, HASHER)
    dbsession.commit()
    line = next(line for line in report if line.startswith("pending order"))
    number = line.split()[2]
    assert demo.seed_demo_order(dbsession) == []  # once only
    assert admin_main([ini_file, "simulate-payment", number, "--url", dev_server]) == 0
    assert order_status(dbsession, number) == "paid"
