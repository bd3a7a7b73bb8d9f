"""A hostile or slow remote signer.

A per-read timeout is no deadline: a signer that sends a byte now and then keeps a
request (and whatever it holds) for as long as it likes. The remote signer must give up
at a total deadline, and no call may hold the license's row lock (PostgreSQL) or the
database write lock (SQLite) while it waits for the signer: other installations of the
same license would queue behind a slow network call. Seat limits must still hold.
"""

# ruff: noqa: F811 - the fixtures of test_licensing are imported by name

from __future__ import annotations

import threading
import time

import pytest
from fakes.vault import VAULT_TOKEN, fake_vault, remote_settings
from helpers.app import serve
from helpers.licensing import call_body, count, http_post, make_license, post, race, runtime
from sqlalchemy import select

from cmsshop.models import Activation, LicenseAuditEntry, LicenseNonce
from cmsshop.services.licensing.records import fingerprint_hash
from cmsshop.services.licensing.signing import RemoteSigner, SigningUnavailable, load_public_key

DEADLINE = 1.5
SLACK = 1.5  # scheduling on a busy 2-core machine
SLOW = 2.5  # the slow signer's latency in the lock tests
NOT_BLOCKED = 1.2  # well under SLOW: the call did not wait for the slow signer


def slow_settings(vault, **extra) -> dict:
    return remote_settings(
        vault,
        **{
            "cmsshop.license_remote_timeout": "5",
            "cmsshop.license_remote_deadline": "10",
            **extra,
        },
    )


# --- the deadline ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["drip-body", "drip-headers", "silent"])
def test_remote_signer_gives_up_at_the_deadline(mode):
    with fake_vault(mode) as vault:
        signer = RemoteSigner(
            vault.url,
            [load_public_key(vault.public_key_b64)],
            token=VAULT_TOKEN,
            timeout=1.0,  # each byte comes well within this
            deadline=DEADLINE,
        )
        started = time.monotonic()
        with pytest.raises(SigningUnavailable):
            signer.sign({"fp": "x"})
        elapsed = time.monotonic() - started
    assert elapsed < DEADLINE + SLACK, elapsed
    if mode != "silent":  # silence is cut by the per-read timeout, a drip only by the deadline
        assert elapsed >= DEADLINE - 0.1, elapsed


def test_remote_signer_still_signs_when_it_is_merely_slow():
    with fake_vault() as vault:
        vault.delay = 0.5
        signer = RemoteSigner(
            vault.url,
            [load_public_key(vault.public_key_b64)],
            token=VAULT_TOKEN,
            timeout=1.0,
            deadline=DEADLINE,
        )
        assert signer.sign({"fp": "x"}).count(".") == 2


@pytest.mark.parametrize("mode", ["drip-body", "drip-headers"])
def test_a_dripping_signer_is_503_at_the_deadline_and_nothing_is_kept(
    make_lic_app, license, dbsession, mode
):
    with fake_vault() as vault:
        client = runtime(
            make_lic_app(
                **remote_settings(
                    vault,
                    **{
                        "cmsshop.license_remote_timeout": "1",
                        "cmsshop.license_remote_deadline": str(DEADLINE),
                    },
                )
            )
        )
        post(client, "activate", call_body(license), 201)
        vault.mode = mode
        for action, body in [
            ("validate", call_body(license)),
            ("activate", call_body(license, fingerprint="install-0002")),
            ("deactivate", call_body(license)),
        ]:
            started = time.monotonic()
            response = post(client, action, body, 503)
            elapsed = time.monotonic() - started
            assert response.json["code"] == "signing_unavailable"
            assert "Retry-After" in response.headers
            assert elapsed < DEADLINE + SLACK, (action, elapsed)
    assert count(dbsession, Activation) == 1
    activation = dbsession.scalar(select(Activation))
    assert activation.active and activation.last_validated_at is None
    assert count(dbsession, LicenseNonce) == 1
    outcomes = dbsession.scalars(select(LicenseAuditEntry.outcome)).all()
    assert outcomes.count("signing_unavailable") == 3


@pytest.mark.parametrize(
    ("value", "ok"), [("0", False), ("-1", False), ("61", False), ("0.5", False), ("3", True)]
)
def test_the_deadline_setting_is_checked(make_lic_app, value, ok):
    # the deadline must leave room for at least one read (timeout 1 s here)
    settings = {
        "cmsshop.license_remote_timeout": "1",
        "cmsshop.license_remote_deadline": value,
    }
    if ok:
        make_lic_app(**settings)
    else:
        with pytest.raises(Exception, match="license_remote_deadline"):
            make_lic_app(**settings)


# --- no lock held across the signer call -----------------------------------------------------


def _timed_post(url: str, body: dict, into: dict, name: str) -> None:
    started = time.monotonic()
    into[name] = http_post(url, body)
    into[name + "_seconds"] = time.monotonic() - started


def slow_and_fast(base: str, slow: tuple[str, dict], fast: tuple[str, dict]) -> dict:
    """Start the ``slow`` call (action, body); once it waits for the signer, make the
    ``fast`` one. Each call's (status, body) and its seconds, by name."""
    results: dict = {}
    thread = threading.Thread(
        target=_timed_post, args=(f"{base}/api/license/{slow[0]}", slow[1], results, "slow")
    )
    thread.start()
    time.sleep(0.6)  # the slow call is now waiting for the signer
    _timed_post(f"{base}/api/license/{fast[0]}", fast[1], results, "fast")
    thread.join(timeout=30)
    return results


def slow_for(vault, fingerprint: str = "slow-install") -> None:
    vault.delay = SLOW
    vault.slow_fingerprints = {fingerprint_hash(fingerprint)}


@pytest.mark.parametrize("other", ["validate", "activate", "deactivate"])
def test_a_slow_activation_does_not_block_the_license(make_lic_app, dbsession, product, other):
    license = make_license(dbsession, product, max_activations=3)
    fingerprint = "other-install" if other == "activate" else "install-0001"
    with fake_vault() as vault:
        slow_for(vault)
        with serve(make_lic_app(**slow_settings(vault))) as base:
            assert http_post(f"{base}/api/license/activate", call_body(license))[0] == 201
            results = slow_and_fast(
                base,
                ("activate", call_body(license, fingerprint="slow-install")),
                (other, call_body(license, fingerprint=fingerprint)),
            )
    assert results["fast"][0] in (200, 201), results
    assert results["fast_seconds"] < NOT_BLOCKED, results
    assert results["slow"][0] == 201, results
    assert results["slow_seconds"] >= SLOW


@pytest.mark.parametrize("slow_action", ["validate", "deactivate"])
def test_a_slow_validate_or_deactivate_does_not_block_an_activation(
    make_lic_app, dbsession, product, slow_action
):
    license = make_license(dbsession, product, max_activations=3)
    with fake_vault() as vault, serve(make_lic_app(**slow_settings(vault))) as base:
        body = call_body(license, fingerprint="slow-install")
        assert http_post(f"{base}/api/license/activate", body)[0] == 201
        slow_for(vault)
        results = slow_and_fast(
            base,
            (slow_action, call_body(license, fingerprint="slow-install")),
            ("activate", call_body(license, fingerprint="fast-install")),
        )
    assert results["fast"][0] == 201 and results["fast_seconds"] < NOT_BLOCKED, results
    assert results["slow"][0] == 200, results


def test_the_last_seat_goes_to_the_first_to_commit_not_the_first_to_ask(
    make_lic_app, dbsession, product
):
    """A slow activation signed for a seat that a faster one took meanwhile: the slow
    one finds out when it commits and answers 409, and no second seat is used."""
    license = make_license(dbsession, product, max_activations=1)
    with fake_vault() as vault:
        slow_for(vault)
        with serve(make_lic_app(**slow_settings(vault))) as base:
            results = slow_and_fast(
                base,
                ("activate", call_body(license, fingerprint="slow-install")),
                ("activate", call_body(license, fingerprint="fast-install")),
            )
    assert results["fast"][0] == 201 and results["fast_seconds"] < NOT_BLOCKED, results
    status, body = results["slow"]
    assert status == 409 and body["code"] == "activation_limit_reached", results
    assert count(dbsession, Activation, Activation.active.is_(True)) == 1


@pytest.mark.parametrize("max_activations", [1, 2])
def test_seat_limits_hold_when_every_racer_waits_for_the_signer(
    make_lic_app, dbsession, product, max_activations
):
    license = make_license(dbsession, product, max_activations=max_activations)
    with fake_vault() as vault:
        vault.delay = 0.4
        app = make_lic_app(**slow_settings(vault))
        bodies = [call_body(license, fingerprint=f"racer-{i:04d}") for i in range(5)]
        with serve(app) as base:
            results = race(f"{base}/api/license/activate", bodies)
    statuses = sorted(status for status, _ in results)
    assert statuses == [201] * max_activations + [409] * (5 - max_activations), results
    assert count(dbsession, Activation, Activation.active.is_(True)) == max_activations
    leases = {body["activation"]["id"] for status, body in results if status == 201}
    assert len(leases) == max_activations


def test_reinstalls_racing_through_a_slow_signer_share_one_activation(
    make_lic_app, dbsession, product
):
    license = make_license(dbsession, product, max_activations=1)
    with fake_vault() as vault:
        vault.delay = 0.4
        app = make_lic_app(**slow_settings(vault))
        with serve(app) as base:
            results = race(f"{base}/api/license/activate", [call_body(license) for _ in range(4)])
    assert sorted(status for status, _ in results) == [200, 200, 200, 201], results
    assert len({body["activation"]["id"] for _, body in results}) == 1
    assert count(dbsession, Activation) == 1
