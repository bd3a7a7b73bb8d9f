"""The shop's logo on its invoices: uploaded in the console, kept in ``shop_files`` (so
every app process serves the same bytes), served at a URL naming its sha256.

Only PNG and JPEG, recognised from the bytes (never from the file name or the browser's
content type), at most ``MAX_BYTES`` and ``MAX_PIXELS``; Pillow opens and fully decodes
it before it is kept, so a truncated file or a decompression bomb (a small file that
would unpack to gigabytes) is refused rather than served.
"""

from __future__ import annotations

import hashlib
import io
import warnings

from PIL import Image, UnidentifiedImageError
from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.models import ShopFile
from cmsshop.util import utcnow

LOGO_NAME = "logo"
MAX_BYTES = 512 * 1024
MAX_PIXELS = 4096 * 4096
MAX_SIDE = 4096
FORMATS = {"PNG": ("image/png", "png"), "JPEG": ("image/jpeg", "jpg")}
# What a real PNG or JPEG starts with: anything else is refused before Pillow sees it.
SIGNATURES = {b"\x89PNG\r\n\x1a\n": "PNG", b"\xff\xd8\xff": "JPEG"}


class LogoInvalid(Exception):
    """Why an upload is refused, in words for the seller."""


def check_logo(data: bytes) -> tuple[str, int, int]:
    """(content type, width, height) of a logo we accept; LogoInvalid otherwise."""
    if not data:
        raise LogoInvalid("choose a PNG or JPEG file")
    if len(data) > MAX_BYTES:
        raise LogoInvalid(f"at most {MAX_BYTES // 1024} KB")
    sniffed = next((fmt for sig, fmt in SIGNATURES.items() if data.startswith(sig)), None)
    if sniffed is None:
        raise LogoInvalid("only PNG and JPEG images")
    try:
        with warnings.catch_warnings():
            # Pillow warns between MAX_IMAGE_PIXELS and twice it; we refuse both.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                if image.format != sniffed:
                    raise LogoInvalid("only PNG and JPEG images")
                width, height = image.size
                if width * height > MAX_PIXELS or max(width, height) > MAX_SIDE:
                    raise LogoInvalid(f"at most {MAX_SIDE} × {MAX_SIDE} pixels")
                # WeasyPrint sets Pillow's process-wide LOAD_TRUNCATED_IMAGES when it is
                # imported, after which load() pads a truncated file instead of failing:
                # completeness is checked here without it (PNG: every chunk's CRC up to
                # IEND; JPEG: the end-of-image marker).
                if sniffed == "PNG":
                    image.verify()
                elif not data.rstrip(b"\x00").endswith(b"\xff\xd9"):
                    raise LogoInvalid("not a readable PNG or JPEG image")
            with Image.open(io.BytesIO(data)) as image:
                image.load()  # decodes it all: a corrupt file fails here
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise LogoInvalid(f"at most {MAX_SIDE} × {MAX_SIDE} pixels") from None
    except LogoInvalid:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        raise LogoInvalid("not a readable PNG or JPEG image") from None
    return FORMATS[sniffed][0], width, height


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
