"""Coupons in the admin JSON API and the console: create, read, list, change, pause and
resume, the usage list; answers match the OpenAPI document; every bad input is a 4xx
with nothing changed; customers, visitors and forged forms get nowhere."""

from __future__ import annotations

import pytest
from helpers.clients import logged_in, page_client
from helpers.coupons import make_coupon, place_with_coupon
from helpers.html import errors_of, h1_of
from helpers.notices import flashed
from helpers.purchases import openapi_validator
from sqlalchemy import func, select

from cmsshop.models import Coupon, CouponAmount, CouponProduct
from cmsshop.services.payments import fulfilment

LAUNCH = {
    "code": "launch20",
    "description": "Launch week",
    "kind": "percent",
    "percentOff": 20,
    "amounts": {"EUR": {"minSubtotal": 2000}},
    "validFrom": "2026-12-01T00:00:00Z",
    "validUntil": "2026-12-08T00:00:00+01:00",
    "maxRedemptions": 500,
    "maxPerCustomer": 1,
    "products": ["site-guard", "themes"],
}


def check_schema(admin_app, path, method, status, body):
    validator = openapi_validator(admin_app, path, method, str(status))
    errors = [str(error) for error in validator.iter_errors(body)]
    assert not errors, errors


def coupon_rows(dbsession) -> dict[str, int]:
    dbsession.rollback()  # a fresh snapshot: the app committed in its own transactions
    return {
        model.__tablename__: dbsession.scalar(select(func.count()).select_from(model))
        for model in (Coupon, CouponAmount, CouponProduct)
    }


@pytest.fixture
def launch(admin_app, catalogue):
    return admin_app.post_json("/api/admin/coupons", LAUNCH, status=201).json


# --- the JSON API --------------------------------------------------------------------------


def test_create_and_read_a_percent_coupon(admin_app, launch):
    check_schema(admin_app, "/api/admin/coupons", "post", 201, launch)
    assert {key: launch[key] for key in LAUNCH} == {
        **LAUNCH,
        "code": "LAUNCH20",
        "amounts": {"EUR": {"amountOff": None, "minSubtotal": 2000}},
        "validUntil": "2026-12-07T23:00:00Z",
        "products": ["site-guard", "themes"],
    }
    assert launch["paused"] is False
    assert launch["counted"] == 0
    assert launch["redemptions"] == {"reserved": 0, "redeemed": 0, "released": 0}
    assert launch["state"] in ("scheduled", "active", "expired")
    for path in ("/api/admin/coupons/LAUNCH20", "/api/admin/coupons/launch20"):
        shown = admin_app.get(path).json
        check_schema(admin_app, "/api/admin/coupons/{code}", "get", 200, shown)
        assert shown == launch
    listed = admin_app.get("/api/admin/coupons").json
    check_schema(admin_app, "/api/admin/coupons", "get", 200, listed)
    assert listed["total"] == 1 and listed["items"] == [launch]


def test_create_a_fixed_coupon(admin_app, catalogue):
    body = {
        "code": "FIVE",
        "kind": "fixed",
        "amounts": {"EUR": {"amountOff": 500}, "USD": {"amountOff": 600, "minSubtotal": 0}},
    }
    created = admin_app.post_json("/api/admin/coupons", body, status=201).json
    assert created["percentOff"] is None
    assert created["amounts"] == {
        "EUR": {"amountOff": 500, "minSubtotal": None},
        "USD": {"amountOff": 600, "minSubtotal": 0},
    }
    assert created["products"] == [] and created["validFrom"] is None
    assert created["state"] == "active"


def test_the_list_shows_use_and_pages(admin_app, dbsession, catalogue, customer):
    make_coupon(dbsession, "FIRST", max_redemptions=2)
    for index in range(3):
        make_coupon(dbsession, f"MORE{index}")
    place_with_coupon(dbsession, customer, "FIRST")
    cancelled = place_with_coupon(dbsession, customer, "FIRST", ("themes",))
    dbsession.commit()
    fulfilment.close_order(dbsession, fulfilment.lock_order(dbsession, cancelled.id), "cancelled")
    dbsession.commit()
    page = admin_app.get("/api/admin/coupons?perPage=2&page=2").json
    assert (page["total"], page["page"], page["perPage"]) == (4, 2, 2)
    everything = admin_app.get("/api/admin/coupons?perPage=100").json["items"]
    first = next(item for item in everything if item["code"] == "FIRST")
    assert first["counted"] == 1
    assert first["redemptions"] == {"reserved": 1, "redeemed": 0, "released": 1}
    assert admin_app.get("/api/admin/coupons?page=99").json["items"] == []
    for query in ("page=0", "perPage=101", "page=x", "page=1&page=2", "perPage="):
        response = admin_app.get(f"/api/admin/coupons?{query}", status=422)
        assert response.json["code"] == "validation_failed", query


def test_the_usage_list(admin_app, dbsession, catalogue, customer, other_customer):
    make_coupon(dbsession, "TEN")
    first = place_with_coupon(dbsession, customer, "TEN", ("site-guard", "themes"))
    second = place_with_coupon(dbsession, other_customer, "TEN", ("themes",))
    body = admin_app.get("/api/admin/coupons/ten/redemptions").json
    check_schema(admin_app, "/api/admin/coupons/{code}/redemptions", "get", 200, body)
    assert body["total"] == 2
    assert [
        (i["order"], i["customer"], i["status"], i["discount"], i["currency"])
        for i in body["items"]
    ] == [
        (second.number, "bob@example.com", "reserved", 190, "EUR"),
        (first.number, "alice@example.com", "reserved", 680, "EUR"),
    ]
    assert admin_app.get("/api/admin/coupons/NOPE/redemptions", status=404).json["code"] == (
        "coupon_not_found"
    )


def test_patch_pauses_resumes_and_changes(admin_app, launch, dbsession):
    paused = admin_app.patch_json("/api/admin/coupons/LAUNCH20", {"paused": True}).json
    check_schema(admin_app, "/api/admin/coupons/{code}", "patch", 200, paused)
    assert paused["paused"] is True and paused["state"] == "paused" and paused["notes"] == []
    changed = admin_app.patch_json(
        "/api/admin/coupons/launch20",
        {
            "paused": False,
            "description": "",
            "validFrom": None,
            "validUntil": None,
            "maxRedemptions": None,
            "maxPerCustomer": 3,
            "percentOff": 25,
            "amounts": {"USD": {"minSubtotal": 100}},
            "products": ["pixel-forge"],
            "code": "LAUNCH20",
            "kind": "percent",
        },
    ).json
    assert {k: changed[k] for k in ("paused", "description", "validFrom", "validUntil")} == {
        "paused": False,
        "description": "",
        "validFrom": None,
        "validUntil": None,
    }
    assert changed["maxRedemptions"] is None and changed["maxPerCustomer"] == 3
    assert changed["percentOff"] == 25 and changed["state"] == "active"
    assert changed["amounts"] == {"USD": {"amountOff": None, "minSubtotal": 100}}
    assert changed["products"] == ["pixel-forge"]
    assert coupon_rows(dbsession) == {"coupons": 1, "coupon_amounts": 1, "coupon_products": 1}


def test_a_cap_below_the_count_is_allowed_and_noted(admin_app, dbsession, catalogue, customer):
    make_coupon(dbsession, "BUSY", max_redemptions=5)
    place_with_coupon(dbsession, customer, "BUSY")
    place_with_coupon(dbsession, customer, "BUSY", ("themes",))
    body = admin_app.patch_json("/api/admin/coupons/BUSY", {"maxRedemptions": 1}).json
    assert body["maxRedemptions"] == 1 and body["counted"] == 2
    assert body["state"] == "used_up"
    assert body["notes"] == [
        "maxRedemptions 1 is below the 2 redemptions already counted: no new ones until "
        "some are released; none is taken back."
    ]


def test_duplicate_and_unknown_codes(admin_app, launch, dbsession):
    again = admin_app.post_json("/api/admin/coupons", {**LAUNCH, "code": "Launch20"}, status=409)
    assert again.json["code"] == "coupon_exists"
    for path in ("/api/admin/coupons/NOPE", "/api/admin/coupons/x", "/api/admin/coupons/%C3%A9"):
        assert admin_app.get(path, status=404).json["code"] == "coupon_not_found"
        assert (
            admin_app.patch_json(path, {"paused": True}, status=404).json["code"]
            == "coupon_not_found"
        )
    assert coupon_rows(dbsession)["coupons"] == 1


HOSTILE_CREATES = [
    ({**LAUNCH, "code": "ab"}, "code"),
    ({**LAUNCH, "code": "-AB"}, "code"),
    ({**LAUNCH, "code": "A" * 41}, "code"),
    ({**LAUNCH, "code": "SAVE 10"}, "code"),
    ({**LAUNCH, "code": 10}, "code"),
    ({**LAUNCH, "code": "SAVE\u000010"}, "code"),
    ({**LAUNCH, "kind": "bogo"}, "kind"),
    ({**LAUNCH, "percentOff": 0}, "percentOff"),
    ({**LAUNCH, "percentOff": 101}, "percentOff"),
    ({**LAUNCH, "percentOff": "20"}, "percentOff"),
    ({**LAUNCH, "percentOff": 20.5}, "percentOff"),
    ({**LAUNCH, "percentOff": True}, "percentOff"),
    ({**LAUNCH, "percentOff": None}, "percentOff"),
    ({**LAUNCH, "kind": "fixed"}, "percentOff"),
    ({**LAUNCH, "kind": "fixed", "percentOff": None}, "amounts"),
    ({**LAUNCH, "amounts": {"EUR": {"amountOff": 500}}}, "amounts.EUR.amountOff"),
    ({**LAUNCH, "amounts": {"eur": {"minSubtotal": 1}}}, "amounts"),
    ({**LAUNCH, "amounts": {"XXX": {"minSubtotal": 1}}}, "amounts.XXX"),
    ({**LAUNCH, "amounts": {"EUR": {"minSubtotal": -1}}}, "amounts.EUR.minSubtotal"),
    ({**LAUNCH, "amounts": {"EUR": {"minSubtotal": 10**16}}}, "amounts.EUR.minSubtotal"),
    ({**LAUNCH, "amounts": {"EUR": {"minimum": 1}}}, "amounts.EUR"),
    ({**LAUNCH, "amounts": {"EUR": 5}}, "amounts.EUR"),
    ({**LAUNCH, "amounts": [1]}, "amounts"),
    (
        {**LAUNCH, "amounts": {f"{chr(65 + i // 26)}{chr(65 + i % 26)}A": {} for i in range(51)}},
        "amounts",
    ),
    ({**LAUNCH, "validFrom": "2026-12-01"}, "validFrom"),
    ({**LAUNCH, "validFrom": "2026-12-01T00:00:00"}, "validFrom"),
    ({**LAUNCH, "validFrom": "2026-13-01T00:00:00Z"}, "validFrom"),
    ({**LAUNCH, "validFrom": "0001-01-01T00:00:00+01:00"}, "validFrom"),
    ({**LAUNCH, "validFrom": 1764547200}, "validFrom"),
    ({**LAUNCH, "validUntil": "2026-11-30T00:00:00Z"}, "validUntil"),
    ({**LAUNCH, "maxRedemptions": 0}, "maxRedemptions"),
    ({**LAUNCH, "maxRedemptions": 2**31}, "maxRedemptions"),
    ({**LAUNCH, "maxPerCustomer": -1}, "maxPerCustomer"),
    ({**LAUNCH, "products": ["nope"]}, "products.0"),
    ({**LAUNCH, "products": ["themes", "themes"]}, "products"),
    ({**LAUNCH, "products": "themes"}, "products"),
    ({**LAUNCH, "products": ["Bad Slug"]}, "products.0"),
    ({**LAUNCH, "products": ["themes"] * 101}, "products"),
    ({**LAUNCH, "description": "x" * 201}, "description"),
    ({**LAUNCH, "description": "a\nb"}, "description"),
    ({**LAUNCH, "paused": "yes"}, "paused"),
    ({**LAUNCH, "reserved": 0}, "body"),
    ({k: v for k, v in LAUNCH.items() if k != "kind"}, "kind"),
]


@pytest.mark.parametrize(("body", "field"), HOSTILE_CREATES)
def test_bad_coupons_are_refused_and_nothing_is_written(
    admin_app, catalogue, dbsession, body, field
):
    response = admin_app.post_json("/api/admin/coupons", body, status=422)
    assert response.json["code"] == "validation_failed"
    assert field in response.json["errors"], response.json["errors"]
    assert coupon_rows(dbsession) == {"coupons": 0, "coupon_amounts": 0, "coupon_products": 0}


def test_bodies_that_are_not_json_objects(admin_app, catalogue, dbsession):
    url = "/api/admin/coupons"
    assert (
        admin_app.post(url, "{", content_type="application/json", status=400).json["code"]
        == "malformed_json"
    )
    assert admin_app.post(url, "code=X", status=415).json["code"] == "unsupported_media_type"
    assert admin_app.post_json(url, [LAUNCH], status=422).json["code"] == "validation_failed"
    big = {**LAUNCH, "description": "x" * (2 * 1024 * 1024)}
    assert admin_app.post_json(url, big, status=413).json["code"] == "payload_too_large"
    assert coupon_rows(dbsession)["coupons"] == 0


HOSTILE_PATCHES = [
    ({"code": "OTHER"}, "code"),
    ({"kind": "fixed"}, "kind"),
    ({"percentOff": None}, "percentOff"),
    ({"paused": 1}, "paused"),
    ({"validUntil": "2026-11-01T00:00:00Z"}, "validUntil"),
    ({"maxPerCustomer": "2"}, "maxPerCustomer"),
    ({"amounts": {"EUR": {"amountOff": 1}}}, "amounts.EUR.amountOff"),
    ({"products": ["nope"]}, "products.0"),
    ({"reserved": 0}, "body"),
    ({"counted": 0}, "body"),
]


@pytest.mark.parametrize(("body", "field"), HOSTILE_PATCHES)
def test_bad_changes_are_refused_and_nothing_changes(admin_app, launch, dbsession, body, field):
    response = admin_app.patch_json("/api/admin/coupons/LAUNCH20", body, status=422)
    assert field in response.json["errors"], response.json["errors"]
    assert admin_app.get("/api/admin/coupons/LAUNCH20").json == launch


def test_fixed_coupons_keep_an_amount_off(admin_app, catalogue):
    admin_app.post_json(
        "/api/admin/coupons",
        {"code": "FIVE", "kind": "fixed", "amounts": {"EUR": {"amountOff": 500}}},
        status=201,
    )
    for body, field in (
        ({"amounts": {"EUR": {"minSubtotal": 100}}}, "amounts"),
        ({"percentOff": 10}, "percentOff"),
    ):
        response = admin_app.patch_json("/api/admin/coupons/FIVE", body, status=422)
        assert field in response.json["errors"]


def test_only_admins_with_the_token(testapp, customer_app, admin_app, launch, dbsession):
    for client, status, code in (
        (testapp, 401, "not_authenticated"),
        (customer_app, 403, "forbidden"),
    ):
        for path in (
            "/api/admin/coupons",
            "/api/admin/coupons/LAUNCH20",
            "/api/admin/coupons/LAUNCH20/redemptions",
        ):
            assert client.get(path, status=status).json["code"] == code
        assert client.post_json("/api/admin/coupons", {**LAUNCH, "code": "X12"}, status=status)
        assert client.patch_json("/api/admin/coupons/LAUNCH20", {"paused": True}, status=status)
    forged = admin_app.patch_json(
        "/api/admin/coupons/LAUNCH20", {"paused": True}, headers={"X-CSRF-Token": "x"}, status=403
    )
    assert forged.json["code"] == "csrf_failed"
    created = admin_app.post_json(
        "/api/admin/coupons", {**LAUNCH, "code": "X12"}, headers={"X-CSRF-Token": ""}, status=403
    )
    assert created.json["code"] == "csrf_failed"
    assert admin_app.get("/api/admin/coupons/LAUNCH20").json == launch
    assert coupon_rows(dbsession)["coupons"] == 1


# --- the console ---------------------------------------------------------------------------

PAGES = ["/admin/coupons", "/admin/coupons/new", "/admin/coupons/LAUNCH20"]
POSTS = ["/admin/coupons/new", "/admin/coupons/LAUNCH20/pause", "/admin/coupons/LAUNCH20/resume"]


def test_visitors_log_in_and_customers_are_refused(app, launch, customer):
    visitor = page_client(app)
    for path in PAGES:
        assert "/login?next=" in visitor.get(path, status=303).location
    client = logged_in(app, customer.email)
    token = client.get("/login").forms[0]["csrf_token"].value
    for path in PAGES:
        client.get(path, status=403)
    for path in POSTS:
        client.post(path, {"csrf_token": token, "code": "X12", "kind": "percent"}, status=403)


def test_the_console_lists_creates_and_pauses(
    admin_pages, admin_app, catalogue, dbsession, customer
):
    make_coupon(
        dbsession, "OLD", kind="fixed", percent_off=None, amounts={"EUR": {"amount_off": 500}}
    )
    place_with_coupon(dbsession, customer, "OLD", ("themes",))
    listing = admin_pages.get("/admin/coupons")
    assert h1_of(listing) == "Coupons"
    row = listing.html.find("tr", attrs={"data-code": "OLD"})
    assert "EUR5.00 off in EUR" in row.get_text()
    cells = [td.get_text(strip=True) for td in row.find_all("td")]
    assert cells[3:] == ["1", "0", "1", "0"]  # counted, redeemed, reserved, released
    assert listing.html.find("a", string="Coupons")["aria-current"] == "page"

    new = admin_pages.get("/admin/coupons/new")
    form = new.forms["coupon-form"]
    form["code"] = "spring"
    form["description"] = "Spring sale"
    form["kind"] = "percent"
    form["percent_off"] = "15"
    form["min_subtotal_EUR"] = "20.00"
    form["valid_until"] = "2030-06-01T12:30"
    form["max_redemptions"] = "100"
    form["max_per_customer"] = "1"
    slugs = [box["value"] for box in new.html.find_all("input", attrs={"name": "products"})]
    form.set("products", True, index=slugs.index("themes"))
    created = form.submit(status=303)
    assert created.location.endswith("/admin/coupons/SPRING")
    assert flashed(created) == "coupon_created"
    page = created.follow()
    assert h1_of(page) == "CouponSPRING"  # the code in <code>
    assert page.html.find(attrs={"role": "status"}).get_text(strip=True) == (
        "The coupon was created."
    )
    body = admin_app.get("/api/admin/coupons/SPRING").json
    assert body["percentOff"] == 15 and body["products"] == ["themes"]
    assert body["amounts"] == {"EUR": {"amountOff": None, "minSubtotal": 2000}}
    assert body["validUntil"] == "2030-06-01T12:30:00Z" and body["maxRedemptions"] == 100

    paused = page.forms[1].submit(status=303)
    assert flashed(paused) == "coupon_paused"
    page = paused.follow()
    assert admin_app.get("/api/admin/coupons/SPRING").json["paused"] is True
    assert "Resume the coupon" in page.text
    page.forms[1].submit(status=303)
    assert admin_app.get("/api/admin/coupons/SPRING").json["paused"] is False


def test_the_coupon_page_lists_its_usage(admin_pages, dbsession, catalogue, customer):
    make_coupon(dbsession, "TEN")
    order = place_with_coupon(dbsession, customer, "TEN", ("site-guard", "themes"))
    page = admin_pages.get("/admin/coupons/ten")
    table = page.html.find(id="redemption-list")
    row = table.find("tbody").find("tr")
    assert row.find("th").get_text(strip=True) == order.number
    cells = [td.get_text(strip=True) for td in row.find_all("td")]
    assert cells[:3] == ["alice@example.com", "reserved", "EUR6.80"]
    admin_pages.get("/admin/coupons/NOPE", status=404)
    admin_pages.get("/admin/coupons/%C3%A9", status=404)


def test_the_form_shows_mistakes_and_keeps_what_was_typed(admin_pages, catalogue, dbsession):
    make_coupon(dbsession, "TAKEN")
    form = admin_pages.get("/admin/coupons/new").forms["coupon-form"]
    form["code"] = "x"
    form["kind"] = "fixed"
    form["amount_off_EUR"] = "5.001"
    form["min_subtotal_USD"] = "-1"
    form["valid_from"] = "yesterday"
    form["max_redemptions"] = "0"
    page = form.submit(status=422)
    errors = errors_of(page)
    assert set(errors) >= {
        "code",
        "amount_off_EUR",
        "min_subtotal_USD",
        "valid_from",
        "max_redemptions",
    }
    assert errors["amount_off_EUR"] == "at most 2 decimals"
    again = page.forms["coupon-form"]
    assert again["code"].value == "x" and again["amount_off_EUR"].value == "5.001"
    again["code"] = "taken"
    again["amount_off_EUR"] = "5"
    again["min_subtotal_USD"] = ""
    again["valid_from"] = ""
    again["max_redemptions"] = ""
    taken = again.submit(status=409)
    assert "exists already" in errors_of(taken)["code"]
    assert coupon_rows(dbsession)["coupons"] == 1


def test_forged_and_hostile_forms_change_nothing(admin_pages, launch, dbsession, catalogue):
    admin_pages.post("/admin/coupons/new", {"code": "FORGED", "kind": "percent"}, status=403)
    admin_pages.post("/admin/coupons/LAUNCH20/pause", {}, status=403)
    admin_pages.post("/admin/coupons/LAUNCH20/pause", {"csrf_token": "forged"}, status=403)
    token = admin_pages.get("/admin/coupons/new").forms["coupon-form"]["csrf_token"].value
    hostile = {
        "csrf_token": token,
        "code": "HOSTILE",
        "kind": "percent",
        "percent_off": "10",
        "products": "not-a-product",
        "amount_off_XXX": "5",
        "reserved": "99",
    }
    page = admin_pages.post("/admin/coupons/new", hostile, status=422)
    assert "products" in errors_of(page)
    page = admin_pages.post(
        "/admin/coupons/new",
        {**hostile, "products": "themes", "description": "x" * 5000},
        status=422,
    )
    assert "description" in errors_of(page)
    page = admin_pages.post(
        "/admin/coupons/new", {**hostile, "products": "themes", "kind": "other"}, status=422
    )
    assert "kind" in errors_of(page)
    admin_pages.post("/admin/coupons/NOPE/pause", {"csrf_token": token}, status=404)
    assert coupon_rows(dbsession)["coupons"] == 1
    assert dbsession.scalar(select(Coupon.paused)) is False


def test_a_product_a_coupon_names_is_archived_not_deleted(admin_app, launch):
    answer = admin_app.delete("/api/admin/products/themes").json
    assert (answer["deleted"], answer["archived"]) == (False, True)
    assert admin_app.get("/api/admin/coupons/LAUNCH20").json["products"] == [
        "site-guard",
        "themes",
    ]
    # A product no coupon (and no order) names is still deleted.
    assert admin_app.delete("/api/admin/products/pixel-forge").json["deleted"] is True
