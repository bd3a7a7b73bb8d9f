"""Product.max_quantity, the most one order may buy: set through the admin JSON API and the
console's product form (null/blank = the default), refused when out of range or of the
wrong type, and shown publicly as the limit checkout applies (100 seat packs of a licensed
product, 1 of anything else, unless the seller set one)."""

from __future__ import annotations

import pytest
from helpers.html import errors_of
from helpers.purchases import openapi_validator
from helpers.store import create_published
from sqlalchemy import select

from cmsshop.models import Product

ADMIN_PRODUCTS = "/api/admin/products"
BAD_VALUES = [0, -1, 10_001, 10**30, "5", 2.5, 5.0, True, False, [5], {"n": 5}]


def stored(dbsession, slug: str) -> int | None:
    dbsession.rollback()
    dbsession.expire_all()
    return dbsession.scalar(select(Product.max_quantity).where(Product.slug == slug))


def new_body(**licensing) -> dict:
    return {
        "slug": "seat-pack",
        "name": "Seat Pack",
        "published": False,
        "licensing": {"licensed": True, "maxActivations": 5, **licensing},
        "prices": [{"currency": "EUR", "amount": 900}],
    }


def assert_valid(validator, body) -> None:
    errors = [error.message for error in validator.iter_errors(body)]
    assert not errors, errors


# --- admin JSON API ----------------------------------------------------------------------


def test_create_with_a_limit_shows_it_to_admin_and_public(admin_app, testapp, catalogue, dbsession):
    # Published the way a seller must: created, given a release, then published.
    response = create_published(admin_app, dbsession, new_body(maxQuantity=5))
    assert response.json["licensing"]["maxQuantity"] == 5
    assert_valid(openapi_validator(admin_app, ADMIN_PRODUCTS, "post", "201"), response.json)
    assert stored(dbsession, "seat-pack") == 5
    public = testapp.get("/api/store/products/seat-pack").json
    assert public["licensing"]["maxQuantity"] == 5
    assert_valid(openapi_validator(testapp, "/api/store/products/{slug}", "get", "200"), public)


@pytest.mark.parametrize("value", [1, 10_000])
def test_the_bounds_are_accepted(admin_app, catalogue, dbsession, value):
    admin_app.post_json(ADMIN_PRODUCTS, new_body(maxQuantity=value), status=201)
    assert stored(dbsession, "seat-pack") == value


def test_create_without_a_limit_stores_null(admin_app, testapp, catalogue, dbsession):
    body = create_published(admin_app, dbsession, new_body()).json
    assert body["licensing"]["maxQuantity"] is None
    assert_valid(openapi_validator(admin_app, ADMIN_PRODUCTS, "post", "201"), body)
    assert stored(dbsession, "seat-pack") is None
    assert testapp.get("/api/store/products/seat-pack").json["licensing"]["maxQuantity"] == 100


def test_patch_sets_and_clears_the_limit_and_nothing_else(admin_app, catalogue, dbsession):
    url = f"{ADMIN_PRODUCTS}/site-guard"
    before = admin_app.get(url).json["licensing"]
    body = admin_app.patch_json(url, {"licensing": {"maxQuantity": 7}}).json
    assert body["licensing"] == {**before, "maxQuantity": 7}
    assert_valid(openapi_validator(admin_app, f"{ADMIN_PRODUCTS}/{{slug}}", "patch", "200"), body)
    assert stored(dbsession, "site-guard") == 7
    # A PATCH of another licensing field keeps the limit.
    body = admin_app.patch_json(url, {"licensing": {"maxActivations": 4}}).json
    assert body["licensing"]["maxQuantity"] == 7
    body = admin_app.patch_json(url, {"licensing": {"maxQuantity": None}}).json
    assert body["licensing"] == {**before, "maxActivations": 4, "maxQuantity": None}
    assert_valid(openapi_validator(admin_app, f"{ADMIN_PRODUCTS}/{{slug}}", "get", "200"), body)
    assert stored(dbsession, "site-guard") is None


@pytest.mark.parametrize("value", BAD_VALUES)
def test_bad_limits_are_422_on_create_and_nothing_is_made(admin_app, catalogue, value):
    response = admin_app.post_json(ADMIN_PRODUCTS, new_body(maxQuantity=value), status=422)
    assert response.json["code"] == "validation_failed"
    assert "licensing.maxQuantity" in response.json["errors"], response.json["errors"]
    admin_app.get(f"{ADMIN_PRODUCTS}/seat-pack", status=404)


@pytest.mark.parametrize("value", BAD_VALUES)
def test_bad_limits_are_422_on_patch_and_nothing_changes(admin_app, catalogue, dbsession, value):
    url = f"{ADMIN_PRODUCTS}/site-guard"
    admin_app.patch_json(url, {"licensing": {"maxQuantity": 3}})
    response = admin_app.patch_json(
        url, {"name": "Renamed", "licensing": {"maxQuantity": value}}, status=422
    )
    assert "licensing.maxQuantity" in response.json["errors"], response.json["errors"]
    assert stored(dbsession, "site-guard") == 3
    assert admin_app.get(url).json["name"] == "SiteGuard"


# --- public catalogue --------------------------------------------------------------------


def test_public_json_shows_the_effective_limit(admin_app, testapp, catalogue):
    # site-guard is licensed, themes is not; neither has a limit set.
    def limits() -> dict[str, int]:
        items = testapp.get("/api/store/products").json["items"]
        return {item["slug"]: item["licensing"]["maxQuantity"] for item in items}

    assert limits() == {"pixel-forge": 100, "site-guard": 100, "themes": 1}
    admin_app.patch_json(f"{ADMIN_PRODUCTS}/themes", {"licensing": {"maxQuantity": 3}})
    admin_app.patch_json(f"{ADMIN_PRODUCTS}/site-guard", {"licensing": {"maxQuantity": 20}})
    assert limits() == {"pixel-forge": 100, "site-guard": 20, "themes": 3}
    listing = testapp.get("/api/store/products").json
    assert_valid(openapi_validator(testapp, "/api/store/products", "get", "200"), listing)
    # The admin listing shows what was stored.
    admin_items = admin_app.get(ADMIN_PRODUCTS).json["items"]
    assert {i["slug"]: i["licensing"]["maxQuantity"] for i in admin_items} == {
        "draft": None,
        "pixel-forge": None,
        "site-guard": 20,
        "themes": 3,
    }
    assert_valid(
        openapi_validator(admin_app, ADMIN_PRODUCTS, "get", "200"),
        admin_app.get(ADMIN_PRODUCTS).json,
    )


def test_the_public_schema_never_allows_a_null_limit(testapp, catalogue):
    body = testapp.get("/api/store/products/themes").json
    validator = openapi_validator(testapp, "/api/store/products/{slug}", "get", "200")
    assert_valid(validator, body)
    body["licensing"]["maxQuantity"] = None
    assert not validator.is_valid(body)


# --- console form ------------------------------------------------------------------------


def test_console_sets_shows_and_clears_the_limit(admin_pages, catalogue, dbsession):
    page = admin_pages.get("/admin/products/new")
    assert "Empty: 100 seat packs for a licensed product, 1 otherwise" in page.text
    form = page.forms["product-form"]
    assert form["max_quantity"].value == ""
    form["name"] = "Seat Pack"
    form["slug"] = "seat-pack"
    form["max_quantity"] = "4"
    form.submit(status=303)
    assert stored(dbsession, "seat-pack") == 4

    form = admin_pages.get("/admin/products/seat-pack/edit").forms["product-form"]
    assert form["max_quantity"].value == "4"
    form["max_quantity"] = " 10000 "
    form.submit(status=303)
    assert stored(dbsession, "seat-pack") == 10_000

    form = admin_pages.get("/admin/products/seat-pack/edit").forms["product-form"]
    form["max_quantity"] = ""
    form.submit(status=303)
    assert stored(dbsession, "seat-pack") is None


@pytest.mark.parametrize("typed", ["0", "-1", "10001", "5.5", "many", "true", "9" * 30])
def test_console_refuses_bad_limits_and_keeps_the_input(admin_pages, catalogue, dbsession, typed):
    form = admin_pages.get("/admin/products/site-guard/edit").forms["product-form"]
    form["name"] = "Renamed"
    form["max_quantity"] = typed
    response = form.submit(status=422)
    errors = errors_of(response)
    assert set(errors) == {"max_quantity"}, errors
    assert response.forms["product-form"]["max_quantity"].value == typed
    dbsession.rollback()
    dbsession.expire_all()
    product = dbsession.scalar(select(Product).where(Product.slug == "site-guard"))
    assert product.max_quantity is None and product.name == "SiteGuard"


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("0", "0 is less than minimum value 1"),
        ("10001", "10001 is greater than maximum value 10000"),
        ("2.5", "must be an integer"),
    ],
)
def test_console_errors_say_what_is_wrong(admin_pages, catalogue, typed, message):
    form = admin_pages.get("/admin/products/new").forms["product-form"]
    form["name"] = "Seat Pack"
    form["slug"] = "seat-pack"
    form["max_quantity"] = typed
    assert errors_of(form.submit(status=422))["max_quantity"] == message
