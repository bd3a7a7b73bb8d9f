"""Feature flags: names such as ``pro`` or ``support`` that a product grants and a license
carries, signed into every lease as ``lic.features`` so a runtime can switch features on
offline.

One rule for every writer (admin JSON, admin pages, issuing, upgrades): a flag is 1 to
40 characters, lower-case letters, digits and ``_ . -``, starting with a letter or digit;
at most MAX_FEATURES of them; stored sorted and without repeats, so two equal sets are
equal lists (a lease's claims compare equal, see steps.Plan.signs_like).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

MAX_FEATURES = 32
MAX_FEATURE_LENGTH = 40
FEATURE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")


class FeaturesInvalid(ValueError):
    """``errors`` maps the position of each bad entry (or ``""`` for the list) to why."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(errors.values()))
        self.errors = errors


def normalise_features(names: Iterable[Any]) -> list[str]:
    """The sorted, unique flags of ``names``, or FeaturesInvalid naming each bad entry."""
    errors: dict[str, str] = {}
    seen: set[str] = set()
    for index, name in enumerate(names):
        if not isinstance(name, str):
            errors[str(index)] = "must be a string"
        elif not FEATURE_NAME.match(name):
            errors[str(index)] = (
                f"{name[:MAX_FEATURE_LENGTH]!r} is not a feature name: 1-{MAX_FEATURE_LENGTH} "
                "lower-case letters, digits, '_', '.' or '-', starting with a letter or digit"
            )
        else:
            seen.add(name)
    if errors:
        raise FeaturesInvalid(errors)
    if len(seen) > MAX_FEATURES:
        raise FeaturesInvalid({"": f"at most {MAX_FEATURES} features"})
    return sorted(seen)


def parse_feature_text(text: str) -> list[str]:
    """Flags typed into a form field: separated by commas and/or whitespace."""
    return normalise_features(part for part in re.split(r"[\s,]+", text) if part)


def features_of_product(product) -> list[str]:
    """What a new (or upgraded) license of ``product`` carries."""
    return list(product.features or [])


def features_from_db(value: Any) -> tuple[str, ...]:
    """Stored flags as read by plain SQL: JSON text on SQLite, a list on PostgreSQL."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = json.loads(value)
    return tuple(value)
