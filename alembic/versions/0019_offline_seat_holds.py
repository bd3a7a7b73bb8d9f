"""activations.seat_held_until: an offline lease keeps its seat until it expires

Revision ID: 0019
Revises: 0018
An offline lease works without the shop until its expiry, so deactivating its
installation must not free the seat before then (cmsshop.services.licensing.seats).
Existing offline activations get no hold: their lease expiries were never stored.
"""

import sqlalchemy as sa
from alembic import op

from cmsshop.models.meta import UTCDateTime

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("activations") as batch:
        batch.add_column(sa.Column("seat_held_until", UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("activations") as batch:
        batch.drop_column("seat_held_until")
