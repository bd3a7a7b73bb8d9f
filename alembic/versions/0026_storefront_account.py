"""the storefront and the self-service account: product images and their stored
renditions, versioned legal pages, the terms an order's buyer accepted, e-mail change
tokens, deleted accounts, and the audit log

Revision ID: 0026
Revises: 0025
"""

import re

import sqlalchemy as sa
from alembic import op

import cmsshop.models.meta

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

# Product images are public content: their writes bump the content version like those of
# the other catalogue tables (the triggers of migration 0017, made the same way).
BUMP = (
    "INSERT INTO content_versions (name, version) VALUES ('public', 1) "
    "ON CONFLICT (name) DO UPDATE SET version = content_versions.version + 1"
)
TRIGGER_EVENTS = ("insert", "update", "delete")


def image_trigger_events() -> tuple[str, ...]:
    postgresql = op.get_bind().dialect.name == "postgresql"
    return (*TRIGGER_EVENTS, "truncate") if postgresql else TRIGGER_EVENTS


def create_image_triggers() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for event in image_trigger_events():
        name = f"product_images_{event}_bumps_content_version"
        if postgresql:
            op.execute(
                f"CREATE TRIGGER {name} AFTER {event.upper()} ON product_images "
                "FOR EACH STATEMENT EXECUTE FUNCTION cmsshop_bump_content_version()"
            )
        else:
            op.execute(
                f"CREATE TRIGGER {name} AFTER {event.upper()} ON product_images "
                f"FOR EACH ROW BEGIN {BUMP}; END"
            )


# A product page's <h1> is the product's name: the headings of its description (rendered
# and sanitised, so its tags are lower-case) move one level down, capped at <h6>, as
# services.docs.markdown renders them from now on (heading_shift=1).
HEADING_TAG = re.compile(r"<(/?)h([1-6])\b")


def shift_headings(html: str) -> str:
    return HEADING_TAG.sub(lambda m: f"<{m[1]}h{min(int(m[2]) + 1, 6)}", html)


def shift_description_headings() -> None:
    products = sa.table("products", sa.column("id"), sa.column("description_html"))
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(products.c.id, products.c.description_html).where(
            products.c.description_html.like("%<h%")
        )
    ).all()
    for product_id, html in rows:
        shifted = shift_headings(html)
        if shifted != html:
            bind.execute(
                products.update()
                .where(products.c.id == product_id)
                .values(description_html=shifted)
            )


OLD_PURPOSES = "purpose IN ('password_reset', 'verify_email')"
NEW_PURPOSES = "purpose IN ('password_reset', 'verify_email', 'change_email')"


def upgrade() -> None:
    op.create_table(
        "audit_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.Column("actor_id", sa.Integer(), nullable=True),
        sa.Column("actor", sa.String(length=120), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("object_type", sa.String(length=32), nullable=False),
        sa.Column("object_id", sa.String(length=64), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("ip", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["actor_id"],
            ["users.id"],
            name=op.f("fk_audit_entries_actor_id_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_entries")),
    )
    op.create_index("ix_audit_entries_created_at", "audit_entries", ["created_at"])
    op.create_index(
        "ix_audit_entries_object", "audit_entries", ["object_type", "object_id", "id"]
    )
    op.create_table(
        "legal_documents",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("body_html", sa.Text(), nullable=False),
        sa.Column(
            "published_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False
        ),
        sa.Column("published_by", sa.Integer(), nullable=True),
        sa.CheckConstraint(
            "kind IN ('terms', 'privacy', 'imprint', 'refunds')",
            name=op.f("ck_legal_documents_kind"),
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_legal_documents_version")),
        sa.ForeignKeyConstraint(
            ["published_by"],
            ["users.id"],
            name=op.f("fk_legal_documents_published_by_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_legal_documents")),
        sa.UniqueConstraint("kind", "version", name=op.f("uq_legal_documents_kind_version")),
    )
    op.create_table(
        "product_images",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("product_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("alt", sa.String(length=300), nullable=False),
        sa.Column("source_sha256", sa.String(length=64), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("height", sa.Integer(), nullable=False),
        sa.Column("variants", sa.JSON(), nullable=False),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["product_id"],
            ["products.id"],
            name=op.f("fk_product_images_product_id_products"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_product_images")),
    )
    op.create_index(op.f("ix_product_images_product_id"), "product_images", ["product_id"])
    create_image_triggers()
    shift_description_headings()
    op.create_table(
        "media_files",
        sa.Column("key", sa.String(length=80), nullable=False),
        sa.Column("content_type", sa.String(length=40), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("height", sa.Integer(), nullable=False),
        sa.Column("image_id", sa.Integer(), nullable=True),
        sa.Column("created_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["image_id"],
            ["product_images.id"],
            name=op.f("fk_media_files_image_id_product_images"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_media_files")),
    )
    op.create_index(op.f("ix_media_files_image_id"), "media_files", ["image_id"])
    with op.batch_alter_table("account_tokens") as batch:
        batch.add_column(sa.Column("new_email", sa.String(length=320), nullable=True))
        batch.drop_constraint(op.f("ck_account_tokens_purpose"), type_="check")
        batch.create_check_constraint("purpose", NEW_PURPOSES)
    op.add_column("orders", sa.Column("terms_version", sa.Integer(), nullable=True))
    op.add_column(
        "orders",
        sa.Column(
            "terms_accepted_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True
        ),
    )
    op.add_column(
        "users",
        sa.Column("deleted_at", cmsshop.models.meta.UTCDateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("deleted_at")
    with op.batch_alter_table("orders") as batch:
        batch.drop_column("terms_accepted_at")
        batch.drop_column("terms_version")
    op.execute("DELETE FROM account_tokens WHERE purpose = 'change_email'")
    with op.batch_alter_table("account_tokens") as batch:
        batch.drop_constraint(op.f("ck_account_tokens_purpose"), type_="check")
        batch.create_check_constraint("purpose", OLD_PURPOSES)
        batch.drop_column("new_email")
    op.drop_index(op.f("ix_media_files_image_id"), table_name="media_files")
    op.drop_table("media_files")
    op.drop_index(op.f("ix_product_images_product_id"), table_name="product_images")
    op.drop_table("product_images")  # its triggers go with it
    op.drop_table("legal_documents")
    op.drop_index("ix_audit_entries_object", table_name="audit_entries")
    op.drop_index("ix_audit_entries_created_at", table_name="audit_entries")
    op.drop_table("audit_entries")
