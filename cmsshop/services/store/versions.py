"""Release versions compared as versions, never as strings, by the product's scheme:

- ``pep440`` (the default): Python's version scheme, by ``packaging`` -- epochs,
  pre/post/dev releases and local versions; ``1.0`` and ``1.0.0`` are the same version.
- ``semver``: Semantic Versioning 2.0.0, by ``semver`` -- exactly MAJOR.MINOR.PATCH, a
  pre-release sorts before its release (``1.0.0-alpha < 1.0.0-alpha.1 < 1.0.0-beta.2 <
  1.0.0-beta.11 < 1.0.0-rc.1 < 1.0.0``), build metadata (``+build.5``) is ignored when
  comparing, so ``1.0.0+a`` and ``1.0.0+b`` are the same version.
"""

from __future__ import annotations

import functools
from typing import Any

import semver
from packaging.version import InvalidVersion, Version

from cmsshop.models import VERSION_SCHEMES

__all__ = ["VERSION_SCHEMES", "BadVersion", "is_version", "parse_version"]


class BadVersion(ValueError):
    """The text is not a version of the scheme."""


@functools.total_ordering
class _SemverKey:
    """A semver version ordered by precedence (build metadata ignored)."""

    def __init__(self, version: semver.Version):
        self.version = version.replace(build=None)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SemverKey) and self.version.compare(other.version) == 0

    def __lt__(self, other: _SemverKey) -> bool:
        return self.version.compare(other.version) < 0

    def __hash__(self) -> int:
        return hash(str(self.version))


def parse_version(scheme: str, text: str) -> Any:
    """A key ordered as the scheme orders versions (== for equal versions)."""
    if scheme == "semver":
        try:
            return _SemverKey(semver.Version.parse(text))
        except (ValueError, TypeError):
            raise BadVersion(
                f"{text!r} is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.4.0 or 2.0.0-rc.1)"
            ) from None
    if scheme == "pep440":
        try:
            return Version(text)
        except InvalidVersion:
            raise BadVersion(
                f"{text!r} is not a PEP 440 version (e.g. 1.4, 2.0.1, 2.1rc1, 1.0.post2)"
            ) from None
    raise ValueError(f"unknown version scheme {scheme!r}")


def is_version(scheme: str, text: str) -> bool:
    try:
        parse_version(scheme, text)
    except BadVersion:
        return False
    return True
