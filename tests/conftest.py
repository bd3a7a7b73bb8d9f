"""Test fixtures: the real app from the real configure(), on a real migrated database.

SQLite by default (a file, so several connections and processes see the same data);
PostgreSQL when CMSSHOP_TEST_DATABASE_URL is set. Tests commit for real -- fulfilment,
the event log and error records depend on real, separate transactions -- and every
table is emptied after each test, so each test starts from the migrated empty schema.
"""

from __future__ import annotations

import contextlib
import os
import threading

import pytest
import sqlalchemy as sa
import webtest
from alembic import command
from alembic.config import Config
from sqlalchemy.orm import Session

from cmsshop.config import configure
from cmsshop.db import make_engine
from cmsshop.models import Base
from cmsshop.services.accounts import users as accounts

# Helpers with assertions, imported by test modules: rewrite them for readable failures.
pytest.register_assert_rewrite("browser_fixtures")

# argon2 at full cost takes ~0.1-1 s a hash; the suite hashes hundreds of passwords
# (the apps get the same profile through cmsshop.password_hashing below).
HASHER = accounts.PasswordHasher("cheapest")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TEST_SECRET = "test-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
PASSWORD = "correct horse battery"
ALL_MODULES = "store docs dashboard licensing webhooks.cardprovider webhooks.walletprovider"


def alembic_config(url: str) -> Config:
    cfg = Config(os.path.join(ROOT, "development.ini"))
    cfg.set_main_option("script_location", os.path.join(ROOT, "alembic"))
    cfg.attributes["database_url"] = url
    return cfg


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
    yield
    if "database_url" not in request.fixturenames:
        return
    engine = request.getfixturevalue("engine")
    tables = [t.name for t in reversed(Base.metadata.sorted_tables)]
    # DELETE, not TRUNCATE: on PostgreSQL TRUNCATE of two dozen tiny tables costs ~0.4 s
    # a test (it rewrites files); DELETE costs ~20 ms. Tests never rely on id values.
    with engine.begin() as conn:
        for name in tables:
            conn.exec_driver_sql(f"DELETE FROM {name}")


@pytest.fixture
def storage_dir(tmp_path):
    path = tmp_path / "files"
    path.mkdir()
    return path


@pytest.fixture
def settings(database_url, storage_dir) -> dict:
    return {
        "cmsshop.environment": "testing",
        "cmsshop.database_url": database_url,
        "cmsshop.secret": TEST_SECRET,
        "cmsshop.base_url": "http://localhost",
        "cmsshop.modules": ALL_MODULES,
        "cmsshop.storage_dir": str(storage_dir),
        "cmsshop.password_hashing": "cheapest",
        "cmsshop.license_key_dir": str(storage_dir.parent / "keys"),
        # Webhooks answer 503 webhook_not_configured without these (tested separately).
        "cmsshop.cardprovider.webhook_secrets": "whsec_test_conftest_0123456789abcdef",
        "cmsshop.walletprovider.webhook_id": "WH-TEST-CONFTEST",
        # Mail goes to .eml files in the test's own folder (tests/fakes/smtp.py has an
        # SMTP server for the tests of delivery).
        "cmsshop.mail.backend": "files",
        "cmsshop.mail.dir": str(storage_dir.parent / "mail"),
    }


@pytest.fixture
def make_app(settings):
    """Build a WSGI app from the real configure() with setting overrides."""
    apps = []

    def factory(**overrides):
        app = configure({**settings, **overrides}).make_wsgi_app()
        apps.append(app)
        return app

    yield factory
    for app in apps:
        app.registry["cmsshop.engine"].dispose()


@pytest.fixture
def app(make_app):
    return make_app()


class ApiClient(webtest.TestApp):
    """A WebTest client that sends its CSRF token on unsafe methods.

    The token is added only when the request does not set X-CSRF-Token itself, so a
    test can still send a missing, wrong or stale one.
    """

    csrf_token: str | None = None

    def do_request(self, req, status=None, expect_errors=None):
        if (
            self.csrf_token
            and req.method not in ("GET", "HEAD", "OPTIONS")
            and "X-CSRF-Token" not in req.headers
        ):
            req.headers["X-CSRF-Token"] = self.csrf_token
        return super().do_request(req, status=status, expect_errors=expect_errors)

    def refresh_csrf(self) -> str:
        self.csrf_token = self.get("/api/auth/session").json["csrfToken"]
        return self.csrf_token

    def login(self, email: str, password: str = PASSWORD):
        self.refresh_csrf()
        response = self.post_json("/api/auth/login", {"email": email, "password": password})
        self.csrf_token = response.json["csrfToken"]
        return response


def new_client(app) -> ApiClient:
    return ApiClient(app, extra_environ={"REMOTE_ADDR": "127.0.0.1"})


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


@contextlib.contextmanager
def serve(app, host: str = "127.0.0.1"):
    """Serve ``app`` with waitress on a free loopback port; yields the base URL."""
    from cmsshop.server import app_limits, create_server

    server = create_server(
        app, *app_limits(app), host=host, port=0, threads=8, clear_untrusted_proxy_headers=True
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.effective_port}"
    finally:
        server.close()
        thread.join(timeout=5)


@pytest.fixture
def live_server(app):
    """The app served over real HTTP on loopback (for clients that need a socket)."""
    with serve(app) as url:
        yield url


def is_postgresql(url: str) -> bool:
    return sa.engine.make_url(url).get_backend_name() == "postgresql"


requires_postgresql = pytest.mark.skipif(
    not is_postgresql(os.environ.get("CMSSHOP_TEST_DATABASE_URL", "sqlite://")),
    reason="needs PostgreSQL (set CMSSHOP_TEST_DATABASE_URL)",
)


def write_admin_ini(path, settings: dict) -> str:
    """An ini for cmsshop-admin (``[app:main]`` with ``settings``, alembic, logging at
    INFO to stderr through SafeFormatter); returns its path."""
    lines = "\n".join(f"{key} = {value}" for key, value in settings.items())
    path.write_text(
        f"""[app:main]
use = egg:cmsshop
{lines}

[alembic]
script_location = {ROOT}/alembic

[loggers]
keys = root

[handlers]
keys = console

[formatters]
keys = generic

[logger_root]
level = INFO
handlers = console

[handler_console]
class = StreamHandler
args = (sys.stderr,)
formatter = generic

[formatter_generic]
class = cmsshop.logs.SafeFormatter
format = %(levelname)s [%(name)s] %(message)s
"""
    )
    return str(path)
