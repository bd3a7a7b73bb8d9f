"""The reconciliation pass (cmsshop-admin reconcile-subscriptions): events that never
arrived are repaired from the provider's account, each paid invoice once, and a second
pass finds nothing to do."""

from __future__ import annotations

from helpers.subscriptions import GRACE, period_end, state

from cmsshop.models import Order
from cmsshop.scripts.admin import main as admin_main


def test_lost_events_are_repaired_once(subscribed, fake_stripe, card_ini, dbsession, capsys):
    number, sub_id = subscribed
    fake_stripe.renew(sub_id)  # the renewal's events are lost
    fake_stripe.renew(sub_id)  # and the next one's
    fake_stripe.schedule_cancel(sub_id)  # and the cancellation's
    assert admin_main([card_ini, "reconcile-subscriptions"]) == 0
    out = capsys.readouterr().out
    assert out.count("recorded: processed") == 2
    assert "status active -> cancel_scheduled" in out
    assert "1 repaired" in out
    subscription, license, periods = state(dbsession, number)
    assert len(periods) == 3 and subscription.status == "cancel_scheduled"
    assert subscription.paid_through == period_end(fake_stripe)
    assert license.expires_at == subscription.paid_through  # it will not renew
    assert dbsession.query(Order).filter(Order.status == "paid").count() == 3
    assert admin_main([card_ini, "reconcile-subscriptions"]) == 0
    assert "0 repaired" in capsys.readouterr().out
    assert len(state(dbsession, number)[2]) == 3


def test_a_provider_that_cannot_be_asked_is_reported(
    subscribed, fake_stripe, card_ini, dbsession, capsys
):
    number, _ = subscribed
    fake_stripe.fail_with = 500
    assert admin_main([card_ini, "reconcile-subscriptions"]) == 1
    assert "not checked" in capsys.readouterr().err
    fake_stripe.fail_with = None
    subscription, license, _ = state(dbsession, number)
    assert license.expires_at == subscription.paid_through + GRACE
