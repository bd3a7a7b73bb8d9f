"""The admin API that sells a product as a subscription."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from cmsshop.models import SubscriptionPlan

ROUTE = "/api/admin/products/{}/subscription"


def test_a_licensed_product_is_sold_monthly_then_yearly_then_not(admin_app, catalogue, dbsession):
    admin_app.get(ROUTE.format("site-guard"), status=404)
    created = admin_app.put_json(ROUTE.format("site-guard"), {"interval": "month"}, status=201)
    assert created.json == {
        "product": "site-guard",
        "interval": "month",
        "intervalCount": 1,
        "active": True,
        "trialDays": 0,
    }
    changed = admin_app.put_json(
        ROUTE.format("site-guard"), {"interval": "year", "active": False}, status=200
    ).json
    assert (changed["interval"], changed["active"]) == ("year", False)
    assert admin_app.get(ROUTE.format("site-guard")).json == changed
    dbsession.rollback()
    assert len(dbsession.scalars(select(SubscriptionPlan)).all()) == 1


@pytest.mark.parametrize(
    "slug, body, status, field",
    [
        ("themes", {"interval": "month"}, 422, "product"),
        ("site-guard", {"interval": "year", "intervalCount": 4}, 422, "intervalCount"),
        ("site-guard", {"interval": "fortnight"}, 422, "interval"),
        ("site-guard", {"interval": "month", "intervalCount": "1"}, 422, "intervalCount"),
        ("site-guard", {"interval": "month", "intervalCount": 0}, 422, "intervalCount"),
        ("site-guard", {"interval": "month", "active": "yes"}, 422, "active"),
        ("site-guard", {}, 422, "interval"),
        ("nope", {"interval": "month"}, 404, None),
    ],
)
def test_bad_plans_are_refused_and_change_nothing(
    admin_app, catalogue, dbsession, slug, body, status, field
):
    answer = admin_app.put_json(ROUTE.format(slug), body, status=status).json
    assert {"code", "title", "message", "hints", "supportCode"} <= set(answer)
    if field:
        assert field in answer["errors"], answer
    dbsession.rollback()
    assert dbsession.scalars(select(SubscriptionPlan)).all() == []


def test_only_an_admin_sets_plans(customer_app, testapp, catalogue):
    customer_app.put_json(ROUTE.format("site-guard"), {"interval": "month"}, status=403)
    testapp.put_json(ROUTE.format("site-guard"), {"interval": "month"}, status=401)


def test_the_product_page_says_so_at_once_though_it_is_cached(admin_app, app, catalogue, customer):
    from helpers.clients import logged_in, page_client

    visitor = page_client(app)
    assert "every month" not in visitor.get("/products/site-guard").text
    assert "every month" not in visitor.get("/products/site-guard").text  # kept now
    admin_app.put_json(ROUTE.format("site-guard"), {"interval": "month"}, status=201)
    page = visitor.get("/products/site-guard").text
    assert "every month" in page and "until you cancel" in page
    assert "Subscribe to SiteGuard" in logged_in(app, customer).get("/products/site-guard").text
    admin_app.put_json(ROUTE.format("site-guard"), {"interval": "month", "active": False})
    assert "every month" not in visitor.get("/products/site-guard").text
