"""The test app's settings and constants, serving an app on loopback, ini files."""

from __future__ import annotations

import contextlib
import os
import threading

import pytest
import sqlalchemy as sa
from alembic.config import Config

from cmsshop.services.accounts import users as accounts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEST_SECRET = "test-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
PASSWORD = "correct horse battery"
ALL_MODULES = "store docs dashboard licensing webhooks.cardprovider webhooks.walletprovider"

# argon2 at full cost takes ~0.1-1 s a hash; the suite hashes hundreds of passwords
# (the apps get the same profile through cmsshop.password_hashing below).
HASHER = accounts.PasswordHasher("cheapest")


def default_settings(database_url: str, folder) -> dict:
    """The settings every test app starts from; its files live under ``folder``."""
    return {
        "cmsshop.environment": "testing",
        "cmsshop.database_url": database_url,
        "cmsshop.secret": TEST_SECRET,
        "cmsshop.base_url": "http://localhost",
        "cmsshop.modules": ALL_MODULES,
        "cmsshop.storage_dir": str(folder / "files"),
        "cmsshop.password_hashing": "cheapest",
        "cmsshop.license_key_dir": str(folder / "keys"),
        # Webhooks answer 503 webhook_not_configured without these (tested separately).
        "cmsshop.cardprovider.webhook_secrets": "whsec_test_conftest_0123456789abcdef",
        "cmsshop.walletprovider.webhook_id": "WH-TEST-CONFTEST",
        # Mail goes to .eml files beside the storage folder (tests/fakes/smtp.py has an
        # SMTP server for the tests of delivery).
        "cmsshop.mail.backend": "files",
        "cmsshop.mail.dir": str(folder / "mail"),
        # Outgoing webhooks go to receivers on loopback (tests/webhooks); production
        # refuses such addresses (tested with this off).
        "cmsshop.webhooks.allow_private_addresses": True,
    }


def alembic_config(url: str) -> Config:
    cfg = Config(os.path.join(ROOT, "development.ini"))
    cfg.set_main_option("script_location", os.path.join(ROOT, "alembic"))
    cfg.attributes["database_url"] = url
    return cfg


@contextlib.contextmanager
def serve(app, host: str = "127.0.0.1"):
    """Serve ``app`` with waitress on a free loopback port; yields the base URL."""
    from cmsshop.server import app_limits, create_server

    server = create_server(
        app, *app_limits(app), host=host, port=0, threads=8, clear_untrusted_proxy_headers=True
    )
    closing = threading.Event()

    def run() -> None:
        # close() from this thread closes the sockets under the loop's select(): the
        # EBADF it then raises is the loop noticing, not an error of the app.
        try:
            server.run()
        except OSError:
            if not closing.is_set():
                raise

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.effective_port}"
    finally:
        closing.set()
        server.close()
        thread.join(timeout=5)


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
