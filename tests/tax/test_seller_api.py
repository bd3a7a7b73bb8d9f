"""The seller's identity through the admin JSON API (GET/PUT /api/admin/settings/seller:
partial updates, the form's checks as 422 at each field, nothing saved on a refusal),
the invoice logo on the console's page (upload, refusal at the field, remove), and the
snapshot an invoice takes of it all when issued."""

from __future__ import annotations

import io

import pytest
from helpers.clients import logged_in
from helpers.html import errors_of
from helpers.tax import SELLER_DE_FIELDS
from PIL import Image
from sqlalchemy import select

from cmsshop.models import ShopFile, ShopSetting
from cmsshop.services.tax.invoice_pdf import freeze_seller

# The German seller's identity, its tax ID typed with spaces (saved without them).
IDENTITY = {**SELLER_DE_FIELDS, "taxId": "DE 136 695 976"}


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (32, 16), (10, 90, 200)).save(out, "PNG")
    return out.getvalue()


def saved(dbsession) -> dict:
    dbsession.commit()  # ends the read snapshot (SQLite WAL)
    return {row.key: row.value for row in dbsession.scalars(select(ShopSetting))}


def test_only_an_admin_reads_or_writes_it(testapp, customer_app):
    testapp.get("/api/admin/settings/seller", status=401)
    customer_app.get("/api/admin/settings/seller", status=403)
    customer_app.put_json("/api/admin/settings/seller", {"city": "Paris"}, status=403)


def test_get_names_what_a_legal_invoice_still_misses(admin_app):
    body = admin_app.get("/api/admin/settings/seller").json
    assert body["missing"] == ["legalName", "address", "postalCode", "city", "country", "taxId"]
    assert body["legalName"] == "" and body["logoUrl"] is None
    assert body["sources"]["legalName"] == "ini" and body["taxEnabled"] is False


def test_put_is_partial_normalises_and_saves(admin_app, dbsession):
    body = admin_app.put_json("/api/admin/settings/seller", IDENTITY).json
    assert body["missing"] == [] and body["taxId"] == "DE136695976"
    assert body["sources"]["city"] == "saved"
    # A later PUT of one field keeps the others.
    body = admin_app.put_json(
        "/api/admin/settings/seller", {"invoiceFooter": "Amtsgericht Berlin HRB 1"}
    ).json
    assert body["legalName"] == "Example Software GmbH"
    assert body["invoiceFooter"] == "Amtsgericht Berlin HRB 1"
    rows = saved(dbsession)
    assert rows["seller.taxId"] == "DE136695976" and rows["seller.city"] == "Berlin"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**IDENTITY, "taxId": "DE136695975"}, "taxId"),  # a wrong check digit
        ({**IDENTITY, "country": "XX"}, "country"),
        ({**IDENTITY, "legalName": "x" * 201}, "legalName"),
        ({**IDENTITY, "city": "Berlin\nMitte"}, "city"),
        ({**IDENTITY, "taxEnabled": "yes"}, "taxEnabled"),
        ({**IDENTITY, "registrations": "GB"}, "registrations"),
        ({**IDENTITY, "postalCode": 10115}, "postalCode"),
        ({**IDENTITY, "colour": "red"}, "colour"),
    ],
)
def test_a_refused_put_is_422_at_the_field_and_saves_nothing(admin_app, dbsession, body, field):
    error = admin_app.put_json("/api/admin/settings/seller", body, status=422).json
    assert error["code"] == "validation_failed" and field in error["errors"]
    assert saved(dbsession) == {}


def test_a_non_eu_seller_gives_its_tax_id_as_text(admin_app):
    body = admin_app.put_json(
        "/api/admin/settings/seller",
        {**IDENTITY, "country": "US", "taxId": "EIN 12-3456789", "postalCode": "94105"},
    ).json
    assert body["taxId"] == "EIN 12-3456789" and body["missing"] == []


def test_the_console_uploads_and_removes_the_invoice_logo(app, admin, admin_app, dbsession):
    console = logged_in(app, admin)
    page = console.get("/admin/tax/settings")
    assert "No logo" in page.html.find(id="invoice-logo").find_parent("section").get_text()
    form = next(f for f in page.forms.values() if f.action.endswith("/admin/tax/settings/logo"))
    form["logo"] = ("logo.gif", b"GIF89a" + b"\x00" * 32, "image/gif")
    refused = form.submit(status=422)
    assert "only PNG and JPEG" in errors_of(refused)["logo"]
    dbsession.commit()
    assert dbsession.scalar(select(ShopFile)) is None

    form = next(f for f in page.forms.values() if f.action.endswith("/admin/tax/settings/logo"))
    form["logo"] = ("logo.jpg", png(), "image/jpeg")  # the bytes decide: a PNG
    done = form.submit(status=303)
    shown = done.follow()
    assert "The invoice logo is saved." in shown.text
    image = shown.html.find("img", class_="logo-preview")
    assert image["src"].endswith(".png")
    assert console.get(image["src"]).body == png()
    assert admin_app.get("/api/admin/settings/seller").json["logoUrl"] == image["src"]

    remove = next(
        f for f in shown.forms.values() if f.action.endswith("/admin/tax/settings/logo/remove")
    )
    gone = remove.submit(status=303).follow()
    assert "The invoice logo is removed." in gone.text
    assert gone.html.find("img", class_="logo-preview") is None
    console.get(image["src"], status=404)


def test_the_logo_forms_need_a_csrf_token(app, admin, dbsession):
    console = logged_in(app, admin)
    console.post("/admin/tax/settings/logo", upload_files=[("logo", "l.png", png())], status=403)
    console.post("/admin/tax/settings/logo/remove", status=403)
    dbsession.commit()
    assert dbsession.scalar(select(ShopFile)) is None


def test_an_invoice_freezes_the_identity_and_logo_of_the_moment(app, admin_app, dbsession):
    admin_app.put_json(
        "/api/admin/settings/seller", {**IDENTITY, "invoiceFooter": "HRB 1\nCEO: E. Muster"}
    )
    dbsession.commit()
    frozen = freeze_seller(dbsession, app.registry.settings)
    assert frozen == {
        **SELLER_DE_FIELDS,
        "taxId": "DE136695976",  # saved without the spaces it was typed with
        "invoiceFooter": "HRB 1\nCEO: E. Muster",
        "logoSha256": None,
    }
