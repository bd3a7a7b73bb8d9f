"""Versions compare as versions by the product's scheme (PEP 440 or semver), never as
strings: the orderings the update check depends on."""

from __future__ import annotations

import pytest

from cmsshop.services.store.versions import BadVersion, is_version, parse_version

PEP440_ASCENDING = [
    "0.9",
    "1.0.dev1",
    "1.0a1",
    "1.0b2",
    "1.0rc1",
    "1.0",
    "1.0+local.7",
    "1.0.post1",
    "1.1rc1",
    "1.1",
    "1.9",
    "1.10",
    "2.0",
    "1!0.1",  # an epoch beats any version without one
]
SEMVER_ASCENDING = [
    "0.9.0",
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
    "1.9.0",
    "1.10.0",
    "2.0.0",
]


@pytest.mark.parametrize(
    ("scheme", "ascending"), [("pep440", PEP440_ASCENDING), ("semver", SEMVER_ASCENDING)]
)
def test_versions_sort_by_precedence_not_as_strings(scheme, ascending):
    keys = [parse_version(scheme, v) for v in ascending]
    assert all(a < b for a, b in zip(keys, keys[1:], strict=False))
    shuffled = list(reversed(ascending))
    assert sorted(shuffled, key=lambda v: parse_version(scheme, v)) == ascending
    assert sorted(ascending) != ascending  # string order would be wrong


def test_equal_versions():
    assert parse_version("pep440", "1.0") == parse_version("pep440", "1.0.0")
    assert parse_version("pep440", "1.0") == parse_version("pep440", "v1.0")
    assert parse_version("semver", "1.0.0+build.1") == parse_version("semver", "1.0.0+build.2")
    assert parse_version("semver", "1.0.0") != parse_version("semver", "1.0.0-rc.1")


@pytest.mark.parametrize(
    ("scheme", "text"),
    [
        ("semver", "1.0"),
        ("semver", "01.0.0"),
        ("semver", "1.0.0-"),
        ("semver", "v1.0.0"),
        ("semver", ""),
        ("pep440", "1.0-banana"),
        ("pep440", "latest"),
        ("pep440", ""),
        ("pep440", "1..0"),
    ],
)
def test_what_is_not_a_version_of_the_scheme(scheme, text):
    assert not is_version(scheme, text)
    with pytest.raises(BadVersion):
        parse_version(scheme, text)
