"""Currencies and money: which currencies the shop sells in, the one default, and how an
amount in minor units reads (``4900`` EUR -> ``"€49.00"``)."""

from __future__ import annotations

import collections
import re

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from cmsshop.content import kept_per_version
from cmsshop.errors import ApiError, Conflict, NotFound, ValidationFailed
from cmsshop.models import Currency

CURRENCY_CODE = re.compile(r"^[A-Z]{3}\Z")
MAX_DECIMALS = 4


def parse_currency_code(raw: str | None, name: str = "currency") -> str | None:
    """A three-letter code (any case) upper-cased, or a 422."""
    if raw is None:
        return None
    if len(raw) != 3 or not raw.isascii() or not raw.isalpha():
        raise ValidationFailed({name: "a three-letter ISO 4217 code, e.g. EUR"})
    return raw.upper()


def format_amount(amount: int, symbol: str, decimals: int) -> str:
    """``4900, "€", 2`` -> ``"€49.00"``; integer arithmetic only, never a float."""
    sign = "-" if amount < 0 else ""
    if decimals <= 0:
        return f"{sign}{symbol}{abs(amount)}"
    whole, fraction = divmod(abs(amount), 10**decimals)
    return f"{sign}{symbol}{whole}.{fraction:0{decimals}d}"


def amount_text(session: Session, amount: int, currency: str) -> str:
    """``amount`` of ``currency`` as the shop writes it (``"€49.00"``), or ``"EUR 4900"``
    for a currency the shop does not sell in."""
    row = session.get(Currency, currency)
    if row is None:
        return f"{currency} {amount}"
    return format_amount(amount, row.symbol, row.decimals)


# An amount as a person types it: digits, then optionally a point and some decimals.
MAJOR_AMOUNT = re.compile(r"^([0-9]{1,15})(?:\.([0-9]*))?\Z")


def parse_major_amount(raw: str, decimals: int) -> int:
    """``"49.5"`` with 2 decimals -> ``4950``: a price typed in major units, converted
    exactly (string and integer arithmetic, never a float). ValueError says why not:
    a sign, a comma, letters, or more decimals than the currency has."""
    match = MAJOR_AMOUNT.match(raw.strip())
    if match is None:
        example = "49" if decimals <= 0 else "49." + "0" * decimals
        raise ValueError(f"an amount such as {example} (digits and a point, no sign)")
    whole, fraction = match.group(1), (match.group(2) or "").rstrip("0")
    if len(fraction) > decimals:
        raise ValueError("no decimals allowed" if decimals <= 0 else f"at most {decimals} decimals")
    return int(whole) * 10**decimals + (int(fraction.ljust(decimals, "0")) if decimals else 0)


def major_amount_text(amount: int, decimals: int) -> str:
    """``4950`` with 2 decimals -> ``"49.50"``: what :func:`parse_major_amount` reads."""
    return format_amount(amount, "", decimals)


def list_currencies(session: Session, *, enabled_only: bool) -> list[Currency]:
    stmt = select(Currency).order_by(Currency.is_default.desc(), Currency.code)
    if enabled_only:
        stmt = stmt.where(Currency.enabled.is_(True))
    return list(session.scalars(stmt))


CurrencyChoice = collections.namedtuple("CurrencyChoice", "code name symbol decimals")


def kept_enabled_currencies(session: Session) -> tuple[CurrencyChoice, ...]:
    """The enabled currencies as :func:`list_currencies` orders them, for a page's
    currency picker: kept per content version (currencies bump it, migration 0017)."""
    return kept_per_version(
        session,
        ("enabled currencies",),
        lambda: tuple(
            CurrencyChoice(c.code, c.name, c.symbol, c.decimals)
            for c in list_currencies(session, enabled_only=True)
        ),
    )


def currency_not_offered(code: str) -> ValidationFailed:
    """The 422 of a ``currency`` parameter naming no enabled currency."""
    return ValidationFailed(
        {"currency": f"{code} is not a currency of this shop"},
        hints=["GET /api/store/currencies lists the currencies on offer."],
    )


def require_enabled_currency(session: Session, code: str) -> Currency:
    currency = session.get(Currency, code)
    if currency is None or not currency.enabled:
        raise currency_not_offered(code)
    return currency


def find_currency(session: Session, code: str) -> Currency:
    currency = session.get(Currency, code) if CURRENCY_CODE.match(code) else None
    if currency is None:
        raise NotFound(f"There is no currency {code!r}.", code="currency_not_found")
    return currency


def lock_currencies(session: Session) -> None:
    """Lock every currency row, in code order (so two admins cannot deadlock).

    The table is tiny and changes rarely. Serialising its changes means a check such as
    "is this the default?" and the "unset the old default" UPDATE see what the previous
    change committed, instead of racing it into the unique index (PostgreSQL; SQLite
    serialises writers anyway and ignores FOR UPDATE).
    """
    session.execute(select(Currency.code).order_by(Currency.code).with_for_update())


def default_currency(session: Session) -> str | None:
    """The code of the enabled default currency, if there is one."""
    return session.scalar(
        select(Currency.code).where(Currency.is_default.is_(True), Currency.enabled.is_(True))
    )


def _currency_is_default_error(code: str, action: str) -> ApiError:
    return Conflict(
        f"{code} is the default currency and cannot be {action}.",
        code="currency_is_default",
        title="Default currency",
        hints=["Make another enabled currency the default first (PATCH it with default: true)."],
    )


def _make_default(session: Session, currency: Currency) -> None:
    """Unset the old default with one UPDATE before setting the new one: the partial
    unique index allows one default at a time, and the unit of work would otherwise be
    free to order the two row updates either way."""
    session.execute(
        update(Currency)
        .where(Currency.is_default.is_(True), Currency.code != currency.code)
        .values(is_default=False)
        .execution_options(synchronize_session="fetch")
    )
    currency.is_default = True


def create_currency(session: Session, data: dict) -> Currency:
    if data["default"]:
        lock_currencies(session)
    if session.get(Currency, data["code"]) is not None:
        raise Conflict(
            f"The currency {data['code']} exists already.",
            code="currency_exists",
            title="Currency exists",
            hints=[f"PATCH /api/admin/currencies/{data['code']} to change it."],
        )
    if data["default"] and not data["enabled"]:
        raise Conflict(
            "The default currency must be enabled.",
            code="currency_disabled",
            title="Currency disabled",
            hints=["Send enabled: true with default: true."],
        )
    currency = Currency(
        code=data["code"],
        name=data["name"],
        symbol=data["symbol"],
        decimals=data["decimals"],
        enabled=data["enabled"],
        is_default=False,
    )
    session.add(currency)
    session.flush()
    if data["default"]:
        _make_default(session, currency)
        session.flush()
    return currency


def update_currency(session: Session, code: str, changes: dict) -> Currency:
    """Apply a validated PATCH to the currency ``code`` (404 if there is none)."""
    if CURRENCY_CODE.match(code):
        lock_currencies(session)
    currency = find_currency(session, code)
    session.refresh(currency)  # the committed state, now that it is locked
    enabled = changes.get("enabled", currency.enabled)
    default = changes.get("default", currency.is_default)
    if currency.is_default and changes.get("enabled") is False:
        raise _currency_is_default_error(currency.code, "disabled")
    if currency.is_default and changes.get("default") is False:
        raise _currency_is_default_error(currency.code, "unset")
    if default and not enabled:
        raise Conflict(
            f"{currency.code} is disabled; only an enabled currency can be the default.",
            code="currency_disabled",
            title="Currency disabled",
            hints=["Send enabled: true together with default: true."],
        )
    for key in ("name", "symbol"):
        if key in changes:
            setattr(currency, key, changes[key])
    currency.enabled = enabled
    if default and not currency.is_default:
        _make_default(session, currency)
    session.flush()
    return currency
