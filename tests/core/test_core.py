"""Bootstrap, health, modules switched by configuration, settings and secrets."""

from __future__ import annotations

import pytest
from helpers.app import ROOT
from pyramid.exceptions import ConfigurationError

from cmsshop.config import configure
from cmsshop.modules import KNOWN_MODULES
from cmsshop.settings import DEVELOPMENT_SECRET, load_settings


def test_bootstrap_anonymous(testapp, dbsession):
    from cmsshop.models import Currency

    dbsession.add(Currency(code="EUR", name="Euro", symbol="€", decimals=2, is_default=True))
    dbsession.commit()
    body = testapp.get("/api/bootstrap").json
    assert body["siteName"] and body["baseUrl"] == "http://localhost"
    assert body["user"] is None and body["csrfToken"]
    assert body["defaultCurrency"] == "EUR"
    assert set(body["modules"]) == set(KNOWN_MODULES)


def test_bootstrap_logged_in(customer_app, customer):
    body = customer_app.get("/api/bootstrap").json
    assert body["user"]["email"] == customer.email
    assert body["csrfToken"] == customer_app.csrf_token


def test_health(testapp):
    assert testapp.get("/api/health").json == {"status": "ok", "database": "ok"}


def test_request_id_is_echoed_or_made(testapp):
    assert (
        testapp.get("/api/health", headers={"X-Request-ID": "abc-123"}).headers["X-Request-ID"]
        == "abc-123"
    )
    made = testapp.get("/api/health", headers={"X-Request-ID": "bad id with spaces"})
    assert made.headers["X-Request-ID"] != "bad id with spaces"
    assert len(made.headers["X-Request-ID"]) == 32


@pytest.mark.parametrize("name", sorted(KNOWN_MODULES))
def test_disabled_module_answers_404_under_every_prefix(make_app, name):
    from helpers.clients import new_client

    client = new_client(make_app(**{"cmsshop.modules": ""}))
    for prefix in KNOWN_MODULES[name]:
        for path in (prefix, prefix + "/", prefix + "/anything/below"):
            for method in ("get", "post", "delete"):
                response = getattr(client, method)(path, status=404)
                if not prefix.startswith("/api"):
                    # A web page of the module: a plain HTML 404 page (test_pages_core).
                    assert response.content_type == "text/html", path
                    assert name in response.html.h1.text
                    continue
                body = response.json
                assert body["code"] == "module_disabled", (path, body)
                assert name in body["title"]
                assert any("cmsshop.modules" in hint for hint in body["hints"])


def test_unknown_module_stops_start_up(settings):
    with pytest.raises(ConfigurationError, match="unknown module.*shop"):
        configure({**settings, "cmsshop.modules": "store shop"})


def test_environment_overrides_settings():
    result = load_settings(
        {"cmsshop.database_url": "sqlite:///a.sqlite", "cmsshop.secret": "x" * 40},
        environ={
            "CMSSHOP_DATABASE_URL": "postgresql+psycopg://db/shop",
            "CMSSHOP_SECRET": "y" * 40,
        },
    )
    assert result["cmsshop.database_url"] == "postgresql+psycopg://db/shop"
    assert result["cmsshop.secret"] == "y" * 40


@pytest.mark.parametrize("secret", ["", "change-me", DEVELOPMENT_SECRET, "short-secret"])
def test_production_refuses_missing_or_default_secret(secret):
    with pytest.raises(ConfigurationError, match="CMSSHOP_SECRET"):
        load_settings({"cmsshop.environment": "production", "cmsshop.secret": secret}, environ={})


def test_production_accepts_a_real_secret():
    settings = load_settings(
        {"cmsshop.environment": "production"}, environ={"CMSSHOP_SECRET": "k" * 48}
    )
    assert settings["cmsshop.secret"] == "k" * 48


def test_production_ini_refuses_to_start_without_secret(monkeypatch):
    import os

    from pyramid.paster import get_app

    monkeypatch.delenv("CMSSHOP_SECRET", raising=False)
    ini = os.path.join(ROOT, "production.ini")
    with pytest.raises(ConfigurationError, match="cmsshop.secret"):
        get_app(ini)


def test_bad_setting_value_fails_fast():
    with pytest.raises(ConfigurationError, match="cmsshop.max_body_bytes"):
        load_settings({"cmsshop.max_body_bytes": "lots"}, environ={})


def test_one_log_line_per_request_with_request_id_and_support_code(testapp, caplog):
    caplog.set_level("INFO", logger="cmsshop.request")
    response = testapp.get("/api/nope", status=404, headers={"X-Request-ID": "trace-7"})
    lines = [r.getMessage() for r in caplog.records if r.name == "cmsshop.request"]
    assert len(lines) == 1
    assert lines[0].startswith("trace-7 GET /api/nope 404")
    assert f"support={response.json['supportCode']}" in lines[0]
