"""Hostile domains: license domain steering.

A runtime reports its site URL; a customer who wants a free staging/local seat for a
public shop may dress the URL up so that a lax parser sees ``localhost`` while every
browser goes to the public host. The server must read a URL exactly as a browser's
WHATWG URL parser does, refuse credentials in it, and class numeric hosts by the
address they really are.
"""

# ruff: noqa: F811 - the fixtures of test_licensing are imported by name

from __future__ import annotations

import pytest
from helpers.licensing import call_body, make_license, post, runtime

from cmsshop.services.licensing.domains import (
    InvalidDomain,
    classify_environment,
    normalise_domain,
)

# (what the runtime sends, the host a browser goes to, its environment)
BROWSER_HOSTS = [
    ("http://shop.com\\@localhost", "shop.com", "production"),
    ("https://shop.com\\@127.0.0.1/wp-admin", "shop.com", "production"),
    ("http://shop.com\\.localhost", "shop.com", "production"),
    ("134744072", "8.8.8.8", "production"),
    ("http://134744072/", "8.8.8.8", "production"),
    ("0x08080808", "8.8.8.8", "production"),
    ("8.526344", "8.8.8.8", "production"),  # two parts: the last fills 24 bits
    ("010.010.010.010", "8.8.8.8", "production"),  # octal parts
    ("0x7f.1", "127.0.0.1", "local"),
    ("2130706433", "127.0.0.1", "local"),
    ("http://2130706433:8080/", "127.0.0.1", "local"),
    ("0177.0.0.1", "127.0.0.1", "local"),
    ("127.1", "127.0.0.1", "local"),
    ("0x7F000001", "127.0.0.1", "local"),
    ("167772161", "10.0.0.1", "local"),
    ("127.0.0.1.", "127.0.0.1", "local"),  # a trailing dot is still the address
    ("[::1]", "::1", "local"),
    ("http://[0:0:0:0:0:0:0:1]/", "::1", "local"),
    ("http://[::ffff:8.8.8.8]/", "::ffff:808:808", "production"),
    ("SHOP.COM.", "shop.com", "production"),
    ("HTTPS://WWW.SHOP.COM/", "shop.com", "production"),
    ("http://%73hop.com/", "shop.com", "production"),
    ("http://%6c%6fcalhost/", "localhost", "local"),
    ("http://shop.com%2Elocalhost/", "shop.com.localhost", "local"),
]


@pytest.mark.parametrize(("raw", "host", "environment"), BROWSER_HOSTS)
def test_hosts_are_read_as_a_browser_reads_them(raw, host, environment):
    assert normalise_domain(raw) == host
    assert classify_environment(normalise_domain(raw)) == environment


CREDENTIALS = [
    "http://user:pw@localhost",
    "http://user@localhost/",
    "https://:pw@shop.com",
    "http://localhost@shop.com",
    "http://shop.com@localhost",
    "//user:pw@shop.com/",
    "user:pw@shop.com",
    "http://user%40x:pw@shop.com/",
]


@pytest.mark.parametrize("raw", CREDENTIALS)
def test_credentials_in_the_url_are_refused(raw):
    with pytest.raises(InvalidDomain):
        normalise_domain(raw)


NOT_HOSTS = [
    "http://1.2.3.4.5/",  # ends in a number but is no IPv4 address: invalid, not a name
    "4294967296",  # one past 255.255.255.255
    "0x100000000",
    "256.256.256.256",
    "1.2.3.09",  # 09 is not octal
    "9" * 40,  # an over-long number is no address either
    "http://[::1/",
    "http://[1.2.3.4]/",
    "http://shop.com:65536/",
    "javascript:alert(1)",
    "mailto:shop@shop.com",
    "http://sh%00op.com/",
]


@pytest.mark.parametrize("raw", NOT_HOSTS)
def test_invalid_numeric_and_odd_hosts_are_refused(raw):
    with pytest.raises(InvalidDomain):
        normalise_domain(raw)


# --- through the real app --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "host", "environment"),
    [
        ("http://shop.com\\@localhost", "shop.com", "production"),
        ("134744072", "8.8.8.8", "production"),
        ("0x7f.1", "127.0.0.1", "local"),
        ("http://[::1]:8080/", "::1", "local"),
    ],
)
def test_activation_is_classed_by_the_real_host(client, license, raw, host, environment):
    data = post(client, "activate", call_body(license, domain=raw), 201).json
    assert data["activation"]["domain"] == host
    assert data["activation"]["environment"] == environment


def test_steering_to_local_does_not_dodge_the_paid_seat(make_lic_app, dbsession, product):
    license = make_license(dbsession, product, max_activations=1)
    client = runtime(make_lic_app())
    post(client, "activate", call_body(license, domain="https://shop.com"), 201)
    for i, raw in enumerate(["http://other.com\\@localhost", "134744072"]):
        body = call_body(license, domain=raw, fingerprint=f"steer-{i:04d}")
        response = post(client, "activate", body, 409)
        assert response.json["code"] == "activation_limit_reached"


@pytest.mark.parametrize("raw", ["http://user:pw@localhost", "http://shop.com@localhost/"])
@pytest.mark.parametrize("form", [False, True])
def test_credentials_are_422_on_every_call(client, license, raw, form):
    for action in ("activate", "validate", "deactivate"):
        response = post(client, action, call_body(license, domain=raw), 422, form=form)
        assert response.json["code"] == "validation_failed"
        assert "domain" in response.json["errors"]
