"""The customer sees until when a deactivated offline installation keeps its seat: in
the JSON list of the license's seats and on the account's licenses page."""

from __future__ import annotations

import datetime as dt

from helpers.account_data import activate
from helpers.licensing import offline_activation_path, offline_runtime
from helpers.purchases import openapi_validator
from sqlalchemy import select, update

from cmsshop.models import Activation

OFFLINE_DOMAIN = "intranet.example.com"


def test_the_held_seat_and_its_end_are_shown(
    app, testapp, customer_app, account, tmp_path, dbsession
):
    key = account.license.key
    pinned = testapp.get("/api/license/jwks.json").json
    code = offline_runtime(account, pinned, tmp_path).offline_request_code()
    lease_file = customer_app.post_json(offline_activation_path(key), {"requestCode": code}).json
    activate(app, key, "shop.example.com", "install-shop-01")
    dbsession.rollback()
    offline_id = dbsession.scalar(select(Activation.id).where(Activation.domain == OFFLINE_DOMAIN))
    customer_app.post_json(f"/api/dashboard/licenses/{key}/activations/{offline_id}/deactivate", {})

    listed = customer_app.get(f"/api/dashboard/licenses/{key}/activations").json
    assert listed["total"] == 2
    held = next(item for item in listed["items"] if item["id"] == offline_id)
    assert held["active"] is False and held["seatHeldUntil"] == lease_file["expiresAt"]
    openapi_validator(
        customer_app, "/api/dashboard/licenses/{key}/activations", "get", "200"
    ).validate(listed)

    page = customer_app.get("/account/licenses")
    ends = dt.datetime.fromisoformat(lease_file["expiresAt"].replace("Z", "+00:00"))
    assert f"keeps the seat until {ends:%Y-%m-%d %H:%M} UTC" in page.text
    assert "Seats used</dt><dd>2 of 3" in page.text
    assert f"/activations/{offline_id}/deactivate" not in page.text  # nothing left to free

    # Once the lease's time has passed (as the row says), the seat is free and gone
    # from both.
    dbsession.rollback()
    dbsession.execute(
        update(Activation)
        .where(Activation.id == offline_id)
        .values(seat_held_until=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1))
    )
    dbsession.commit()
    assert customer_app.get(f"/api/dashboard/licenses/{key}/activations").json["total"] == 1
    assert "keeps the seat until" not in customer_app.get("/account/licenses").text
