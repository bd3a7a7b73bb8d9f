"""``remind-expiring``: one pass queues a reminder for each active license of a customer
expiring within the next days, once per license and expiry date."""

from __future__ import annotations

import datetime as dt
import pathlib

import pytest
from fakes.shop import make_catalogue
from helpers.account_data import paid_order
from helpers.cli import run_admin
from sqlalchemy import select

from cmsshop.models import License, OutboxMessage, Product
from cmsshop.scripts.admin import main as admin_main
from cmsshop.services.licensing.reminders import queue_expiry_reminders
from cmsshop.util import utcnow

SETTINGS = {"cmsshop.base_url": "https://shop.example.com", "cmsshop.site_name": "Shop"}


@pytest.fixture
def licenses(dbsession, customer, other_customer):
    """Alice's SiteGuard license expiring in 5 days, Bob's in 40, and licenses that must
    never be reminded: already expired, suspended, perpetual (PixelForge), no customer."""
    make_catalogue(dbsession)
    alice_order = paid_order(dbsession, customer, ("site-guard", "pixel-forge"))
    bob_order = paid_order(dbsession, other_customer, ("site-guard",))
    now = utcnow()

    def license_of(order, slug):
        return dbsession.scalar(
            select(License)
            .join(Product)
            .where(License.order_item_id.in_([i.id for i in order.items]), Product.slug == slug)
        )

    soon = license_of(alice_order, "site-guard")
    soon.expires_at = now + dt.timedelta(days=5)
    later = license_of(bob_order, "site-guard")
    later.expires_at = now + dt.timedelta(days=40)
    assert license_of(alice_order, "pixel-forge").expires_at is None
    site_guard = soon.product
    for status, expires in (
        ("active", now - dt.timedelta(hours=1)),  # expired, not yet marked
        ("suspended", now + dt.timedelta(days=3)),
        ("expired", now + dt.timedelta(days=3)),
    ):
        dbsession.add(
            License(
                key=f"KEY-{status}-{expires:%H%M%S}",
                user_id=customer.id,
                product_id=site_guard.id,
                status=status,
                max_activations=1,
                expires_at=expires,
            )
        )
    # Issued by hand, without a customer: no one to write to.
    dbsession.add(
        License(
            key="KEY-NOBODY",
            user_id=None,
            product_id=site_guard.id,
            status="active",
            max_activations=1,
            expires_at=now + dt.timedelta(days=2),
        )
    )
    dbsession.commit()
    return soon, later


def reminders(dbsession) -> list[OutboxMessage]:
    dbsession.rollback()  # a fresh read transaction (SQLite snapshot)
    return list(
        dbsession.scalars(
            select(OutboxMessage)
            .where(OutboxMessage.kind == "license_expiring")
            .order_by(OutboxMessage.id)
        )
    )


def test_one_pass_reminds_each_license_once_per_period(dbsession, licenses, customer):
    soon, later = licenses
    assert queue_expiry_reminders(dbsession, SETTINGS, days=14) == 1
    dbsession.commit()
    (message,) = reminders(dbsession)
    expires = f"{soon.expires_at:%Y-%m-%d}"
    assert message.to_address == customer.email and message.user_id == customer.id
    assert message.dedupe_key == f"license-expiring:{soon.id}:{expires}"
    assert "SiteGuard" in message.subject and expires in message.subject
    for body in (message.text_body, message.html_body):
        assert soon.key in body and "SiteGuard" in body and expires in body
        assert "https://shop.example.com/account/licenses" in body
    assert "in 5 days" in message.text_body

    # The same pass again: nothing more.
    assert queue_expiry_reminders(dbsession, SETTINGS, days=14) == 0
    dbsession.commit()
    assert len(reminders(dbsession)) == 1

    # A longer look-ahead reaches Bob's license; Alice's is still reminded once.
    assert queue_expiry_reminders(dbsession, SETTINGS, days=60) == 1
    dbsession.commit()
    assert [m.dedupe_key.split(":")[1] for m in reminders(dbsession)] == [
        str(soon.id),
        str(later.id),
    ]

    # Renewed: a new expiry date is a new period with its own reminder, once.
    renewed = dbsession.get(License, soon.id)
    renewed.expires_at = utcnow() + dt.timedelta(days=10)
    dbsession.commit()
    assert queue_expiry_reminders(dbsession, SETTINGS, days=14) == 1
    assert queue_expiry_reminders(dbsession, SETTINGS, days=14) == 0
    dbsession.commit()
    assert len(reminders(dbsession)) == 3


def test_days_must_be_positive(dbsession):
    with pytest.raises(ValueError):
        queue_expiry_reminders(dbsession, SETTINGS, days=0)


def test_the_cli_pass(ini, dbsession, licenses, capsys):  # noqa: F811
    # main() in this process, as test_admin_cli does for quick commands.
    assert admin_main([ini, "remind-expiring"]) == 0
    assert "queued 1 license expiry reminder (14 days ahead)" in capsys.readouterr().out
    assert admin_main([ini, "remind-expiring"]) == 0
    assert "queued 0 license expiry reminders" in capsys.readouterr().out
    assert len(reminders(dbsession)) == 1
    # The real console script with --days; a bad value is refused by argparse.
    result = run_admin(ini, "remind-expiring", "--days", "60")
    assert result.returncode == 0, result.stderr
    assert "queued 1 license expiry reminder (60 days ahead)" in result.stdout
    assert len(reminders(dbsession)) == 2
    for bad in ("0", "-3", "soon", "99999"):
        refused = run_admin(ini, "remind-expiring", "--days", bad)
        assert refused.returncode == 2 and "days" in refused.stderr
    assert len(reminders(dbsession)) == 2


def test_the_default_comes_from_the_setting(tmp_path, ini, dbsession, licenses, capsys):  # noqa: F811
    custom = tmp_path / "custom.ini"
    text = pathlib.Path(ini).read_text()
    text = text.replace("[alembic]", "cmsshop.mail.expiry_reminder_days = 60\n\n[alembic]")
    custom.write_text(text)
    assert admin_main([str(custom), "remind-expiring"]) == 0
    assert "queued 2 license expiry reminders (60 days ahead)" in capsys.readouterr().out
