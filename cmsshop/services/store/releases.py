"""Release files: streamed to disk with their SHA-256 and size, stored under paths the
server chooses.

A client's file name is only ever *displayed* (after :func:`display_file_name`); the
storage path is ``releases/<product id>/<random hex>``, so no name -- ``../../etc/passwd``,
an absolute path, NUL bytes, a 10 kB name -- can steer where the bytes land. Bytes are
written to a temporary file inside the storage directory (same file system, so the final
``os.replace`` is atomic) and counted while they arrive, so an oversized upload stops at
the limit instead of filling the disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import tempfile
import unicodedata
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from cmsshop.errors import Conflict, PayloadTooLarge, ValidationFailed
from cmsshop.models import RELEASE_CHANNELS, Product, Release
from cmsshop.services.docs.markdown import render_markdown
from cmsshop.services.store.text import text_problem
from cmsshop.services.store.versions import BadVersion, parse_version
from cmsshop.util import utcnow

RELEASES_DIR = "releases"
INCOMING_DIR = os.path.join(RELEASES_DIR, ".incoming")
VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+_-]{0,49}\Z")
MAX_FILE_NAME = 255
_UNSAFE_NAME_CHARS = re.compile(r"[^\w.+\- ()\[\]]", re.UNICODE)


def display_file_name(raw: str | None, fallback: str) -> str:
    """A file name safe to show and to put in a Content-Disposition header.

    Only the last path component is kept (``/`` and ``\\`` both count), control
    characters and anything outside letters, digits and ``.+-_ ()[]`` become ``_``,
    leading dots go (no hidden files), and the result is cut to 255 characters keeping
    the extension.
    """
    name = unicodedata.normalize("NFC", raw or "")
    name = re.split(r"[/\\]", name)[-1]
    name = _UNSAFE_NAME_CHARS.sub("_", name)
    name = re.sub(r"_{2,}", "_", name).strip(" ._")
    if not name:
        name = fallback
    if len(name) > MAX_FILE_NAME:
        stem, dot, extension = name.rpartition(".")
        if dot and 0 < len(extension) <= 16:
            name = stem[: MAX_FILE_NAME - len(extension) - 1] + "." + extension
        else:
            name = name[:MAX_FILE_NAME]
    return name


MAX_CHANGELOG = 20_000  # characters of Markdown


def check_channel(channel: str | None) -> str:
    """The release channel (``stable`` when not given)."""
    if channel is None or channel == "":
        return "stable"
    if channel not in RELEASE_CHANNELS:
        raise ValidationFailed({"channel": "one of: " + ", ".join(RELEASE_CHANNELS)})
    return channel


def check_changelog(changelog: str | None) -> str:
    """The changelog's Markdown source: real text (no NUL), at most MAX_CHANGELOG."""
    changelog = changelog or ""
    if len(changelog) > MAX_CHANGELOG:
        raise ValidationFailed({"changelog": f"at most {MAX_CHANGELOG} characters"})
    problem = text_problem(changelog, multiline=True) if changelog else None
    if problem:
        raise ValidationFailed({"changelog": problem})
    return changelog


def check_version(version: str | None, scheme: str = "pep440") -> str:
    """A version of the product's scheme (services/store/versions.py), as sent."""
    if version is None:
        raise ValidationFailed({"version": "required"})
    if not VERSION.match(version):
        raise ValidationFailed(
            {"version": "1-50 characters: letters, digits and . + _ -, starting alphanumeric"}
        )
    try:
        parse_version(scheme, version)
    except BadVersion as exc:
        raise ValidationFailed({"version": str(exc)}) from None
    return version


# A minimum requirement or "tested up to": a plain dotted number such as 6.4 or 8.1.2.
REQUIREMENT = re.compile(r"^[0-9]{1,6}(\.[0-9]{1,6}){0,3}\Z")
REQUIREMENT_FIELDS = {"requires": "requires", "requiresPhp": "requires_php", "tested": "tested"}


def check_requirement(name: str, value: str | None) -> str | None:
    """An optional requirement (None when not given)."""
    if value is None or value == "":
        return None
    if not REQUIREMENT.match(value):
        raise ValidationFailed({name: "a version number such as 6.4 or 8.1.2"})
    return value


class ReleaseWriter:
    """Receives an upload chunk by chunk; :meth:`store` moves it to its final path."""

    def __init__(self, storage_dir: str, max_bytes: int):
        self.storage_dir = os.path.realpath(storage_dir)
        self.max_bytes = max_bytes
        self.size = 0
        self._hash = hashlib.sha256()
        incoming = os.path.join(self.storage_dir, INCOMING_DIR)
        os.makedirs(incoming, exist_ok=True)
        fd, self.temp_path = tempfile.mkstemp(dir=incoming, prefix="upload-")
        self._file = os.fdopen(fd, "wb")

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise PayloadTooLarge(
                f"The file is larger than the limit of {self.max_bytes} bytes.",
                hints=["Operators: raise cmsshop.max_upload_bytes to accept larger releases."],
            )
        self._hash.update(chunk)
        self._file.write(chunk)

    def store(self, product_id: int) -> str:
        """Move the finished file into place; returns its path relative to storage_dir."""
        self._file.close()
        relative = os.path.join(RELEASES_DIR, str(int(product_id)), secrets.token_hex(16))
        target = os.path.join(self.storage_dir, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(self.temp_path, target)
        self.temp_path = None
        return relative

    def discard(self) -> None:
        """Remove the temporary file (idempotent; a stored file is left alone)."""
        if not self._file.closed:
            self._file.close()
        if self.temp_path is not None:
            remove_quietly(self.temp_path)
            self.temp_path = None


def ensure_version_free(session: Session, product: Product, version: str) -> None:
    """409 ``version_exists`` if the product has a release of the same version, compared
    as versions: under PEP 440 ``1.0.0`` is ``1.0``, so it cannot be uploaded twice."""
    wanted = parse_version(product.version_scheme, version)
    existing = [
        other
        for other in session.scalars(
            select(Release.version).where(Release.product_id == product.id)
        )
        if other == version or _same_version(product.version_scheme, other, wanted)
    ]
    if existing:
        if existing[0] != version:
            version = f"{version} (the same version as {existing[0]})"
        raise Conflict(
            f"{product.slug} already has a release {version}.",
            code="version_exists",
            title="Version exists",
            hints=["Releases are immutable; upload it under a new version number."],
        )


def _same_version(scheme: str, text: str, wanted) -> bool:
    try:
        return parse_version(scheme, text) == wanted
    except BadVersion:
        return False


def add_release(
    session: Session,
    product: Product,
    *,
    version: str,
    file_name: str,
    upload: ReleaseWriter,
    channel: str = "stable",
    changelog: str = "",
    requirements: dict[str, str | None] | None = None,
) -> Release:
    """Record the uploaded file as ``version`` of ``product``.

    A failing flush removes the stored file here; the caller removes it if the
    transaction does not commit later (see :func:`absolute_paths`). Two uploads of the same version
    racing past the check meet the (product_id, version) unique constraint; the loser is
    retried and answered 409.
    """
    ensure_version_free(session, product, version)
    relative = upload.store(product.id)
    now = utcnow()
    release = Release(
        product_id=product.id,
        version=version,
        file_name=file_name,
        storage_path=relative,
        size=upload.size,
        sha256=upload.sha256,
        released_at=now,
        channel=channel,
        changelog=changelog,
        changelog_html=render_markdown(changelog) if changelog else "",
        **(requirements or {}),
    )
    try:
        session.add(release)
        product.updated_at = now
        session.flush()
    except BaseException:
        # E.g. the unique (product_id, version) of a racing upload: this attempt's file
        # must not outlive it (the retry stores its own, or answers 409).
        remove_quietly(*absolute_paths(upload.storage_dir, [relative]))
        raise
    return release


def absolute_paths(storage_dir: str, relative_paths: Iterable[str]) -> list[str]:
    """Absolute paths of stored files, keeping only those inside ``storage_dir``."""
    root = os.path.realpath(storage_dir)
    result = []
    for relative in relative_paths:
        path = os.path.realpath(os.path.join(root, relative))
        if path.startswith(root + os.sep):
            result.append(path)
    return result


def remove_quietly(*paths: str) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
