"""The cmsshop-admin console script, run as operators run it."""

from __future__ import annotations

from helpers.cli import run_admin


def test_initdb_is_idempotent(ini):
    result = run_admin(ini, "initdb")
    assert result.returncode == 0, result.stderr
    assert "newest schema" in result.stdout


def test_create_user_reads_password_from_stdin(ini, dbsession):
    from helpers.app import HASHER

    from cmsshop.services.accounts.users import authenticate

    result = run_admin(
        ini,
        "create-user",
        "Ops@Example.com",
        "--admin",
        "--password-stdin",
        stdin="a long admin password\n",
    )
    assert result.returncode == 0, result.stderr
    user = authenticate(dbsession, HASHER, "ops@example.com", "a long admin password")
    assert user is not None and user.role == "admin"
    again = run_admin(
        ini, "create-user", "ops@example.com", "--password-stdin", stdin="a long admin password\n"
    )
    assert again.returncode == 1 and "already exists" in again.stderr


def test_create_user_refuses_short_password(ini):
    result = run_admin(ini, "create-user", "x@example.com", "--password-stdin", stdin="short\n")
    assert result.returncode == 2


def test_seed_demo_then_log_in_as_demo_users(ini, app):
    from helpers.clients import new_client

    result = run_admin(ini, "seed-demo", "--if-empty")
    assert result.returncode == 0, result.stderr
    assert "demo@example.com" in result.stdout
    second = run_admin(ini, "seed-demo", "--if-empty")
    assert "not empty" in second.stdout
    for email, role in (("admin@example.com", "admin"), ("demo@example.com", "customer")):
        client = new_client(app)
        body = client.login(email, "demo-password").json
        assert body["user"]["role"] == role
    # The demo coupon takes 10 % off in a cart.
    assert "coupon DEMO10" in result.stdout
    cart = client.post_json("/api/store/carts", {}).json
    line = f"/api/store/carts/{cart['id']}/lines/site-guard-pro"
    full = client.put_json(line, {"quantity": 1}).json["total"]
    discounted = client.put_json(f"/api/store/carts/{cart['id']}/coupon", {"code": "demo10"})
    assert discounted.json["discount"] == (full + 5) // 10


def test_seed_demo_refused_in_production(tmp_path, ini):
    from pathlib import Path

    text = Path(ini).read_text()
    text = text.replace("cmsshop.environment = development", "cmsshop.environment = production")
    text = text.replace("cmsshop.password_hashing = cheapest", "")
    prod = tmp_path / "prod.ini"
    prod.write_text(text)
    result = run_admin(str(prod), "seed-demo")
    assert result.returncode == 2 and "production" in result.stderr


def test_support_code_prints_the_record(ini, dbsession):
    from cmsshop.models import ErrorRecord
    from cmsshop.util import utcnow

    dbsession.add(
        ErrorRecord(
            support_code="CS-TEST-0001",
            created_at=utcnow(),
            method="POST",
            path="/api/x",
            status=500,
            error_code="internal_error",
            exception_type="builtins.ValueError",
            traceback="Traceback ...\nValueError: boom",
        )
    )
    dbsession.commit()
    result = run_admin(ini, "support-code", "cs-test-0001")
    assert result.returncode == 0, result.stderr
    assert '"status": 500' in result.stdout and "ValueError: boom" in result.stdout
    missing = run_admin(ini, "support-code", "CS-NONE-0000")
    assert missing.returncode == 1
