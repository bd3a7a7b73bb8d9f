"""Fixtures of the licensing tests: an app whose signing keys the test owns, a
product runtime's client, a licensed product and its license."""

from __future__ import annotations

import pytest
from helpers.licensing import make_license, make_product, runtime


@pytest.fixture
def key_dir(tmp_path):
    return tmp_path / "keys"


@pytest.fixture
def make_lic_app(make_app, key_dir):
    def factory(**overrides):
        settings = {
            "cmsshop.license_key_dir": str(key_dir),
            "cmsshop.license_key_check_interval": "0",  # tests break keys mid-test
            **overrides,
        }
        return make_app(**settings)

    return factory


@pytest.fixture
def lic_app(make_lic_app):
    return make_lic_app()


@pytest.fixture
def client(lic_app):
    return runtime(lic_app)


@pytest.fixture
def product(dbsession):
    return make_product(dbsession, "site-guard-pro")


@pytest.fixture
def license(dbsession, product):
    return make_license(dbsession, product)
