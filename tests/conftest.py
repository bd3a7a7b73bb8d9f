"""Test fixtures: the real app from the real configure(), on a real migrated database.

SQLite by default (a file, so several connections and processes see the same data);
PostgreSQL when CMSSHOP_TEST_DATABASE_URL is set. Tests commit for real -- fulfilment,
the event log and error records depend on real, separate transactions -- and every
table is emptied after each test, so each test starts from the migrated empty schema.

One app, configured once per session from the default test settings, serves every test
that asks for ``app`` (and the clients built on it): configuring an app costs more than
most tests. Before each test its folders are emptied and the state its process keeps
between requests is reset (answer cache, payment settings cache, health probe,
settings), so a test sees what a new app would show. Tests that need other settings
build their own with ``make_app(**overrides)``.

This folder is on sys.path (pytest puts the folder of a rootdir conftest without an
``__init__.py`` there), so the plain helpers are the package ``helpers`` and the fakes of
the outside world the package ``fakes``; each feature's tests are a package of their own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

# Helpers with assertions: rewrite them for readable failures (before they are imported).
pytest.register_assert_rewrite("helpers")

from alembic import command  # noqa: E402
from helpers.account_data import Account, make_account  # noqa: E402
from helpers.app import HASHER, PASSWORD, ROOT, alembic_config, default_settings, serve  # noqa: E402
from helpers.clients import ApiClient, logged_in, new_client  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from cmsshop import cache  # noqa: E402
from cmsshop.config import configure  # noqa: E402
from cmsshop.db import make_engine  # noqa: E402
from cmsshop.models import Base  # noqa: E402
from cmsshop.services.accounts import users as accounts  # noqa: E402
from cmsshop.services.payments.settings import clear_config_caches  # noqa: E402

pytest_plugins = [
    "helpers.browser",
    "fakes.payment_fixtures",
    "fakes.smtp",
    "fakes.vies",
    "fakes.webhook_receiver",
]


@pytest.fixture(scope="session")
def database_url(tmp_path_factory) -> str:
    url = os.environ.get("CMSSHOP_TEST_DATABASE_URL")
    if not url:
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'test.sqlite'}"
    engine = make_engine(url)
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP SCHEMA public CASCADE")
            conn.exec_driver_sql("CREATE SCHEMA public")
    engine.dispose()
    command.upgrade(alembic_config(url), "head")
    return url


@pytest.fixture(scope="session")
def engine(database_url):
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture(autouse=True)
def _empty_tables(request):
    """After each test that touched the database, empty every table."""
    if "database_url" not in request.fixturenames:
        yield
        return
    engine = request.getfixturevalue("engine")  # before the test: not in teardown (deprecated)
    yield
    tables = [t.name for t in reversed(Base.metadata.sorted_tables)]
    # DELETE, not TRUNCATE: on PostgreSQL TRUNCATE of two dozen tiny tables costs ~0.4 s
    # a test (it rewrites files); DELETE costs ~20 ms. Tests never rely on id values.
    with engine.begin() as conn:
        for name in tables:
            conn.exec_driver_sql(f"DELETE FROM {name}")


@pytest.fixture(scope="session")
def app_folder(tmp_path_factory):
    """The test apps' files: ``files/`` (storage), ``mail/`` and ``keys/`` (the lease
    signing keys, kept for the session as a server keeps them)."""
    return tmp_path_factory.mktemp("app")


@pytest.fixture
def storage_dir(app_folder):
    """The apps' storage folder, empty at the start of each test (the mail folder too)."""
    for name in ("files", "mail"):
        shutil.rmtree(app_folder / name, ignore_errors=True)
    path = app_folder / "files"
    path.mkdir()
    return path


@pytest.fixture
def settings(database_url, storage_dir) -> dict:
    return default_settings(database_url, storage_dir.parent)


@pytest.fixture
def make_app(settings):
    """Build a WSGI app from the real configure() with setting overrides."""
    apps = []

    def factory(**overrides):
        if overrides.get("cmsshop.environment") == "production":
            # Production refuses the loopback webhook endpoints the test settings allow.
            overrides.setdefault("cmsshop.webhooks.allow_private_addresses", False)
        app = configure({**settings, **overrides}).make_wsgi_app()
        apps.append(app)
        return app

    yield factory
    for app in apps:
        app.registry["cmsshop.engine"].dispose()


class SessionApp:
    """The app configured once, and how to make its process look new again."""

    def __init__(self, settings: dict):
        self.wsgi = configure(settings).make_wsgi_app()
        self.settings = dict(self.wsgi.registry.settings)

    def reset(self) -> None:
        registry = self.wsgi.registry
        registry.settings.clear()
        registry.settings.update(self.settings)
        cache.clear_all()  # tables were emptied behind its back
        answers = registry.get("cmsshop.answer_cache")
        if answers is not None:
            answers.hits = answers.misses = 0
        clear_config_caches()
        registry["cmsshop.health_probe"].succeeded_at = float("-inf")


@pytest.fixture(scope="session")
def session_app(database_url, app_folder):
    app = SessionApp(default_settings(database_url, app_folder))
    yield app
    app.wsgi.registry["cmsshop.engine"].dispose()


@pytest.fixture
def app(session_app, storage_dir):
    """The app with the default test settings (configured once per session)."""
    session_app.reset()
    return session_app.wsgi


@pytest.fixture
def testapp(app) -> ApiClient:
    """An anonymous client with a CSRF token for its (anonymous) cookie."""
    client = new_client(app)
    client.refresh_csrf()
    return client


@pytest.fixture
def dbsession(engine):
    """A plain session for arranging data and checking results; commit() what you add."""
    with Session(engine, expire_on_commit=False) as session:
        yield session


@pytest.fixture
def make_user(dbsession):
    def factory(email: str, role: str = "customer", password: str = PASSWORD, name: str = ""):
        user = accounts.create_user(dbsession, HASHER, email, password, name=name, role=role)
        dbsession.commit()
        return user

    return factory


@pytest.fixture
def customer(make_user):
    return make_user("alice@example.com", name="Alice")


@pytest.fixture
def other_customer(make_user):
    return make_user("bob@example.com", name="Bob")


@pytest.fixture
def admin(make_user):
    return make_user("root@example.com", role="admin", name="Admin")


@pytest.fixture
def customer_app(app, customer) -> ApiClient:
    client = new_client(app)
    client.login(customer.email)
    return client


@pytest.fixture
def other_customer_app(app, other_customer) -> ApiClient:
    client = new_client(app)
    client.login(other_customer.email)
    return client


@pytest.fixture
def admin_app(app, admin) -> ApiClient:
    client = new_client(app)
    client.login(admin.email)
    return client


@pytest.fixture
def admin_pages(app, admin):
    """The admin, logged in through the /login form (a browser-like page client)."""
    return logged_in(app, admin)


@pytest.fixture
def account(dbsession, customer, storage_dir) -> Account:
    """The customer's paid order of site-guard (licensed, a 2.0.0 release) and themes."""
    return make_account(dbsession, customer, storage_dir)


@pytest.fixture
def live_server(app):
    """The app served over real HTTP on loopback (for clients that need a socket)."""
    with serve(app) as url:
        yield url


@pytest.fixture
def ini(tmp_path, database_url, storage_dir):
    """An ini like development.ini pointing at the test database (for cmsshop-admin)."""
    path = tmp_path / "test.ini"
    path.write_text(
        f"""[app:main]
use = egg:cmsshop
cmsshop.environment = development
cmsshop.database_url = {database_url}
cmsshop.secret = test-secret-0123456789-abcdefghijklmnopqrstuvwxyz
cmsshop.storage_dir = {storage_dir}
cmsshop.password_hashing = cheapest
cmsshop.modules = store docs dashboard licensing webhooks.cardprovider webhooks.walletprovider

[alembic]
script_location = {ROOT}/alembic
"""
    )
    return str(path)


@pytest.fixture
def server_settings(card_settings):
    """What two_servers' processes run with beside ``settings``: the card provider's
    settings (a test module overrides this fixture to serve other settings)."""
    return card_settings


@pytest.fixture
def two_servers(server_settings, settings):
    """Two app processes on the same database, as behind a load balancer."""
    env = {
        **os.environ,
        "CMSSHOP_TEST_APP_SETTINGS": json.dumps({**settings, **server_settings}),
        "PYTHONPATH": ROOT,
    }
    script = os.path.join(ROOT, "tests", "fakes", "app_server.py")
    processes = [
        subprocess.Popen(
            [sys.executable, script], env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        for _ in range(2)
    ]
    try:
        urls = []
        for process in processes:
            port = process.stdout.readline().strip()
            assert port.isdigit(), f"server did not start (exit {process.poll()})"
            urls.append(f"http://127.0.0.1:{port}")
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=10)
