"""The visitor's cart, kept on the server (models/checkout.py says whose it is).

A cart is created by the first "add to cart" and never by a page view, so anonymous
browsing writes nothing. It belongs to the logged-in customer, or to the anonymous
visitor's cookie token (stored as ``visitor_hash``, a hash of it); at login the
visitor's cart is merged into the customer's (``adopt_visitor_cart``). Anonymous carts
untouched for ``ABANDONED_AFTER`` are deleted now and then by ``open_cart``.

Prices are never stored as what the cart costs: ``view_cart`` prices it from the
database each time. Each line keeps the unit price the buyer was last shown
(``seen_amount``); a product repriced since is shown with its old and new price, one no
longer for sale is shown as such, and checkout waits until the buyer accepted the new
prices (``accept_prices``) or removed the line. The order then keeps the prices the
buyer saw.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import secrets

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from cmsshop.models import Cart, CartLine, Product
from cmsshop.services.checkout import coupons, pricing
from cmsshop.services.checkout.pricing import CheckoutInvalid
from cmsshop.services.licensing.issuing import seats_of
from cmsshop.services.store.currencies import default_currency
from cmsshop.util import utcnow

ABANDONED_AFTER = dt.timedelta(days=30)
# Lines one cart may hold (an order holds as many: orders.MAX_ITEMS).
MAX_LINES = 20


def visitor_hash(cookie_token: str) -> str:
    """What a cart (and a guest order) stores of the visitor's cookie token: a hash
    under its own label, so it never equals a login session's stored id."""
    return hashlib.sha256(b"cmsshop-visitor:" + cookie_token.encode()).hexdigest()


def new_cart_id() -> str:
    return secrets.token_urlsafe(16)


def _owned(user_id: int | None, visitor: str | None):
    if user_id is not None:
        return Cart.user_id == user_id
    return Cart.visitor_hash == visitor


def own_cart(session: Session, *, user_id: int | None, visitor: str | None) -> Cart | None:
    """The caller's cart, if they have one."""
    if user_id is None and visitor is None:
        return None
    return session.scalar(
        select(Cart)
        .where(_owned(user_id, visitor))
        .options(selectinload(Cart.lines).selectinload(CartLine.product))
    )


def find_cart(
    session: Session, cart_id: str, *, user_id: int | None, visitor: str | None
) -> Cart | None:
    """Cart ``cart_id`` if it is the caller's (None for anyone else's: a 404)."""
    cart = own_cart(session, user_id=user_id, visitor=visitor)
    return cart if cart is not None and cart.id == cart_id else None


def open_cart(
    session: Session, *, user_id: int | None, visitor: str | None, currency: str | None = None
) -> tuple[Cart, bool]:
    """The caller's cart, created if they have none: (cart, created)."""
    cart = own_cart(session, user_id=user_id, visitor=visitor)
    if cart is not None:
        return cart, False
    if secrets.randbelow(100) == 0:
        purge_abandoned_carts(session, utcnow())
    now = utcnow()
    cart = Cart(
        id=new_cart_id(),
        user_id=user_id,
        visitor_hash=None if user_id is not None else visitor,
        currency=currency or default_currency(session),
        created_at=now,
        updated_at=now,
    )
    try:
        with session.begin_nested():
            session.add(cart)
    except IntegrityError:  # the same visitor's other request created it first
        cart = own_cart(session, user_id=user_id, visitor=visitor)
        return cart, False
    return cart, True


def purge_abandoned_carts(session: Session, now: dt.datetime) -> int:
    return session.execute(
        delete(Cart).where(Cart.user_id.is_(None), Cart.updated_at < now - ABANDONED_AFTER)
    ).rowcount


def _touch(cart: Cart) -> None:
    cart.updated_at = utcnow()


def _product(session: Session, slug: str) -> Product | None:
    return session.scalar(
        select(Product).where(Product.slug == slug).options(selectinload(Product.prices))
    )


def _line_of(cart: Cart, product_id: int) -> CartLine | None:
    return next((line for line in cart.lines if line.product_id == product_id), None)


def set_quantity(session: Session, cart: Cart, slug: str, quantity: int, *, add: bool = False):
    """Put ``quantity`` of product ``slug`` in the cart (``add``: on top of what is there).
    CheckoutInvalid on ``product`` or ``quantity``; the line's seen price is today's."""
    product = _product(session, slug)
    problem = pricing.sale_problem(product, cart.currency or "")
    if problem:
        raise CheckoutInvalid({"product": f"{slug}: {problem}" if product is None else problem})
    line = _line_of(cart, product.id)
    if line is None and len(cart.lines) >= MAX_LINES:
        raise CheckoutInvalid({"product": f"a cart holds at most {MAX_LINES} products"})
    wanted = quantity + (line.quantity if add and line is not None else 0)
    problem = pricing.quantity_problem(product, wanted)
    if problem:
        raise CheckoutInvalid({"quantity": problem})
    price = pricing.unit_price(product, cart.currency)
    if line is None:
        line = CartLine(product_id=product.id, product=product, added_at=utcnow())
        cart.lines.append(line)
    line.name = product.name
    line.quantity = wanted
    line.seen_amount, line.seen_currency = price, cart.currency
    _touch(cart)
    session.flush()


def remove_line(session: Session, cart: Cart, slug: str) -> bool:
    """Remove product ``slug``; False if it is not in the cart. (A line whose product
    was deleted from the shop has no slug left: ``accept_prices`` removes it.)"""
    product_id = session.scalar(select(Product.id).where(Product.slug == slug))
    line = _line_of(cart, product_id) if product_id is not None else None
    if line is None:
        return False
    cart.lines.remove(line)
    _touch(cart)
    session.flush()
    return True


def set_currency(session: Session, cart: Cart, currency: str) -> None:
    problem = pricing.currency_problem(session, currency)
    if problem:
        raise CheckoutInvalid({"currency": problem})
    cart.currency = currency
    # The buyer chose the currency and is shown its prices next: those are the seen ones.
    accept_prices(session, cart)


def accept_prices(session: Session, cart: Cart) -> None:
    """The buyer has seen today's prices: they become the lines' seen prices, and lines
    of products no longer for sale in the cart's currency are removed."""
    for line in list(cart.lines):
        if pricing.sale_problem(line.product, cart.currency or ""):
            cart.lines.remove(line)
            continue
        line.seen_amount = pricing.unit_price(line.product, cart.currency)
        line.seen_currency = cart.currency
        line.name = line.product.name
    _touch(cart)
    session.flush()


def set_coupon(session: Session, cart: Cart, code: str, *, user_id: int | None) -> None:
    """Apply coupon ``code`` to the cart (coupons.CouponRefused when it cannot be used
    on this cart now; the cart is then unchanged)."""
    normalised = coupons.normalise_code(code)
    view = view_cart(session, cart, user_id=user_id, coupon_code=normalised, strict=True)
    del view
    cart.coupon_code = normalised
    _touch(cart)
    session.flush()


def clear_coupon(session: Session, cart: Cart) -> None:
    cart.coupon_code = None
    _touch(cart)
    session.flush()


def empty_cart(session: Session, cart_id: str) -> None:
    """After its order was placed (in the order's transaction)."""
    session.execute(delete(CartLine).where(CartLine.cart_id == cart_id))
    session.execute(
        update(Cart).where(Cart.id == cart_id).values(coupon_code=None, updated_at=utcnow())
    )


def adopt_visitor_cart(session: Session, visitor: str, user_id: int) -> None:
    """At login: the visitor's cart becomes the customer's, merged into the cart they
    already had (quantities of a product in both are added, within the product's
    limit; the coupon typed last wins)."""
    anonymous = own_cart(session, user_id=None, visitor=visitor)
    if anonymous is None:
        return
    mine = own_cart(session, user_id=user_id, visitor=None)
    if mine is None:
        anonymous.user_id, anonymous.visitor_hash = user_id, None
        _touch(anonymous)
        session.flush()
        return
    for line in anonymous.lines:
        if line.product is None:
            continue
        existing = _line_of(mine, line.product_id)
        if existing is None:
            if len(mine.lines) >= MAX_LINES:
                continue
            mine.lines.append(
                CartLine(
                    product_id=line.product_id,
                    product=line.product,
                    name=line.name,
                    quantity=line.quantity,
                    seen_amount=line.seen_amount,
                    seen_currency=line.seen_currency,
                    added_at=line.added_at,
                )
            )
        else:
            existing.quantity = min(
                existing.quantity + line.quantity, pricing.max_quantity(line.product)
            )
    if anonymous.coupon_code:
        mine.coupon_code = anonymous.coupon_code
    session.delete(anonymous)
    _touch(mine)
    session.flush()


# --- what the cart costs now ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CartLineView:
    slug: str | None
    name: str
    quantity: int
    max_quantity: int
    licensed: bool
    seats: int | None  # the license's activations for this quantity (None: unlicensed)
    unit_amount: int | None
    seen_amount: int | None
    discount: int
    amount: int
    # None, "unavailable" (not for sale in this currency any more) or "price_changed".
    problem: str | None
    problem_message: str | None


@dataclasses.dataclass(frozen=True)
class CartView:
    cart: Cart
    currency: str | None
    lines: list[CartLineView]
    subtotal: int
    discount: int
    total: int
    coupon_code: str | None
    # The coupon cannot be used on this cart now: (code, message).
    coupon_problem: tuple[str, str] | None

    @property
    def changed(self) -> bool:
        """A line the buyer must look at (and accept) before paying."""
        return any(line.problem for line in self.lines)

    @property
    def empty(self) -> bool:
        return not self.lines


def _seats(product: Product, quantity: int) -> int | None:
    """The activations the line's one license gets, as fulfilment issues it."""
    return seats_of(product, quantity) if product.licensed else None


def view_cart(
    session: Session,
    cart: Cart,
    *,
    user_id: int | None,
    coupon_code: str | None = None,
    strict: bool = False,
) -> CartView:
    """The cart priced now: each line's price and any problem with it, the coupon's
    discount (or why it does not apply) and the totals. ``coupon_code`` tries another
    coupon than the cart's; ``strict`` raises its CouponRefused instead of reporting it."""
    currency = cart.currency
    code = coupon_code if coupon_code is not None else cart.coupon_code
    priced: list[dict] = []
    shown: list[tuple[CartLine, dict | None, str | None, str | None]] = []
    for line in cart.lines:
        product = line.product
        problem = pricing.sale_problem(product, currency or "")
        if problem:
            shown.append((line, None, "unavailable", f"{line.name} is {problem}."))
            continue
        unit = pricing.unit_price(product, currency)
        quantity = min(line.quantity, pricing.max_quantity(product))
        entry = pricing.purchase_line(product, quantity, unit)
        priced.append(entry)
        changed = line.seen_amount != unit or line.seen_currency != currency
        shown.append(
            (
                line,
                entry,
                "price_changed" if changed else None,
                "The price changed since you added it." if changed else None,
            )
        )
    coupon_problem = None
    if code and priced:
        try:
            pricing.apply_coupon(
                session, priced, code, currency=currency, user_id=user_id, now=utcnow()
            )
        except coupons.CouponRefused as exc:
            if strict:
                raise
            coupon_problem = (exc.code, exc.message)
    elif code and strict:
        raise coupons.CouponRefused("coupon_not_applicable", "Add a product first.")
    sums = pricing.totals(priced)
    views = []
    for line, entry, problem, message in shown:
        product = line.product
        views.append(
            CartLineView(
                slug=product.slug if product is not None else None,
                name=line.name,
                quantity=entry["quantity"] if entry else line.quantity,
                max_quantity=pricing.max_quantity(product) if product is not None else 0,
                licensed=bool(product and product.licensed),
                seats=_seats(product, line.quantity) if entry else None,
                unit_amount=entry["unit_amount"] if entry else None,
                seen_amount=line.seen_amount,
                discount=entry["discount"] if entry else 0,
                amount=entry["amount"] if entry else 0,
                problem=problem,
                problem_message=message,
            )
        )
    return CartView(
        cart=cart,
        currency=currency,
        lines=views,
        subtotal=sums.subtotal,
        discount=sums.discount,
        total=sums.total,
        coupon_code=code,
        coupon_problem=coupon_problem,
    )


def checkout_items(view: CartView) -> list[dict]:
    """The cart as checkout items, each with the unit price the buyer saw (checkout
    refuses to charge another one)."""
    return [
        {"product": line.slug, "quantity": line.quantity, "seen": line.seen_amount}
        for line in view.lines
    ]
