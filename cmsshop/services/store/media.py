"""Product images: checked, resized once, kept in ``media_files``, served by content hash.

An upload is recognised from its bytes (PNG, JPEG or WebP; never from its name or the
browser's content type), held to ``MAX_BYTES`` and ``MAX_PIXELS``, and decoded in full
by Pillow before anything is kept, so a truncated file or a decompression bomb is
refused. So is a file that is more than a picture: bytes after the image's end (a
polyglot: an image that is also HTML, a ZIP or a script) or metadata over
``MAX_METADATA``. What is kept is never the upload: every rendition is drawn again from
the decoded pixels (orientation applied; EXIF, colour profiles and comments dropped), so
whatever an accepted file carried besides its pixels is not served either.

Each image gets the sizes the pages use (``SIZES``): a WebP and a fallback for browsers
without WebP (JPEG, or PNG when the image has transparency). A rendition's key is
``<sha256 of its bytes>.<ext>``: /media/<key> names its content, so it is cached for good.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from PIL import Image, ImageOps, UnidentifiedImageError
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from cmsshop.errors import NotFound, PayloadTooLarge, ValidationFailed
from cmsshop.models import MediaFile, Product, ProductImage
from cmsshop.util import format_filesize

MAX_BYTES = 10_000_000  # 10 MB, in the decimal units the pages show sizes in
MAX_SIDE = 6000
MAX_PIXELS = 24_000_000
# Camera metadata (EXIF with its thumbnail, a colour profile, XMP) rarely passes 100 KB;
# more is a file made to carry something else, and is refused rather than stripped.
MAX_METADATA = 256 * 1024
MAX_ALT = 300
MAX_IMAGES = 20
# What a real PNG, JPEG or WebP starts with (WebP: RIFF, a size, then WEBP).
SIGNATURES = {b"\x89PNG\r\n\x1a\n": "PNG", b"\xff\xd8\xff": "JPEG"}
DISPLAY_NAMES = {"WEBP": "WebP"}
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp"}
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}
CONTENT_TYPES = {ext: content_type for content_type, ext in EXTENSIONS.items()}
# name -> (width, height or None to keep the aspect ratio): the product card, the
# product page, and the 1.91:1 picture link previews (og:image) show.
SIZES = {"card": (480, None), "page": (1200, None), "og": (1200, 630)}
WEBP_QUALITY = 82
JPEG_QUALITY = 85


class ImageInvalid(Exception):
    """Why an upload is refused, in words for the seller."""


def sniff_format(data: bytes, accepted: Iterable[str]) -> str | None:
    """The format the bytes start like (``PNG``, ``JPEG``, ``WEBP``), if it is accepted."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        found = "WEBP"
    else:
        found = next((fmt for sig, fmt in SIGNATURES.items() if data.startswith(sig)), None)
    return found if found in set(accepted) else None


PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"


def _truncated(data: bytes, fmt: str, image: Image.Image) -> bool:
    """Whether the file stops before its image does. WeasyPrint sets Pillow's
    process-wide LOAD_TRUNCATED_IMAGES when it is imported, after which ``load()`` pads a
    truncated file instead of failing, so completeness is checked without it."""
    if fmt == "PNG":
        image.verify()  # every chunk's CRC up to IEND; raises when one is missing
        return False
    if fmt == "JPEG":
        return b"\xff\xd9" not in data[-1024:]
    # WebP: the RIFF header states the size of what follows it.
    return int.from_bytes(data[4:8], "little") + 8 > len(data)


def _carries_more(data: bytes, fmt: str) -> bool:
    """Whether bytes follow the image's own end (a polyglot: an image that is also an
    HTML page, a script or a ZIP archive). A picture from a camera or an editor never
    has any, so such a file is refused, not trimmed."""
    if fmt == "PNG":
        return not data.endswith(PNG_END)
    if fmt == "JPEG":
        return not data.rstrip(b"\x00").endswith(b"\xff\xd9")
    return int.from_bytes(data[4:8], "little") + 8 != len(data)


def _metadata_size(image: Image.Image) -> int:
    """Bytes of metadata: a JPEG's APPn segments and comment, or the text, EXIF, XMP and
    colour-profile chunks of a PNG or WebP."""
    applist = getattr(image, "applist", None)
    if applist is not None:
        return sum(len(payload) for _marker, payload in applist) + len(
            image.info.get("comment", b"")
        )
    return sum(len(value) for value in image.info.values() if isinstance(value, bytes | str))


def check_image(
    data: bytes,
    *,
    formats: Sequence[str],
    max_bytes: int,
    max_side: int,
    max_pixels: int,
) -> tuple[str, int, int]:
    """(Pillow format, width, height) of an image we accept; ImageInvalid otherwise.

    The one check of uploaded pictures (product images here, the shop's logo in
    services/tax/logo.py): sniffed from the bytes, size and pixel limits before decoding,
    decompression bombs refused, completeness checked, then decoded in full."""
    shown = [DISPLAY_NAMES.get(fmt, fmt) for fmt in formats]
    names = " and ".join(", ".join(shown).rsplit(", ", 1))
    if not data:
        raise ImageInvalid(f"choose a {' or '.join(shown)} file")
    if len(data) > max_bytes:
        raise ImageInvalid(f"at most {format_filesize(max_bytes)}")
    sniffed = sniff_format(data, formats)
    if sniffed is None:
        raise ImageInvalid(f"only {names} images")
    unreadable = f"not a readable {' or '.join(shown)} image"
    too_big = f"at most {max_side} × {max_side} pixels"
    try:
        with warnings.catch_warnings():
            # Pillow warns between MAX_IMAGE_PIXELS and twice it; we refuse both.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                if image.format != sniffed:
                    raise ImageInvalid(f"only {names} images")
                width, height = image.size
                if width * height > max_pixels or max(width, height) > max_side:
                    raise ImageInvalid(too_big)
                if getattr(image, "n_frames", 1) > 1:
                    raise ImageInvalid("a still image, not an animation")
                if _metadata_size(image) > MAX_METADATA:
                    raise ImageInvalid(
                        f"its metadata is over {format_filesize(MAX_METADATA)}: "
                        "export the picture without it"
                    )
                if _truncated(data, sniffed, image):
                    raise ImageInvalid(unreadable)
                if _carries_more(data, sniffed):
                    raise ImageInvalid("the file holds more than a picture")
            with Image.open(io.BytesIO(data)) as image:
                image.load()  # decodes it all: a corrupt file fails here
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ImageInvalid(too_big) from None
    except ImageInvalid:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError):
        raise ImageInvalid(unreadable) from None
    return sniffed, width, height


# --- renditions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Rendition:
    content_type: str
    data: bytes
    width: int
    height: int

    @property
    def key(self) -> str:
        return f"{hashlib.sha256(self.data).hexdigest()}.{EXTENSIONS[self.content_type]}"


def _pixels(data: bytes) -> Image.Image:
    """The decoded picture the right way up, as RGB or RGBA, with no metadata."""
    with Image.open(io.BytesIO(data)) as opened:
        image = ImageOps.exif_transpose(opened)
        has_alpha = image.mode in ("RGBA", "LA", "PA") or (
            image.mode == "P" and "transparency" in image.info
        )
        if has_alpha:
            image = image.convert("RGBA")
            # Fully opaque "transparency" is no transparency: a JPEG fallback is smaller.
            if image.getchannel("A").getextrema()[0] == 255:
                image = image.convert("RGB")
        else:
            image = image.convert("RGB")
    # A fresh image holds pixels only: no EXIF, ICC profile, XMP or text chunks to copy.
    clean = Image.new(image.mode, image.size)
    clean.paste(image)
    return clean


def _resize(image: Image.Image, width: int, height: int | None) -> Image.Image:
    if height is None:
        if image.width <= width:
            return image.copy()  # never enlarged: a small picture stays sharp
        return image.resize(
            (width, max(1, round(image.height * width / image.width))), Image.Resampling.LANCZOS
        )
    return ImageOps.fit(image, (width, height), Image.Resampling.LANCZOS)


def _encode(image: Image.Image, fmt: str) -> Rendition:
    out = io.BytesIO()
    if fmt == "WEBP":
        image.save(out, "WEBP", quality=WEBP_QUALITY, method=4)
    elif fmt == "PNG":
        image.save(out, "PNG", optimize=True)
    else:
        image.save(out, "JPEG", quality=JPEG_QUALITY, optimize=True, progressive=True)
    return Rendition(FORMATS[fmt], out.getvalue(), image.width, image.height)


def render_sizes(data: bytes) -> tuple[int, int, dict[str, list[Rendition]]]:
    """(width, height, {size: [webp, fallback]}) of an image ``check_image`` accepted."""
    image = _pixels(data)
    fallback = "PNG" if image.mode == "RGBA" else "JPEG"
    sizes = {}
    for name, (width, height) in SIZES.items():
        resized = _resize(image, width, height)
        # og:image previews are drawn on an opaque background by every site that shows them.
        if name == "og" and resized.mode == "RGBA":
            flat = Image.new("RGB", resized.size, (255, 255, 255))
            flat.paste(resized, mask=resized.getchannel("A"))
            resized = flat
        sizes[name] = [
            _encode(resized, "WEBP"),
            _encode(resized, "JPEG" if resized.mode == "RGB" else fallback),
        ]
    return image.width, image.height, sizes


# --- product images ---------------------------------------------------------------------


def check_alt(alt: str) -> str:
    """The seller's alt text, trimmed; required, because a picture nobody can read is
    worse than none for a buyer using a screen reader."""
    alt = " ".join((alt or "").split())
    if not alt:
        raise ValidationFailed({"alt": "describe the picture for people who cannot see it"})
    if len(alt) > MAX_ALT:
        raise ValidationFailed({"alt": f"at most {MAX_ALT} characters"})
    if any(ord(ch) < 32 or 0xD800 <= ord(ch) <= 0xDFFF for ch in alt):
        raise ValidationFailed({"alt": "no control characters"})
    return alt


def _store(session: Session, rendition: Rendition, image: ProductImage, kept: set) -> str:
    key = rendition.key
    # A small picture's sizes can be the same bytes, and the same picture uploaded to two
    # products gives the same renditions: one row serves them all.
    if key not in kept and session.get(MediaFile, key) is None:
        session.add(
            MediaFile(
                key=key,
                content_type=rendition.content_type,
                data=rendition.data,
                width=rendition.width,
                height=rendition.height,
                image_id=image.id,
            )
        )
    kept.add(key)
    return key


def add_image(session: Session, product: Product, data: bytes, alt: str) -> ProductImage:
    """Check ``data``, draw its renditions and add it last among the product's images."""
    alt = check_alt(alt)
    if len(data) > MAX_BYTES:
        raise PayloadTooLarge(
            f"An image may be at most {format_filesize(MAX_BYTES)}.",
            hints=["Export it smaller: 2400 pixels wide is plenty for the shop's pages."],
        )
    try:
        check_image(
            data,
            formats=("PNG", "JPEG", "WEBP"),
            max_bytes=MAX_BYTES,
            max_side=MAX_SIDE,
            max_pixels=MAX_PIXELS,
        )
    except ImageInvalid as exc:
        raise ValidationFailed({"file": str(exc)}) from None
    digest = hashlib.sha256(data).hexdigest()
    if any(image.source_sha256 == digest for image in product.images):
        raise ValidationFailed({"file": "this picture is already one of the product's images"})
    if len(product.images) >= MAX_IMAGES:
        raise ValidationFailed({"file": f"at most {MAX_IMAGES} images per product"})
    width, height, sizes = render_sizes(data)
    last = max((image.position for image in product.images), default=-1)
    image = ProductImage(
        product_id=product.id,
        position=last + 1,
        alt=alt,
        source_sha256=digest,
        width=width,
        height=height,
        variants={},
    )
    session.add(image)
    session.flush()
    variants, kept = {}, set()
    for name, (webp, fallback) in sizes.items():
        variants[name] = {
            "webp": _store(session, webp, image, kept),
            EXTENSIONS[fallback.content_type].replace("jpg", "jpeg"): _store(
                session, fallback, image, kept
            ),
            "width": fallback.width,
            "height": fallback.height,
        }
    image.variants = variants
    session.flush()
    session.refresh(product, ["images"])
    return image


def find_image(session: Session, product: Product, image_id) -> ProductImage:
    image = None
    if isinstance(image_id, int) or (isinstance(image_id, str) and image_id.isdigit()):
        image = session.get(ProductImage, int(image_id))
    if image is None or image.product_id != product.id:
        raise NotFound("The product has no such image.", code="image_not_found")
    return image


def _renumber(images: list[ProductImage]) -> None:
    for position, image in enumerate(images):
        image.position = position


def move_image(session: Session, product: Product, image: ProductImage, position: int) -> None:
    """Put ``image`` at ``position`` (0: first, the card and sharing picture), clamped."""
    images = [other for other in product.images if other.id != image.id]
    images.insert(max(0, min(position, len(images))), image)
    _renumber(images)
    session.flush()
    session.refresh(product, ["images"])


def set_alt(session: Session, image: ProductImage, alt: str) -> None:
    image.alt = check_alt(alt)
    session.flush()


def delete_image(session: Session, product: Product, image: ProductImage) -> None:
    """Delete ``image`` and its renditions (those another product's same picture still
    uses are handed to that image instead)."""
    heir = session.scalar(
        select(ProductImage.id)
        .where(ProductImage.source_sha256 == image.source_sha256, ProductImage.id != image.id)
        .limit(1)
    )
    if heir is not None:
        session.execute(
            update(MediaFile).where(MediaFile.image_id == image.id).values(image_id=heir)
        )
    product.images.remove(image)
    session.delete(image)
    session.flush()
    _renumber(list(product.images))
    session.flush()


def first_images(session: Session, product_ids: Sequence[int]) -> dict[int, ProductImage]:
    """The first image of each of ``product_ids`` (the card's), in one statement."""
    if not product_ids:
        return {}
    first = (
        select(ProductImage.product_id, func.min(ProductImage.position).label("position"))
        .where(ProductImage.product_id.in_(list(product_ids)))
        .group_by(ProductImage.product_id)
        .subquery()
    )
    rows = session.scalars(
        select(ProductImage)
        .join(
            first,
            (ProductImage.product_id == first.c.product_id)
            & (ProductImage.position == first.c.position),
        )
        .order_by(ProductImage.id)
    )
    found: dict[int, ProductImage] = {}
    for image in rows:
        found.setdefault(image.product_id, image)
    return found


def images_of(session: Session, product_id: int) -> list[ProductImage]:
    return list(
        session.scalars(
            select(ProductImage)
            .where(ProductImage.product_id == product_id)
            .order_by(ProductImage.position, ProductImage.id)
        )
    )


def read_media(session: Session, key: str) -> MediaFile | None:
    """The stored rendition ``key`` (``<64 hex>.<ext>``), or None."""
    name, _, ext = key.partition(".")
    if (
        len(name) != 64
        or ext not in CONTENT_TYPES
        or not all(c in "0123456789abcdef" for c in name)
    ):
        return None
    return session.get(MediaFile, key)


def media_url(key: str) -> str:
    return f"/media/{key}"


def fallback_key(variant: dict) -> str:
    """The JPEG (or PNG) rendition of a size, for browsers without WebP."""
    return variant.get("jpeg") or variant["png"]
