"""The shop's logo on its invoices: uploaded in the console, kept in ``shop_files`` (so
every app process serves the same bytes), served at a URL naming its sha256.

Only PNG and JPEG, recognised from the bytes (never from the file name or the browser's
content type), at most ``MAX_BYTES`` and ``MAX_PIXELS``; Pillow opens and fully decodes
it before it is kept, so a truncated file or a decompression bomb (a small file that
would unpack to gigabytes) is refused rather than served.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import ShopFile
from cmsshop.services.store import media
from cmsshop.util import utcnow

LOGO_NAME = "logo"
MAX_BYTES = 500_000  # 500 kB, in the decimal units the pages show sizes in
MAX_PIXELS = 4096 * 4096
MAX_SIDE = 4096
FORMATS = {"PNG": ("image/png", "png"), "JPEG": ("image/jpeg", "jpg")}


class LogoInvalid(Exception):
    """Why an upload is refused, in words for the seller."""


def check_logo(data: bytes) -> tuple[str, int, int]:
    """(content type, width, height) of a logo we accept; LogoInvalid otherwise (the
    product images' check, services/store/media.py, with the logo's formats and limits)."""
    try:
        fmt, width, height = media.check_image(
            data,
            formats=tuple(FORMATS),
            max_bytes=MAX_BYTES,
            max_side=MAX_SIDE,
            max_pixels=MAX_PIXELS,
        )
    except media.ImageInvalid as exc:
        raise LogoInvalid(str(exc)) from None
    return FORMATS[fmt][0], width, height


def save_logo(session: Session, data: bytes) -> ShopFile:
    """Keep ``data`` as the shop's logo (checked by ``check_logo``), replacing any."""
    content_type, _width, _height = check_logo(data)
    digest = hashlib.sha256(data).hexdigest()
    stored = session.get(ShopFile, LOGO_NAME)
    if stored is None:
        stored = ShopFile(name=LOGO_NAME)
        session.add(stored)
    stored.content_type, stored.data, stored.sha256 = content_type, data, digest
    stored.updated_at = utcnow()
    session.flush()
    return stored


def remove_logo(session: Session) -> bool:
    """Remove the logo; whether there was one."""
    stored = session.get(ShopFile, LOGO_NAME)
    if stored is None:
        return False
    session.delete(stored)
    session.flush()
    return True


def read_logo(session: Session) -> ShopFile | None:
    return session.get(ShopFile, LOGO_NAME)


def logo_sha256(session: Session) -> str | None:
    """The current logo's sha256 (what an invoice snapshot records), or None: the hash
    column only, since every fulfilment asks and the bytes may be half a megabyte."""
    return session.scalar(select(ShopFile.sha256).where(ShopFile.name == LOGO_NAME))


def logo_url(stored: ShopFile) -> str:
    """``/shop-logo/<sha256>.png``: the bytes' hash in the URL, so it is cached for good."""
    extension = "png" if stored.content_type == "image/png" else "jpg"
    return f"/shop-logo/{stored.sha256}.{extension}"
