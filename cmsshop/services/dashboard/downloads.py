"""Signed download tokens and file delivery (streamed here, or by the front web server).

A download URL carries a token instead of relying on the session cookie, so download
managers and ``curl`` can fetch it. The token is

    base64url(payload) "." base64url(HMAC-SHA256(key, base64url(payload)))

where payload = version, entitlement id, release id, expiry (unix seconds) and a random
16-byte nonce (so every call hands out a different URL). The key is derived from
``cmsshop.secret`` with HKDF under a purpose label, never the raw secret: a token can
never double as a CSRF token or any other MAC the secret is used for.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import email.utils
import hashlib
import hmac
import logging
import os
import posixpath
import re
import secrets
import struct
import time
from urllib.parse import quote

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pyramid.response import Response
from zope.interface import Interface, implementer

from cmsshop.errors import ApiError
from cmsshop.models import Release

log = logging.getLogger(__name__)

TOKEN_VERSION = 1
KEY_PURPOSE = b"cmsshop/download-token/v1"
# version, entitlement id, release id, expiry (unix seconds), nonce
_PAYLOAD = struct.Struct(">BQQQ16s")
_B64URL = re.compile(r"^[A-Za-z0-9_-]+$")
# The real tokens are 99 characters; anything much longer is not worth decoding.
MAX_TOKEN_LENGTH = 200
CHUNK_SIZE = 256 * 1024
DOWNLOAD_CONTENT_TYPE = "application/octet-stream"


# --- errors ------------------------------------------------------------------------------


class InvalidDownloadToken(ApiError):
    code = "invalid_download_token"
    message = "This download link is not valid."
    hints = ("Copy the whole link, or ask your dashboard for a new one.",)


class DownloadLinkExpired(ApiError):
    code = "download_link_expired"
    message = "This download link has expired."
    hints = ("Download links are short-lived; get a fresh one from your dashboard.",)


class DownloadNotFound(ApiError):
    code = "download_not_found"
    message = "No such download in your account."


class DownloadRevoked(ApiError):
    code = "download_revoked"
    message = "This purchase was refunded or revoked; its downloads are no longer available."
    hints = ("Contact support if you think this is a mistake.",)


class DownloadOnHold(ApiError):
    code = "download_on_hold"
    message = "Downloads for this purchase are paused while a payment question is resolved."
    hints = ("Contact support with your order number.",)


class ReleaseNotAvailable(ApiError):
    code = "release_not_available"
    message = "This product has no downloadable release yet."


class RangeNotSatisfiable(ApiError):
    code = "range_not_satisfiable"
    message = "The requested byte range lies outside the file."

    def __init__(self, size: int):
        super().__init__(
            f"The requested byte range lies outside the file ({size} bytes).",
            headers={"Content-Range": f"bytes */{size}"},
            hints=[f"Ask for a range within bytes 0-{max(size - 1, 0)}."],
        )


class DownloadFileMissing(ApiError):
    code = "download_file_missing"
    message = "The file of this release is missing on the server; support has the details."
    hints = ("Try again later; if it persists, send us the support code.",)


# --- tokens ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DownloadClaims:
    entitlement_id: int
    release_id: int
    expires: int  # unix seconds

    @property
    def expires_at(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.expires, dt.UTC)


def derive_token_key(secret: str) -> bytes:
    """The download-token key: HKDF-SHA256 of the server secret under a purpose label."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=KEY_PURPOSE).derive(
        secret.encode()
    )


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class DownloadTokenSigner:
    """Signs and verifies download tokens; one instance per app, a service found with
    ``request.find_service(DownloadTokenSigner)``."""

    def __init__(self, secret: str, ttl: int):
        if ttl < 1:
            raise ValueError("the download URL lifetime must be at least 1 second")
        self._key = derive_token_key(secret)
        self.ttl = ttl

    def _mac(self, encoded_payload: str) -> str:
        digest = hmac.new(self._key, encoded_payload.encode("ascii"), hashlib.sha256).digest()
        return _b64encode(digest)

    def sign(
        self, entitlement_id: int, release_id: int, now: float | None = None
    ) -> tuple[str, DownloadClaims]:
        """A new token for the file; ``now`` lets callers sign for another moment."""
        expires = int(now if now is not None else time.time()) + self.ttl
        payload = _PAYLOAD.pack(
            TOKEN_VERSION, entitlement_id, release_id, expires, secrets.token_bytes(16)
        )
        encoded = _b64encode(payload)
        claims = DownloadClaims(entitlement_id, release_id, expires)
        return f"{encoded}.{self._mac(encoded)}", claims

    def verify(self, token: str, now: float | None = None) -> DownloadClaims:
        """The claims of a genuine, unexpired token.

        Raises InvalidDownloadToken (tampered, truncated, not ours) or DownloadLinkExpired.
        The signature is checked first, in constant time, so nothing about an unsigned
        payload is ever trusted. Signatures are compared as base64 text, not decoded
        bytes: a variant spelling that decodes to the same bytes (the spare bits of the
        last character) is refused like any other change.
        """
        if not isinstance(token, str) or len(token) > MAX_TOKEN_LENGTH or token.count(".") != 1:
            raise InvalidDownloadToken()
        encoded, signature = token.split(".")
        if not _B64URL.match(encoded) or not _B64URL.match(signature):
            raise InvalidDownloadToken()
        if not hmac.compare_digest(self._mac(encoded), signature):
            raise InvalidDownloadToken()
        try:
            payload = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            version, entitlement_id, release_id, expires, _nonce = _PAYLOAD.unpack(payload)
        except (ValueError, struct.error):
            raise InvalidDownloadToken() from None
        if version != TOKEN_VERSION:
            raise InvalidDownloadToken()
        if expires <= int(now if now is not None else time.time()):
            raise DownloadLinkExpired()
        return DownloadClaims(entitlement_id, release_id, expires)


# --- byte ranges -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # inclusive, as in Content-Range

    @property
    def length(self) -> int:
        return self.end - self.start + 1


_SINGLE_RANGE = re.compile(r"^\s*bytes\s*=\s*([0-9]*)\s*-\s*([0-9]*)\s*$", re.IGNORECASE)
# More digits than this (leading zeros aside) is past the end of any file we could hold.
MAX_POSITION_DIGITS = 18
PAST_ANY_FILE = 10**MAX_POSITION_DIGITS


def _position(digits: str) -> int:
    """A byte position of a Range header; PAST_ANY_FILE for an over-long one.

    Not ``int(digits)`` on the raw text: Python refuses more than 4300 digits with an
    error, and a client can send thousands.
    """
    digits = digits.lstrip("0") or "0"
    return PAST_ANY_FILE if len(digits) > MAX_POSITION_DIGITS else int(digits)


def parse_range(header: str | None, size: int) -> ByteRange | None:
    """The single byte range of a Range header, or None to send the whole file.

    None also for what RFC 9110 lets a server ignore: other units, a syntax error, or
    several ranges (serving them would need multipart/byteranges, which download
    managers do not use). Raises RangeNotSatisfiable for a well-formed range that lies
    outside the file. A position of any length is well-formed: one beyond 18 digits
    reads as past the end (416 as a first position, "to the end" as a last one, "the
    whole file" as a suffix length).
    """
    if not header:
        return None
    match = _SINGLE_RANGE.match(header)
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # suffix range: the last N bytes
        suffix = _position(last)
        if suffix == 0 or size == 0:
            raise RangeNotSatisfiable(size)
        return ByteRange(max(0, size - suffix), size - 1)
    start = _position(first)
    if last and _position(last) < start:
        return None  # invalid range-spec: ignored, as the RFC says
    if start >= size:
        raise RangeNotSatisfiable(size)
    end = min(_position(last), size - 1) if last else size - 1
    return ByteRange(start, end)


def if_range_matches(if_range: str | None, etag: str, last_modified: dt.datetime) -> bool:
    """Whether a Range may be honoured under If-Range (absent header: yes).

    An entity tag must match our strong ETag exactly; a date must equal Last-Modified.
    Anything else means "the file may have changed": send all of it.
    """
    if not if_range:
        return True
    value = if_range.strip()
    if value.startswith('"'):
        return hmac.compare_digest(value.encode(), etag.encode())
    if value.startswith("W/"):
        return False
    try:
        date = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return False
    if date is None or date.tzinfo is None:
        return False
    return date == last_modified.replace(microsecond=0)


# --- responses ---------------------------------------------------------------------------


def release_etag(release: Release) -> str:
    return f'"{release.sha256}"'


_UNSAFE_NAME_CHARS = re.compile(r'[\x00-\x1f\x7f/\\"]')


def content_disposition(file_name: str) -> str:
    """``attachment`` with an ASCII fallback name and the exact UTF-8 name (RFC 6266)."""
    name = _UNSAFE_NAME_CHARS.sub("_", file_name or "").strip().lstrip(".") or "download"
    fallback = name.encode("ascii", "replace").decode("ascii").replace("?", "_")
    fallback = re.sub(r"[^A-Za-z0-9._ ()+,=@~-]", "_", fallback) or "download"
    value = f'attachment; filename="{fallback}"'
    if fallback != name:
        value += f"; filename*=UTF-8''{quote(name, safe='')}"
    return value


def safe_relative_path(storage_path: str) -> str | None:
    """The release's path inside the storage directory, or None if it tries to leave it."""
    if not storage_path or "\x00" in storage_path:
        return None
    normal = posixpath.normpath(storage_path.replace("\\", "/"))
    if normal.startswith(("/", "../")) or normal in (".", ".."):
        return None
    return normal


class FileRangeIter:
    """Reads ``length`` bytes from ``start`` in bounded chunks; never the whole file.

    ``close()`` (called by every WSGI server, also when the client goes away) closes the
    file even if iteration never started, which a generator's ``finally`` would not.
    """

    def __init__(self, file, start: int, length: int, chunk_size: int = CHUNK_SIZE):
        self.file = file
        self.remaining = length
        self.chunk_size = chunk_size
        file.seek(start)

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        if self.remaining <= 0:
            self.close()
            raise StopIteration
        data = self.file.read(min(self.chunk_size, self.remaining))
        if not data:
            self.close()
            raise StopIteration
        self.remaining -= len(data)
        return data

    def close(self) -> None:
        self.file.close()


@dataclasses.dataclass
class Delivery:
    """The response for a download plus what the download log records."""

    response: Response
    mode: str
    byte_range: ByteRange | None
    content_length: int


class IFileDelivery(Interface):
    """Chosen by ``cmsshop.download_delivery``; views get it with
    ``request.find_service(IFileDelivery)``."""

    def deliver(release, method, range_header, if_range_header):  # noqa: N805
        """Return a Delivery for ``release``."""


def _base_headers(release: Release) -> dict[str, str]:
    return {
        "Content-Disposition": content_disposition(release.file_name),
        "ETag": release_etag(release),
        "Last-Modified": email.utils.format_datetime(
            release.released_at.astimezone(dt.UTC).replace(microsecond=0), usegmt=True
        ),
        # The URL is a bearer credential: keep it and the file out of shared caches.
        "Cache-Control": "private, no-store",
        "X-Content-Type-Options": "nosniff",
    }


@implementer(IFileDelivery)
class StreamDelivery:
    """Streams the file from ``storage_dir`` in chunks, with single-range support."""

    mode = "stream"

    def __init__(self, storage_dir: str, chunk_size: int = CHUNK_SIZE):
        self.storage_dir = os.path.realpath(storage_dir)
        self.chunk_size = chunk_size

    def open_release(self, release: Release):
        relative = safe_relative_path(release.storage_path)
        path = os.path.realpath(os.path.join(self.storage_dir, relative or ""))
        if relative is None or os.path.commonpath([self.storage_dir, path]) != self.storage_dir:
            log.error("release %s has a storage path outside the storage dir", release.id)
            raise DownloadFileMissing()
        try:
            return open(path, "rb")  # noqa: SIM115 - closed by FileRangeIter.close()
        except OSError:
            log.error("release %s: cannot open %s", release.id, path, exc_info=True)
            raise DownloadFileMissing() from None

    def deliver(
        self, release: Release, method: str, range_header: str | None, if_range_header: str | None
    ) -> Delivery:
        file = self.open_release(release)
        try:
            size = os.fstat(file.fileno()).st_size
            if size != release.size:
                log.warning(
                    "release %s: %d bytes on disk, %d recorded", release.id, size, release.size
                )
            headers = _base_headers(release)
            byte_range = None
            if if_range_matches(if_range_header, headers["ETag"], release.released_at):
                byte_range = parse_range(range_header, size)
        except BaseException:
            file.close()
            raise
        response = Response(status=200, content_type=DOWNLOAD_CONTENT_TYPE, charset=None)
        response.headers.update(headers)
        response.headers["Accept-Ranges"] = "bytes"
        start, length = 0, size
        if byte_range is not None:
            response.status = 206
            response.headers["Content-Range"] = f"bytes {byte_range.start}-{byte_range.end}/{size}"
            start, length = byte_range.start, byte_range.length
        if method == "HEAD":
            file.close()
            response.app_iter = []
        else:
            response.app_iter = FileRangeIter(file, start, length, self.chunk_size)
        response.content_length = length
        return Delivery(response, self.mode, byte_range, length)


@implementer(IFileDelivery)
class AccelRedirectDelivery:
    """Hands the transfer to nginx (``X-Accel-Redirect``): the app answers with headers only.

    nginx serves the file from an ``internal`` location mapped to the storage directory
    and handles Range itself; ``prefix`` is that location (e.g. ``/protected-files/``).
    """

    mode = "x-accel-redirect"

    def __init__(self, prefix: str):
        self.prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"

    def deliver(
        self, release: Release, method: str, range_header: str | None, if_range_header: str | None
    ) -> Delivery:
        relative = safe_relative_path(release.storage_path)
        if relative is None:
            log.error("release %s has a storage path outside the storage dir", release.id)
            raise DownloadFileMissing()
        response = Response(status=200, content_type=DOWNLOAD_CONTENT_TYPE, charset=None)
        response.headers.update(_base_headers(release))
        response.headers["X-Accel-Redirect"] = self.prefix + quote(relative)
        response.body = b""
        # Only for the log: nginx decides what it sends.
        try:
            byte_range = parse_range(range_header, release.size)
        except RangeNotSatisfiable:
            byte_range = None
        return Delivery(response, self.mode, byte_range, 0)


def make_file_delivery(settings: dict) -> StreamDelivery | AccelRedirectDelivery:
    mode = settings["cmsshop.download_delivery"]
    if mode == "x-accel-redirect":
        return AccelRedirectDelivery(settings["cmsshop.download_accel_prefix"])
    return StreamDelivery(settings["cmsshop.storage_dir"])
