"""payment_events.next_attempt_at: webhook events queued for the worker

Revision ID: 0016
Revises: 0015
With ``cmsshop.payments.webhook_processing = queued`` a delivery is logged and
acknowledged at once; ``cmsshop-admin worker`` confirms and fulfils the events whose
``next_attempt_at`` has come (cmsshop.services.payments.events.queue).
"""

import sqlalchemy as sa
from alembic import op

from cmsshop.models.meta import UTCDateTime

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("payment_events") as batch:
        batch.add_column(sa.Column("next_attempt_at", UTCDateTime(timezone=True), nullable=True))
        batch.create_index(
            op.f("ix_payment_events_next_attempt_at"), ["next_attempt_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("payment_events") as batch:
        batch.drop_index(op.f("ix_payment_events_next_attempt_at"))
        batch.drop_column("next_attempt_at")
