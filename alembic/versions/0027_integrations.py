"""integrations: scoped API tokens, outgoing webhooks (endpoints, the event outbox,
deliveries and their attempts), and who made an audited change through which channel

Revision ID: 0027
Revises: 0026
"""

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhook_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("public_id", sa.String(length=40), nullable=False),
        sa.Column("type", sa.String(length=40), nullable=False),
        sa.Column("subject", sa.String(length=80), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_events")),
        sa.UniqueConstraint("public_id", name=op.f("uq_webhook_events_public_id")),
    )
    with op.batch_alter_table("webhook_events", schema=None) as batch_op:
        batch_op.create_index("ix_webhook_events_created_at", ["created_at"], unique=False)

    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("created_by_id", sa.Integer(), nullable=False),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_used_ip", sa.String(length=64), nullable=True),
        sa.Column("revoked_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["created_by_id"],
            ["users.id"],
            name=op.f("fk_api_tokens_created_by_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("description", sa.String(length=500), nullable=False),
        sa.Column("event_types", sa.JSON(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("secret_encrypted", sa.Text(), nullable=False),
        sa.Column("previous_secret_encrypted", sa.Text(), nullable=True),
        sa.Column(
            "previous_secret_expires_at",
            cmsshop.models.meta.UTCDateTime(timezone=True),
            nullable=True,
        ),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column("created_by_id", sa.Integer(), nullable=True),
        sa.Column("failing_since", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.Column("disabled_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.Column("disabled_reason", sa.String(length=300), nullable=True),
        sa.ForeignKeyConstraint(
            ["created_by_id"],
            ["users.id"],
            name=op.f("fk_webhook_endpoints_created_by_id_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_endpoints")),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("endpoint_id", sa.Integer(), nullable=False),
        sa.Column("subject", sa.String(length=80), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column(
            "next_attempt_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False
        ),
        sa.Column("retry_until", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.Column("locked_until", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_attempt_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("delivered_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'succeeded', 'failed')",
            name=op.f("ck_webhook_deliveries_status"),
        ),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["webhook_endpoints.id"],
            name=op.f("fk_webhook_deliveries_endpoint_id_webhook_endpoints"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["webhook_events.id"],
            name=op.f("fk_webhook_deliveries_event_id_webhook_events"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint(
            "event_id", "endpoint_id", name=op.f("uq_webhook_deliveries_event_id_endpoint_id")
        ),
    )
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.create_index(
            "ix_webhook_deliveries_due", ["status", "next_attempt_at"], unique=False
        )
        batch_op.create_index(
            "ix_webhook_deliveries_order", ["endpoint_id", "subject", "id"], unique=False
        )

    op.create_table(
        "webhook_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("delivery_id", sa.Integer(), nullable=False),
        sa.Column("started_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("response_excerpt", sa.String(length=1000), nullable=False),
        sa.Column("error", sa.String(length=300), nullable=True),
        sa.Column("manual", sa.Boolean(), nullable=False),
        sa.CheckConstraint(
            "outcome IN ('succeeded', 'http_error', 'network_error', 'timeout', 'refused_address')",
            name=op.f("ck_webhook_attempts_outcome"),
        ),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["webhook_deliveries.id"],
            name=op.f("fk_webhook_attempts_delivery_id_webhook_deliveries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_attempts")),
    )
    with op.batch_alter_table("webhook_attempts", schema=None) as batch_op:
        batch_op.create_index("ix_webhook_attempts_delivery", ["delivery_id", "id"], unique=False)

    with op.batch_alter_table("audit_entries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("actor_token_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("channel", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("via", sa.String(length=120), nullable=True))
        batch_op.create_index("ix_audit_entries_actor", ["actor", "id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_audit_entries_actor_token_id_api_tokens"),
            "api_tokens",
            ["actor_token_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    with op.batch_alter_table("audit_entries", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_audit_entries_actor_token_id_api_tokens"), type_="foreignkey"
        )
        batch_op.drop_index("ix_audit_entries_actor")
        batch_op.drop_column("via")
        batch_op.drop_column("channel")
        batch_op.drop_column("actor_token_id")

    with op.batch_alter_table("webhook_attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_webhook_attempts_delivery")

    op.drop_table("webhook_attempts")
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_webhook_deliveries_order")
        batch_op.drop_index("ix_webhook_deliveries_due")

    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_endpoints")
    op.drop_table("api_tokens")
    with op.batch_alter_table("webhook_events", schema=None) as batch_op:
        batch_op.drop_index("ix_webhook_events_created_at")

    op.drop_table("webhook_events")
