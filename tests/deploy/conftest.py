"""The production topology of deploy/ under test, started once for the smoke suite.

nginx (Debian's package) terminates TLS with a throw-away certificate on loopback in front
of two application processes (``pserve deploy/cmsshop.ini``) and the worker
(``cmsshop-admin deploy/cmsshop.ini worker``), all started by deploy/run.py's Topology
exactly as an operator would start them, on a PostgreSQL database the suite creates and
drops. The edges are fakes on loopback: the card provider's API (tests/fakes/stripe_api.py)
and an SMTP server (tests/fakes/smtp.py). Clients talk HTTPS to nginx, verifying its
certificate, from 127.0.0.2 (so the address nginx forwards differs from nginx's own).

These tests run with ``make smoke`` (CMSSHOP_SMOKE=1, after the PostgreSQL run in .ci/run);
in the ordinary suite they are skipped with one line. The PostgreSQL server is
CMSSHOP_TEST_DATABASE_URL's when that is PostgreSQL, else CMSSHOP_SMOKE_DATABASE_SERVER
(default postgresql+psycopg://postgres@127.0.0.1:5432/postgres). When a test fails, the
end of every process's log, nginx's error log and access log are added to its report.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa
from fakes.smtp import FakeSmtpServer
from fakes.stripe_api import API_KEY, SECRET, FakeStripe
from helpers.app import ROOT
from helpers.smoke_databases import SMOKE_PREFIX, drop_left_behind, host_tag
from requests.adapters import HTTPAdapter
from sqlalchemy.orm import Session

from cmsshop.db import make_engine

HERE = Path(__file__).resolve().parent
DEFAULT_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
# The client's own loopback address: nginx sees it, nginx itself reaches the apps from
# 127.0.0.1 (their trusted proxy).
CLIENT_ADDRESS = "127.0.0.2"
SELLER = {
    "CMSSHOP_SELLER_LEGAL_NAME": "Smoke Test Software GmbH",
    "CMSSHOP_SELLER_ADDRESS": "Hauptstrasse 1",
    "CMSSHOP_SELLER_POSTAL_CODE": "10115",
    "CMSSHOP_SELLER_CITY": "Berlin",
    "CMSSHOP_SELLER_COUNTRY": "DE",
    "CMSSHOP_SELLER_TAX_ID": "DE136695976",
}


def _load_run_module():
    """deploy/run.py (a script, not a package), imported by path."""
    spec = importlib.util.spec_from_file_location("deploy_run", Path(ROOT) / "deploy" / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def pytest_collection_modifyitems(config, items):
    mine = [item for item in items if HERE in Path(item.path).parents]
    if not mine:
        return
    reason = None
    if os.environ.get("CMSSHOP_SMOKE") != "1":
        reason = "production smoke suite: run by `make smoke` (CMSSHOP_SMOKE=1)"
    elif not (shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")):
        reason = "nginx is not installed (make smoke installs Debian's package)"
    if reason:
        for item in mine:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    topology = getattr(item, "funcargs", {}).get("topology")
    if report.failed and topology is not None:
        report.sections.append(("topology logs", topology.report()))


@pytest.fixture(scope="session")
def smoke_database_url():
    """A database of the suite's own on the PostgreSQL server, dropped afterwards."""
    configured = os.environ.get("CMSSHOP_TEST_DATABASE_URL", "")
    server = sa.engine.make_url(
        configured
        if configured.startswith("postgresql")
        else os.environ.get("CMSSHOP_SMOKE_DATABASE_SERVER", DEFAULT_SERVER)
    )
    name = f"{SMOKE_PREFIX}{host_tag()}_{os.getpid()}_{secrets.token_hex(4)}"
    admin = sa.create_engine(server.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            drop_left_behind(connection)
            connection.exec_driver_sql(f"CREATE DATABASE {name}")
    except sa.exc.OperationalError as exc:
        admin.dispose()
        pytest.fail(
            f"the smoke suite needs a PostgreSQL server at {server.set(database='postgres')}"
            f" (set CMSSHOP_SMOKE_DATABASE_SERVER): {exc.orig}",
            pytrace=False,
        )
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


@pytest.fixture(scope="session")
def smtp():
    server = FakeSmtpServer()
    server.up()
    yield server
    server.down()


@pytest.fixture(scope="session")
def provider():
    """The card provider's API (Stripe's, faked): the worker confirms payments with it."""
    fake = FakeStripe()
    fake.start()
    yield fake
    fake.stop()


def environment(database_url: str, smtp, provider, folder: Path, port: int) -> dict:
    """What an operator exports for deploy/cmsshop.ini (production.ini's names)."""
    return {
        "CMSSHOP_SECRET": secrets.token_urlsafe(48),
        "CMSSHOP_DATABASE_URL": database_url,
        "CMSSHOP_BASE_URL": f"https://127.0.0.1:{port}",
        "CMSSHOP_STORAGE_DIR": str(folder / "files"),
        "CMSSHOP_LICENSE_KEY_DIR": str(folder / "keys"),
        "CMSSHOP_MAIL_SMTP_HOST": smtp.host,
        "CMSSHOP_MAIL_SMTP_PORT": str(smtp.port),
        "CMSSHOP_MAIL_SMTP_SECURITY": "none",
        "CMSSHOP_MAIL_FROM": "Smoke Shop <shop@example.com>",
        "CMSSHOP_CARDPROVIDER_API_BASE": provider.url,
        "CMSSHOP_CARDPROVIDER_API_KEY": API_KEY,
        "CMSSHOP_CARDPROVIDER_WEBHOOK_SECRETS": SECRET,
        **SELLER,
    }


@pytest.fixture(scope="session")
def topology(smoke_database_url, smtp, provider):
    """nginx + two application processes + the worker, running (deploy/run.py)."""
    run = _load_run_module()
    folder = Path(tempfile.mkdtemp(prefix="cmsshop-smoke-"))
    folder.chmod(0o755)  # nginx's workers (nobody, under root) read the files under it
    storage = folder / "files"
    storage.mkdir(mode=0o755)
    for attempt in (1, 2):
        port = run.free_port()
        env = environment(smoke_database_url, smtp, provider, folder, port)
        topology = run.Topology(folder / f"run{attempt}", env, host="127.0.0.1", port=port)
        topology.storage = storage
        try:
            topology.start()
            break
        except run.StartFailed as exc:
            # The free ports were chosen by binding and letting go: another program
            # may have taken one since. Once more with new ones; else say why.
            if attempt == 1 and "in use" in str(exc):
                continue
            shutil.rmtree(folder, ignore_errors=True)
            pytest.fail(f"the topology did not start: {exc}", pytrace=False)
    try:
        yield topology
    finally:
        topology.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def smoke_engine(smoke_database_url):
    engine = make_engine(smoke_database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def db(smoke_engine, topology):
    """A plain session on the topology's database (arrange, then check what it did)."""
    with Session(smoke_engine, expire_on_commit=False) as session:
        yield session


class SourceAddressAdapter(HTTPAdapter):
    """Connections from a given loopback address (the client's, as nginx sees it)."""

    def __init__(self, source: str, **kw):
        self.source = source
        super().__init__(**kw)

    def init_poolmanager(self, *args, **kw):
        kw["source_address"] = (self.source, 0)
        super().init_poolmanager(*args, **kw)


@pytest.fixture
def client_address() -> str:
    """Where https_client's requests come from, unless told otherwise."""
    return CLIENT_ADDRESS


@pytest.fixture
def https_client(topology):
    """``https_client(source=CLIENT_ADDRESS)``: a requests session that verifies nginx's
    certificate and connects from ``source``."""
    sessions = []

    def make(source: str = CLIENT_ADDRESS) -> requests.Session:
        client = requests.Session()
        # Not the environment's CA bundle (REQUESTS_CA_BUNDLE would replace ``verify``)
        # nor its proxies: nginx's own certificate, on loopback.
        client.trust_env = False
        client.verify = str(topology.certificate)
        adapter = SourceAddressAdapter(source)
        client.mount("https://", adapter)
        client.mount("http://", adapter)
        sessions.append(client)
        return client

    yield make
    for client in sessions:
        client.close()
