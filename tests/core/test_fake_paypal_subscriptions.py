"""The fake PayPal's Subscriptions API, driven over HTTPS as a PayPal client would: the
shapes a plan, a subscription, its sales and transactions take, what PayPal refuses, and
the billing calendar. Tests of cmsshop's wallet subscriptions rely on these."""

from __future__ import annotations

import datetime as dt

import pytest
import requests
from fakes.paypal import CLIENT_ID, CLIENT_SECRET, add_cycle


class Client:
    def __init__(self, fake, ca_bundle):
        self.base, self.verify = fake.base_url, str(ca_bundle)
        token = requests.post(
            self.base + "/v1/oauth2/token",
            data={"grant_type": "client_credentials"},
            auth=(CLIENT_ID, CLIENT_SECRET),
            verify=self.verify,
            timeout=5,
        ).json()["access_token"]
        self.headers = {"Authorization": f"Bearer {token}"}

    def call(self, method: str, path: str, body=None, **headers) -> requests.Response:
        return requests.request(
            method,
            self.base + path,
            json=body,
            headers={**self.headers, **headers},
            verify=self.verify,
            timeout=5,
        )


@pytest.fixture
def client(paypal, pki):
    return Client(paypal, pki.ca_bundle)


def plan_body(product_id: str, unit: str = "MONTH", count: int = 1) -> dict:
    return {
        "product_id": product_id,
        "name": "SiteGuard monthly",
        "billing_cycles": [
            {
                "frequency": {"interval_unit": unit, "interval_count": count},
                "tenure_type": "REGULAR",
                "sequence": 1,
                "total_cycles": 0,
                "pricing_scheme": {"fixed_price": {"value": "49.00", "currency_code": "EUR"}},
            }
        ],
    }


def subscription_body(plan_id: str) -> dict:
    return {
        "plan_id": plan_id,
        "custom_id": "ORD-1",
        "application_context": {
            "return_url": "https://shop.test/ok",
            "cancel_url": "https://shop.test/cancel",
        },
    }


@pytest.fixture
def plan_id(client) -> str:
    product = client.call("POST", "/v1/catalogs/products", {"name": "SiteGuard", "type": "DIGITAL"})
    assert product.status_code == 201
    plan = client.call("POST", "/v1/billing/plans", plan_body(product.json()["id"]))
    assert plan.status_code == 201 and plan.json()["status"] == "ACTIVE"
    return plan.json()["id"]


def test_add_cycle_follows_the_calendar():
    start = dt.datetime(2026, 1, 31, 10, tzinfo=dt.UTC)
    assert add_cycle(start, "MONTH", 1) == dt.datetime(2026, 2, 28, 10, tzinfo=dt.UTC)
    assert add_cycle(start, "YEAR", 1) == dt.datetime(2027, 1, 31, 10, tzinfo=dt.UTC)
    assert add_cycle(start, "WEEK", 2) == start + dt.timedelta(days=14)


@pytest.mark.parametrize(
    "unit, count, status",
    [("MONTH", 13, 422), ("YEAR", 2, 422), ("DAY", 366, 422), ("FORTNIGHT", 1, 400)],
)
def test_paypal_refuses_a_cycle_it_cannot_bill(client, unit, count, status):
    product = client.call("POST", "/v1/catalogs/products", {"name": "P", "type": "DIGITAL"})
    answer = client.call("POST", "/v1/billing/plans", plan_body(product.json()["id"], unit, count))
    assert answer.status_code == status


def test_a_subscription_is_approved_paid_renewed_and_cancelled(client, paypal, plan_id):
    created = client.call(
        "POST",
        "/v1/billing/subscriptions",
        subscription_body(plan_id),
        **{"PayPal-Request-Id": "r1"},
    )
    assert created.status_code == 201
    sub = created.json()
    assert sub["status"] == "APPROVAL_PENDING"
    assert [link["rel"] for link in sub["links"]][0] == "approve"
    again = client.call(
        "POST",
        "/v1/billing/subscriptions",
        subscription_body(plan_id),
        **{"PayPal-Request-Id": "r1"},
    )
    assert again.json()["id"] == sub["id"] and len(paypal.subscriptions) == 1
    activated, sale = paypal.approve(sub["id"])
    assert activated["event_type"] == "BILLING.SUBSCRIPTION.ACTIVATED"
    resource = sale["resource"]
    assert (resource["billing_agreement_id"], resource["custom"]) == (sub["id"], "ORD-1")
    assert resource["amount"] == {
        "total": "49.00",
        "currency": "EUR",
        "details": {"subtotal": "49.00"},
    }
    found = client.call("GET", f"/v1/billing/subscriptions/{sub['id']}").json()
    first_due = found["billing_info"]["next_billing_time"]
    assert found["status"] == "ACTIVE" and found["billing_info"]["last_payment"]["time"]
    (renewal,) = paypal.renew(sub["id"], with_agreement=False)
    assert "billing_agreement_id" not in renewal["resource"]
    assert renewal["resource"]["create_time"] == first_due  # billed at the due time
    sale_read = client.call("GET", f"/v1/payments/sale/{renewal['resource']['id']}").json()
    assert sale_read["state"] == "completed"
    # The transactions list needs its window and lists what falls in it.
    path = f"/v1/billing/subscriptions/{sub['id']}/transactions"
    assert client.call("GET", path).status_code == 400
    listed = client.call(
        "GET", path + "?start_time=2000-01-01T00:00:00Z&end_time=2100-01-01T00:00:00Z"
    ).json()["transactions"]
    assert [t["id"] for t in listed] == [resource["id"], renewal["resource"]["id"]]
    assert listed[0]["amount_with_breakdown"]["gross_amount"]["value"] == "49.00"
    # Cancelled: 204 and no next billing time any more; cancelling again is refused.
    cancel = f"/v1/billing/subscriptions/{sub['id']}/cancel"
    assert client.call("POST", cancel, {}).status_code == 400  # a reason is required
    assert client.call("POST", cancel, {"reason": "done"}).status_code == 204
    found = client.call("GET", f"/v1/billing/subscriptions/{sub['id']}").json()
    assert found["status"] == "CANCELLED" and "next_billing_time" not in found["billing_info"]
    # Cancelled right after the renewal: PayPal keeps its last payment, and the plan
    # still states its billing frequency.
    last = found["billing_info"]["last_payment"]
    assert last["time"] == renewal["resource"]["create_time"]
    plan = client.call("GET", f"/v1/billing/plans/{found['plan_id']}").json()
    assert plan["billing_cycles"][-1]["frequency"]["interval_unit"] == "MONTH"
    refused = client.call("POST", cancel, {"reason": "again"})
    assert refused.status_code == 422
    assert refused.json()["details"][0]["issue"] == "SUBSCRIPTION_STATUS_INVALID"
    (held,) = paypal.held
    assert held["event_type"] == "BILLING.SUBSCRIPTION.CANCELLED"


def test_a_failed_payment_counts_until_one_succeeds(client, paypal, plan_id):
    sub_id = client.call("POST", "/v1/billing/subscriptions", subscription_body(plan_id)).json()[
        "id"
    ]
    paypal.approve(sub_id)
    (failed,) = paypal.fail(sub_id)
    assert failed["event_type"] == "BILLING.SUBSCRIPTION.PAYMENT.FAILED"
    billing = client.call("GET", f"/v1/billing/subscriptions/{sub_id}").json()["billing_info"]
    assert billing["failed_payments_count"] == 1
    assert billing["outstanding_balance"]["value"] == "49.00"
    paypal.renew(sub_id)
    billing = client.call("GET", f"/v1/billing/subscriptions/{sub_id}").json()["billing_info"]
    assert billing["failed_payments_count"] == 0


def trial_plan_body(product_id: str, days: int = 14) -> dict:
    body = plan_body(product_id)
    body["billing_cycles"][0]["sequence"] = 2
    trial = {
        "frequency": {"interval_unit": "DAY", "interval_count": days},
        "tenure_type": "TRIAL",
        "sequence": 1,
        "total_cycles": 1,
    }
    body["billing_cycles"].insert(0, trial)
    return body


def test_a_plan_with_a_free_trial_takes_nothing_until_the_trial_ends(client, paypal):
    product = client.call("POST", "/v1/catalogs/products", {"name": "P", "type": "DIGITAL"})
    plan = client.call("POST", "/v1/billing/plans", trial_plan_body(product.json()["id"]))
    assert plan.status_code == 201
    sub = client.call("POST", "/v1/billing/subscriptions", subscription_body(plan.json()["id"]))
    (activated,) = paypal.approve(sub.json()["id"])  # no sale at the start
    assert activated["event_type"] == "BILLING.SUBSCRIPTION.ACTIVATED"
    found = client.call("GET", f"/v1/billing/subscriptions/{sub.json()['id']}").json()
    billing = found["billing_info"]
    assert found["status"] == "ACTIVE" and "last_payment" not in billing
    start = dt.datetime.fromisoformat(found["start_time"])
    ends = dt.datetime.fromisoformat(billing["next_billing_time"])
    assert ends - start == dt.timedelta(days=14)  # the trial's end
    trial, regular = billing["cycle_executions"]
    assert (trial["tenure_type"], trial["sequence"], trial["total_cycles"]) == ("TRIAL", 1, 1)
    assert (regular["tenure_type"], regular["cycles_completed"]) == ("REGULAR", 0)
    assert paypal.transactions[found["id"]] == []
    (sale,) = paypal.renew(found["id"])
    assert sale["resource"]["create_time"] == billing["next_billing_time"]
    assert sale["resource"]["amount"]["total"] == "49.00"
    found = client.call("GET", f"/v1/billing/subscriptions/{found['id']}").json()
    assert found["billing_info"]["cycle_executions"][1]["cycles_completed"] == 1


@pytest.mark.parametrize(
    "change",
    [
        {"tenure_type": "REGULAR"},
        {"sequence": 2},
        {"total_cycles": 2},
        {"pricing_scheme": {"fixed_price": {"value": "lots", "currency_code": "EUR"}}},
        {"pricing_scheme": {}},
        {"frequency": {"interval_unit": "DAY", "interval_count": 366}},
    ],
)
def test_paypal_refuses_a_trial_cycle_that_is_not_one_trial_first(client, change):
    product = client.call("POST", "/v1/catalogs/products", {"name": "P", "type": "DIGITAL"})
    body = trial_plan_body(product.json()["id"])
    body["billing_cycles"][0].update(change)
    assert client.call("POST", "/v1/billing/plans", body).status_code == 400


def test_a_plan_with_a_priced_trial_cycle_charges_it_first_then_the_regular_price(client, paypal):
    product = client.call("POST", "/v1/catalogs/products", {"name": "P", "type": "DIGITAL"})
    body = trial_plan_body(product.json()["id"])
    body["billing_cycles"][0].update(
        frequency={"interval_unit": "MONTH", "interval_count": 1},
        pricing_scheme={"fixed_price": {"value": "46.65", "currency_code": "EUR"}},
    )
    plan = client.call("POST", "/v1/billing/plans", body)
    assert plan.status_code == 201
    sub = client.call("POST", "/v1/billing/subscriptions", subscription_body(plan.json()["id"]))
    sub_id = sub.json()["id"]
    activated, first = paypal.approve(sub_id)  # the priced first cycle is billed at once
    assert activated["event_type"] == "BILLING.SUBSCRIPTION.ACTIVATED"
    assert first["resource"]["amount"]["total"] == "46.65"
    found = client.call("GET", f"/v1/billing/subscriptions/{sub_id}").json()
    billing = found["billing_info"]
    assert billing["last_payment"]["amount"]["value"] == "46.65"
    start = dt.datetime.fromisoformat(found["start_time"])
    assert dt.datetime.fromisoformat(billing["next_billing_time"]) == add_cycle(start, "MONTH", 1)
    trial, regular = billing["cycle_executions"]
    # A cycle with a price carries its pricing version, as PayPal writes it.
    assert (trial["tenure_type"], trial["cycles_completed"]) == ("TRIAL", 1)
    assert trial["current_pricing_scheme_version"] == 1
    assert regular["cycles_completed"] == 0
    (second,) = paypal.renew(sub_id)
    (third,) = paypal.renew(sub_id)
    assert [e["resource"]["amount"]["total"] for e in (second, third)] == ["49.00", "49.00"]
    found = client.call("GET", f"/v1/billing/subscriptions/{sub_id}").json()
    trial, regular = found["billing_info"]["cycle_executions"]
    assert (trial["cycles_completed"], regular["cycles_completed"]) == (1, 2)
    listed = client.call(
        "GET",
        f"/v1/billing/subscriptions/{sub_id}/transactions"
        "?start_time=2000-01-01T00:00:00Z&end_time=2100-01-01T00:00:00Z",
    ).json()["transactions"]
    amounts = [t["amount_with_breakdown"]["gross_amount"]["value"] for t in listed]
    assert amounts == ["46.65", "49.00", "49.00"]


def test_a_free_trial_cycle_has_no_pricing_version(client, paypal):
    product = client.call("POST", "/v1/catalogs/products", {"name": "P", "type": "DIGITAL"})
    plan = client.call("POST", "/v1/billing/plans", trial_plan_body(product.json()["id"]))
    sub = client.call("POST", "/v1/billing/subscriptions", subscription_body(plan.json()["id"]))
    paypal.approve(sub.json()["id"])
    found = client.call("GET", f"/v1/billing/subscriptions/{sub.json()['id']}").json()
    trial, regular = found["billing_info"]["cycle_executions"]
    assert "current_pricing_scheme_version" not in trial
    assert regular["current_pricing_scheme_version"] == 1


def test_a_sale_is_refunded_in_part_then_in_full_once_per_request_id(client, paypal, plan_id):
    sub_id = client.call("POST", "/v1/billing/subscriptions", subscription_body(plan_id)).json()[
        "id"
    ]
    _, paid = paypal.approve(sub_id)
    sale_id = paid["resource"]["id"]
    refund = f"/v1/payments/sale/{sale_id}/refund"
    part = {"amount": {"total": "10.00", "currency": "EUR"}, "description": "goodwill"}
    first = client.call("POST", refund, part, **{"PayPal-Request-Id": "k1"})
    assert first.status_code == 201
    body = first.json()
    assert (body["state"], body["sale_id"], body["amount"]) == (
        "completed",
        sale_id,
        {"total": "10.00", "currency": "EUR"},
    )
    # The same request id: the same refund, nothing more refunded.
    again = client.call("POST", refund, part, **{"PayPal-Request-Id": "k1"})
    assert again.json()["id"] == body["id"] and len(paypal.sale_refunds) == 1
    assert client.call("GET", f"/v1/payments/sale/{sale_id}").json()["state"] == (
        "partially_refunded"
    )
    # More than is left, all of it after a part, another currency: refused, by name.
    for payload, name in (
        ({"amount": {"total": "39.01", "currency": "EUR"}}, "REFUND_EXCEEDED_TRANSACTION_AMOUNT"),
        ({}, "FULL_REFUND_NOT_ALLOWED_AFTER_PARTIAL_REFUND"),
        ({"amount": {"total": "1.00", "currency": "USD"}}, "CURRENCY_MISMATCH"),
    ):
        answer = client.call("POST", refund, payload)
        assert (answer.status_code, answer.json()["name"]) == (400, name)
    rest = client.call("POST", refund, {"amount": {"total": "39.00", "currency": "EUR"}})
    assert rest.status_code == 201
    assert client.call("GET", f"/v1/payments/sale/{sale_id}").json()["state"] == "refunded"
    listed = client.call(
        "GET",
        f"/v1/billing/subscriptions/{sub_id}/transactions"
        "?start_time=2000-01-01T00:00:00Z&end_time=2100-01-01T00:00:00Z",
    ).json()["transactions"]
    assert listed[0]["status"] == "REFUNDED"
    done = client.call("POST", refund, {"amount": {"total": "1.00", "currency": "EUR"}})
    assert done.json()["name"] == "TRANSACTION_ALREADY_REFUNDED"
    assert client.call("POST", "/v1/payments/sale/NOSUCHSALE/refund", {}).status_code == 404
    # Its event names the refund, the sale, the total refunded and the order.
    resource = paypal.sale_refund_event_of(rest.json()["id"])["resource"]
    assert (resource["sale_id"], resource["custom"]) == (sale_id, "ORD-1")
    assert resource["total_refunded_amount"] == {"value": "49.00", "currency": "EUR"}
    # Down: the refund call fails and nothing is refunded.
    paypal.refund_fail_status = 503
    other = paypal.renew(sub_id)[0]["resource"]["id"]
    assert client.call("POST", f"/v1/payments/sale/{other}/refund", {}).status_code == 503
    assert paypal.sale_refunded_of(other) == 0
