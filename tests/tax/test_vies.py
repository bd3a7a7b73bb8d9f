"""The VAT ID checker: offline only by default, VIES's REST API when configured (a fake
VIES on loopback), and every outage an answer, never an exception."""

from __future__ import annotations

import time

import pytest
from fakes.stripe_api import closed_port_url
from pyramid.exceptions import ConfigurationError
from pyramid.scripting import prepare

from cmsshop.services.tax.vies import (
    FORMAT_VALID,
    VIES_INVALID,
    VIES_UNAVAILABLE,
    VIES_VALID,
    FormatOnlyChecker,
    IVatIdChecker,
    ViesRestChecker,
    make_vat_id_checker,
)


def checker_for(fake, timeout: float = 2.0) -> ViesRestChecker:
    return make_vat_id_checker(
        {"cmsshop.tax.vies_url": fake.url + "/", "cmsshop.tax.vies_timeout": timeout}
    )


def test_without_a_vies_url_a_format_valid_number_stays_format_valid():
    checker = make_vat_id_checker({"cmsshop.tax.vies_url": "", "cmsshop.tax.vies_timeout": 5})
    assert isinstance(checker, FormatOnlyChecker)
    assert IVatIdChecker.providedBy(checker)
    assert checker.check("DE136695976").check == FORMAT_VALID


def test_a_registered_number_is_vies_valid_with_the_traders_details(fake_vies):
    fake_vies.register("DE136695976", "Example GmbH", "Hauptstr. 1\n10115 Berlin")
    checker = checker_for(fake_vies)
    assert IVatIdChecker.providedBy(checker)
    verdict = checker.check("DE136695976")
    assert verdict.check == VIES_VALID
    assert (verdict.name, verdict.address) == ("Example GmbH", "Hauptstr. 1\n10115 Berlin")
    assert verdict.request_identifier.startswith("WAPI")
    assert fake_vies.requests == [{"countryCode": "DE", "vatNumber": "136695976"}]


def test_greece_is_asked_for_as_el(fake_vies):
    fake_vies.register("EL094259216")
    assert checker_for(fake_vies).check("EL094259216").check == VIES_VALID
    assert fake_vies.requests[0]["countryCode"] == "EL"


def test_an_unregistered_number_is_vies_invalid(fake_vies):
    verdict = checker_for(fake_vies).check("FR40303265045")
    assert verdict.check == VIES_INVALID
    assert verdict.refused
    assert "not registered" in verdict.message
    assert verdict.name is None


@pytest.mark.parametrize(
    "outage", ["MS_UNAVAILABLE", "TIMEOUT", "MS_MAX_CONCURRENT_REQ", "SERVICE_UNAVAILABLE"]
)
def test_a_member_state_outage_is_unavailable_not_invalid(fake_vies, outage):
    fake_vies.register("DE136695976")
    fake_vies.outage = outage
    verdict = checker_for(fake_vies).check("DE136695976")
    assert verdict.check == VIES_UNAVAILABLE
    assert not verdict.refused
    assert "reviewed" in verdict.message


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_server_error_is_unavailable(fake_vies, status):
    fake_vies.outage = status
    assert checker_for(fake_vies).check("DE136695976").check == VIES_UNAVAILABLE


def test_an_answer_that_is_not_vies_json_is_unavailable(fake_vies):
    checker = ViesRestChecker(fake_vies.url + "/no-such-path", 2.0)
    assert checker.check("DE136695976").check == VIES_UNAVAILABLE


def test_a_refused_connection_is_unavailable():
    checker = ViesRestChecker(closed_port_url(), 2.0)
    assert checker.check("DE136695976").check == VIES_UNAVAILABLE


def test_a_slow_vies_times_out_quickly_as_unavailable(fake_vies):
    fake_vies.register("DE136695976")
    fake_vies.delay = 3.0
    started = time.monotonic()
    verdict = checker_for(fake_vies, timeout=0.3).check("DE136695976")
    assert verdict.check == VIES_UNAVAILABLE
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"cmsshop.tax.vies_url": "ftp://vies.example"}, "cmsshop.tax.vies_url"),
        ({"cmsshop.tax.vies_url": "vies.example"}, "cmsshop.tax.vies_url"),
        ({"cmsshop.tax.vies_timeout": "0"}, "cmsshop.tax.vies_timeout"),
        ({"cmsshop.tax.vies_timeout": "soon"}, "cmsshop.tax.vies_timeout"),
    ],
)
def test_bad_vies_settings_stop_start_up(make_app, overrides, problem):
    with pytest.raises(ConfigurationError, match=problem):
        make_app(**overrides)


def test_the_app_registers_the_checker_the_setting_chooses(make_app, fake_vies):
    app = make_app(**{"cmsshop.tax.vies_url": fake_vies.url, "cmsshop.tax.vies_timeout": "1.5"})
    env = prepare(registry=app.registry)
    try:
        checker = env["request"].find_service(IVatIdChecker)
    finally:
        env["closer"]()
    assert isinstance(checker, ViesRestChecker)
    assert (checker.endpoint, checker.timeout) == (fake_vies.url + "/check-vat-number", 1.5)
