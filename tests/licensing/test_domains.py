"""Domain normalisation and the production / staging / local decision."""

from __future__ import annotations

import pytest

from cmsshop.services.licensing.domains import (
    InvalidDomain,
    SeatRules,
    classify_environment,
    normalise_domain,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("example.com", "example.com"),
        ("Example.COM", "example.com"),
        ("https://www.Shop.example.com:8443/wp-admin/?page=1#x", "shop.example.com"),
        ("www.shop.com", "shop.com"),
        ("shop.com.", "shop.com"),
        ("  shop.com  ", "shop.com"),
        ("//shop.com/path", "shop.com"),
        ("bücher.de", "xn--bcher-kva.de"),
        ("https://BÜCHER.de/", "xn--bcher-kva.de"),
        ("ＥＸＡＭＰＬＥ.com", "example.com"),  # full-width letters map to ASCII (UTS 46)
        ("www.com", "www.com"),  # www is only folded off a longer name
        ("http://[::1]:8080/", "::1"),
        ("::1", "::1"),
        ("http://127.0.0.1:8000", "127.0.0.1"),
        ("localhost:3000", "localhost"),
    ],
)
def test_normalise_domain(raw, expected):
    assert normalise_domain(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        "http://",
        "a b.com",
        "shop.com\nevil.com",
        "exa_mple.com",
        "-shop.com",
        "shop-.com",
        "http://shop.com:99999/",
        "a" * 64 + ".com",
        ".",
        "..",
        "x" * 3000,
        "http://[::1",
        # credentials are refused (see tests/licensing/test_hostile_domains.py)
        "http://user:secret@shop.com/",
    ],
)
def test_invalid_domains_are_refused(raw):
    with pytest.raises(InvalidDomain):
        normalise_domain(raw)


@pytest.mark.parametrize(
    ("raw", "environment"),
    [
        ("shop.com", "production"),
        ("my-site.dev", "production"),  # .dev is a public TLD
        ("staging.my-site.dev", "staging"),
        ("stage.shop.com", "staging"),
        ("www.staging.shop.com", "staging"),
        ("staging.com", "production"),  # the prefix names a subdomain, not the site
        ("stagecoach.com", "production"),
        ("localhost", "local"),
        ("shop.localhost", "local"),
        ("shop.test", "local"),
        ("shop.example", "local"),
        ("shop.invalid", "local"),
        ("printer.local", "local"),
        ("nas.home.arpa", "local"),
        ("intranet", "local"),
        ("127.0.0.1", "local"),
        ("10.1.2.3", "local"),
        ("192.168.0.10", "local"),
        ("172.16.5.4", "local"),
        ("::1", "local"),
        ("fd00::1", "local"),
        ("8.8.8.8", "production"),
        ("2001:4860:4860::8888", "production"),
    ],
)
def test_classify_environment(raw, environment):
    assert classify_environment(normalise_domain(raw)) == environment


def test_configurable_prefixes_and_suffixes():
    rules = SeatRules.from_lists(["dev.", " "], [".kinsta.cloud"])
    assert classify_environment("dev.shop.com", rules) == "staging"
    assert classify_environment("staging.shop.com", rules) == "production"  # not configured
    assert classify_environment("shop-abc.kinsta.cloud", rules) == "staging"
    assert classify_environment("kinsta.cloud", rules) == "production"
