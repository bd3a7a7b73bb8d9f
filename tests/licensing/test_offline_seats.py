"""An offline installation keeps its seat until its lease expires: its lease works
offline for that long whatever the shop records, so deactivating it (from the account,
or by its own runtime) must not free the seat for another installation before then."""

from __future__ import annotations

import datetime as dt

from helpers.account_data import RUNTIME_IP, activate, license_call
from helpers.licensing import (
    OFFLINE_FINGERPRINT,
    deactivate_path,
    offline_activation_path,
    offline_runtime,
    runtime,
)
from sqlalchemy import select, update

from cmsshop.models import Activation

OFFLINE_DOMAIN = "intranet.example.com"


def offline_activate(customer_app, testapp, account, state_dir, fingerprint=OFFLINE_FINGERPRINT):
    """Activate an installation offline through the account; its lease file."""
    pinned = testapp.get("/api/license/jwks.json").json
    code = offline_runtime(account, pinned, state_dir, fingerprint).offline_request_code()
    path = offline_activation_path(account.license.key)
    return customer_app.post_json(path, {"requestCode": code}, status=200).json


def offline_activation_id(dbsession) -> int:
    dbsession.rollback()  # a fresh snapshot
    return dbsession.scalar(select(Activation.id).where(Activation.domain == OFFLINE_DOMAIN))


def held_until(dbsession, activation_id: int) -> dt.datetime | None:
    dbsession.rollback()
    return dbsession.get(Activation, activation_id).seat_held_until


def let_the_lease_run_out(dbsession, activation_id: int) -> None:
    """The hold's time has passed, as the database row says (no clock is faked)."""
    dbsession.rollback()
    past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
    dbsession.execute(
        update(Activation).where(Activation.id == activation_id).values(seat_held_until=past)
    )
    dbsession.commit()


def test_a_deactivated_offline_installation_keeps_its_seat_until_its_lease_expires(
    app, testapp, customer_app, account, tmp_path, dbsession
):
    key = account.license.key  # site-guard: three production seats
    lease_file = offline_activate(customer_app, testapp, account, tmp_path)
    activate(app, key, "one.example.com", "install-online-01")
    activate(app, key, "two.example.com", "install-online-02")
    offline_id = offline_activation_id(dbsession)

    freed = customer_app.post_json(deactivate_path(key, offline_id), {}).json
    assert freed["outcome"] == "deactivated" and freed["activation"]["active"] is False
    assert freed["activationsUsed"] == 3  # the offline lease still works: still a seat
    assert freed["activation"]["seatHeldUntil"] == lease_file["expiresAt"]

    refused = license_call(
        runtime(app, RUNTIME_IP), "activate", key, "three.example.com", "install-online-03", 409
    ).json
    assert refused["code"] == "activation_limit_reached"
    assert (refused["activationsUsed"], refused["maxActivations"]) == (3, 3)
    pinned = testapp.get("/api/license/jwks.json").json
    code = offline_runtime(account, pinned, tmp_path, "airgapped-install-0002")
    another = customer_app.post_json(
        offline_activation_path(key), {"requestCode": code.offline_request_code()}, status=409
    )
    assert another.json["code"] == "activation_limit_reached"

    let_the_lease_run_out(dbsession, offline_id)
    activate(app, key, "three.example.com", "install-online-03")


def test_the_runtimes_own_deactivation_keeps_the_seat_too(
    app, testapp, customer_app, account, tmp_path, dbsession
):
    key = account.license.key
    offline_activate(customer_app, testapp, account, tmp_path)
    activate(app, key, "one.example.com", "install-online-01")
    activate(app, key, "two.example.com", "install-online-02")
    gone = license_call(
        runtime(app, RUNTIME_IP), "deactivate", key, OFFLINE_DOMAIN, OFFLINE_FINGERPRINT, 200
    ).json
    assert gone["license"]["activationsUsed"] == 3
    assert gone["activation"]["seatHeldUntil"] is not None
    license_call(
        runtime(app, RUNTIME_IP), "activate", key, "three.example.com", "install-online-03", 409
    )


def test_the_same_installation_comes_back_on_its_own_held_seat(
    app, testapp, customer_app, account, tmp_path, dbsession
):
    """The hold is the installation's own seat: activating it again takes no second one."""
    key = account.license.key
    first = offline_activate(customer_app, testapp, account, tmp_path)
    activate(app, key, "one.example.com", "install-online-01")
    activate(app, key, "two.example.com", "install-online-02")
    offline_id = offline_activation_id(dbsession)
    customer_app.post_json(deactivate_path(key, offline_id), {})

    again = offline_activate(customer_app, testapp, account, tmp_path)
    assert again["expiresAt"] >= first["expiresAt"]
    assert held_until(dbsession, offline_id) is not None
    dbsession.rollback()
    assert dbsession.get(Activation, offline_id).active is True


def test_online_installations_free_their_seat_at_once(app, customer_app, account, dbsession):
    key = account.license.key
    ids = [activate(app, key, f"s{n}.example.com", f"install-online-0{n}") for n in range(3)]
    freed = customer_app.post_json(deactivate_path(key, ids[0]), {}).json
    assert freed["activationsUsed"] == 2 and freed["activation"]["seatHeldUntil"] is None
    assert held_until(dbsession, ids[0]) is None
    activate(app, key, "s3.example.com", "install-online-03")
