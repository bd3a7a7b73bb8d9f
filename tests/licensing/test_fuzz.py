"""Schemathesis on the licensing routes alone (JSON and form bodies): every odd input is
a documented 4xx with the JSON error body, never a 5xx. And Hypothesis on the request
parser's fast path: it accepts nothing the schema refuses and reads what it accepts as
the schema does."""

from __future__ import annotations

import pytest
import schemathesis
from helpers.fuzzing import run_strategy
from hypothesis import given, settings
from hypothesis import strategies as st
from schemathesis.generation.modes import GenerationMode


@pytest.fixture
def licensing_operations(make_app, tmp_path):
    app = make_app(**{"cmsshop.license_key_dir": str(tmp_path / "keys")})
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", app)
    schema = schema.include(path_regex="^/api/license/")
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize("media_type", ["application/json", "application/x-www-form-urlencoded"])
def test_licensing_fuzz(licensing_operations, mode, media_type):
    assert len(licensing_operations) == 5  # activate, validate, deactivate, update-check, jwks
    for operation in licensing_operations:
        kwargs = {}
        if operation.method.upper() == "POST":
            kwargs["media_type"] = media_type
        elif mode == GenerationMode.NEGATIVE:
            continue  # GET jwks.json has no input to break

        run_strategy(operation.as_strategy(mode, **kwargs))


# --- the well-formed fast path agrees with the schema --------------------------------------

VALID = {
    "product": "site-guard",
    "licenseKey": "ABCDE-FGHIJ",
    "domain": "shop.example.com",
    "fingerprint": "install-0001",
    "nonce": "abc_DEF-0123456789",
}
# Values at and around every rule's edge, per field.
EDGES = {
    "product": ["", "x", "x" * 100, "x" * 101, "a\x00b", "\ud800x"],
    "licenseKey": ["", " ", " abcde-fghij ", "K" * 64, "K" * 65, " " + "K" * 64 + " ", "K\x00"],
    "domain": [
        "",
        ".",
        "https://www.Shop.Example.com:8443/path",
        "127.0.0.1.",
        "[::1]",
        "bücher.example",
        "xn--bcher-kva.example",
        "xn--zz.example",
        "user:pw@host.example",
        "a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 61,
        "a" * 300,
        "exa mple.com",
    ],
    "fingerprint": ["f" * 7, "f" * 8, "f" * 256, "f" * 257, "tab\there12", "\x00abcdefgh"],
    "nonce": ["n" * 15, "n" * 16, "n" * 128, "n" * 129, "abc$defghijklmnop", "n" * 16 + "\n"],
}
ODD = st.one_of(st.none(), st.integers(), st.booleans(), st.lists(st.text(), max_size=2))


@st.composite
def license_requests(draw):
    """A valid request with one to three fields changed: to an edge value, to random
    text or to a non-string; sometimes a field dropped or one added."""
    data = dict(VALID)
    for name in draw(st.lists(st.sampled_from(sorted(VALID)), min_size=1, max_size=3)):
        data[name] = draw(st.one_of(st.sampled_from(EDGES[name]), st.text(), ODD))
    shape = draw(st.sampled_from(["same", "same", "same", "drop", "extra"]))
    if shape == "drop":
        del data[draw(st.sampled_from(sorted(VALID)))]
    elif shape == "extra":
        data["extra"] = draw(st.text())
    return data


@settings(max_examples=1500, deadline=None)
@given(license_requests())
def test_the_fast_path_takes_a_license_request_as_the_schema_does(data):
    import colander

    from cmsshop.views.licensing.api import LicenseRequestSchema, well_formed_license_request

    quick = well_formed_license_request(data)
    try:
        values = LicenseRequestSchema().deserialize(data)
    except colander.Invalid:
        assert quick is None, data
        return
    if quick is not None:  # None: left to the schema, which is always right
        assert (
            quick.product,
            quick.license_key,
            quick.domain,
            quick.fingerprint,
            quick.nonce,
        ) == tuple(values[k] for k in ("product", "licenseKey", "domain", "fingerprint", "nonce"))


def test_the_fast_path_takes_the_usual_request():
    from cmsshop.views.licensing.api import well_formed_license_request

    data = {
        "product": "site-guard",
        "licenseKey": " abcde-fghij ",
        "domain": "https://www.Shop.Example.com/",
        "fingerprint": "install-0001",
        "nonce": "abc_DEF-0123456789",
    }
    quick = well_formed_license_request(data)
    assert quick is not None
    assert (quick.license_key, quick.domain) == ("ABCDE-FGHIJ", "shop.example.com")
