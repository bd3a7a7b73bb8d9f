"""cmsshop-admin ``worker``, ``process-payments``, ``expire-orders``: a shop's background work.

``worker`` runs until SIGTERM or SIGINT, which it obeys after the item in flight (a
message is recorded as sent or failed first, an event's unit of work commits or rolls
back first, so stopping never leaves either to be done twice). It

- acts on queued payment events (services/payments/events/queue.py) whenever a webhook
  module is on: a pass right after a busy one, else every
  ``cmsshop.payments.worker_interval`` seconds (1 by default);
- delivers the mail outbox every ``cmsshop.mail.worker_interval`` seconds (5), in
  slices of MAIL_SLICE messages: a backlog is sent slice after slice while no payment
  event is due, and a slice per interval while payments keep it busy;
- delivers outgoing webhooks (services/webhooks/delivery.py) in threads of its own
  (``cmsshop.webhooks.worker_threads``, 4), each every
  ``cmsshop.webhooks.worker_interval`` seconds (2) and again at once after a pass that
  attempted any, so a slow seller's endpoint (each attempt may take up to
  ``cmsshop.webhooks.timeout``) never holds up payments or mail; once an hour the first
  drops the deliveries older than ``cmsshop.webhooks.keep_days`` that are done with;
- cancels unpaid orders older than ``cmsshop.checkout.order_ttl`` seconds and gives
  their coupon redemptions back (services/checkout/expiry.py), every EXPIRY_INTERVAL
  seconds, whatever modules are on (orders exist whenever the shop ever sold).

Run it as a service next to the web server, as many as you like (they share the work
through the database). ``process-payments`` makes one pass over the due payment events
and prints the outcomes; ``deliver-webhooks`` one pass over the due webhook deliveries;
``expire-orders`` one pass over the unpaid orders.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time

from cmsshop.modules import checkout
from cmsshop.services.checkout.expiry import ORDER_TTL, expire_due_orders
from cmsshop.services.mail.delivery import make_mail_backend
from cmsshop.services.mail.sender import send_due
from cmsshop.services.payments.events.queue import process_due_events
from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.webhooks.delivery import deliver_due, purge_old_deliveries
from cmsshop.settings import declare

log = logging.getLogger("cmsshop.worker")

# Payments first: mail goes out in slices of this many messages when no payment event is
# due, and one slice every mail interval however busy the payments are.
MAIL_SLICE = 20
# Webhook deliveries attempted a pass (the thread then looks at the clock and the stop
# flag again), and seconds between the purges of old deliveries.
WEBHOOK_SLICE = 20
PURGE_INTERVAL = 3600.0
# Seconds between passes over the unpaid orders (they expire after a day: a minute late
# is on time).
EXPIRY_INTERVAL = 60.0


def enabled_providers(env) -> PaymentProviders | None:
    """The payment providers, or None when no webhook module is on."""
    try:
        providers = env["request"].find_service(PaymentProviders)
    except LookupError:
        return None
    return providers if providers.names() else None


def order_ttl(settings) -> int:
    """``cmsshop.checkout.order_ttl``, declared by the checkout module; read here the same
    way (ini, environment, default) when that module is off."""
    values = {ORDER_TTL: settings[ORDER_TTL]} if ORDER_TTL in settings else {}
    return declare(values, {ORDER_TTL: checkout.SETTINGS[ORDER_TTL]})[ORDER_TTL]


def cmd_expire_orders(env, args) -> int:
    expired = expire_due_orders(env["registry"], order_ttl(env["registry"].settings))
    print(f"expired orders: {expired}")
    return 0


def cmd_process_payments(env, args) -> int:
    providers = enabled_providers(env)
    if providers is None:
        print("no webhook module is enabled (cmsshop.modules)", file=sys.stderr)
        return 2
    outcomes = process_due_events(env["registry"], providers, limit=args.limit)
    print(f"payments: {dict(sorted(outcomes.items()))}")
    return 0


def cmd_deliver_webhooks(env, args) -> int:
    report = deliver_due(env["registry"], limit=args.limit)
    print(f"webhooks: {report}")
    return 0


def cmd_worker(env, args) -> int:
    registry = env["registry"]
    settings = registry.settings
    stopping = threading.Event()

    def stop(signum, frame):
        log.info(
            "worker: %s received, stopping after the item in flight", signal.Signals(signum).name
        )
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    providers = enabled_providers(env)
    mail_interval = settings["cmsshop.mail.worker_interval"]
    poll = settings.get("cmsshop.payments.worker_interval", 1.0) if providers else mail_interval
    backend = make_mail_backend(settings)
    ttl = order_ttl(settings)
    log.info(
        "worker: mail with the %s backend every %s s; payment events %s",
        settings["cmsshop.mail.backend"],
        mail_interval,
        f"every {poll} s" if providers else "off (no webhook module)",
    )
    log.info("worker: unpaid orders expire after %s s", ttl)
    last_mail, more_mail = -mail_interval, False
    last_expiry = -EXPIRY_INTERVAL
    webhooks = [
        threading.Thread(
            target=deliver_webhooks,
            args=(registry, stopping, index == 0),
            name=f"webhooks-{index}",
            daemon=True,
        )
        for index in range(settings["cmsshop.webhooks.worker_threads"])
    ]
    for thread in webhooks:
        thread.start()
    while not stopping.is_set():
        busy = False
        if providers is not None:
            try:
                outcomes = process_due_events(registry, providers, stop=stopping.is_set)
                if outcomes:
                    busy = True
                    log.info("worker: payment events %s", dict(sorted(outcomes.items())))
            except Exception:
                # The database restarting...: the events stay due and are taken again.
                log.exception("worker: a pass over payment events failed")
        now = time.monotonic()
        starving = now >= last_mail + mail_interval
        if (more_mail and not busy) or starving:
            last_mail, more_mail = now, False
            try:
                report = send_due(
                    registry["cmsshop.engine"],
                    backend,
                    settings,
                    limit=MAIL_SLICE,
                    stop=stopping.is_set,
                )
                more_mail = report.attempted >= MAIL_SLICE
            except Exception:
                # A full disk...: the next pass tries again; the messages are still queued.
                log.exception("worker: a pass over the outbox failed")
        if now >= last_expiry + EXPIRY_INTERVAL and not stopping.is_set():
            last_expiry = now
            try:
                expired = expire_due_orders(registry, ttl, stop=stopping.is_set)
                if expired:
                    log.info("worker: %s unpaid orders expired", expired)
            except Exception:
                # The database restarting...: the orders are still pending; the next pass.
                log.exception("worker: a pass over unpaid orders failed")
        if not busy and not more_mail:
            wait = min(poll, last_mail + mail_interval - time.monotonic())
            stopping.wait(max(0.0, wait))
    for thread in webhooks:
        thread.join()  # they too stop after the attempt in flight
    log.info("worker: stopped")
    return 0


def deliver_webhooks(registry, stopping: threading.Event, purges: bool) -> None:
    """A webhook thread of the worker: passes over the due deliveries until ``stopping``
    (and, if ``purges``, the hourly drop of old ones)."""
    settings = registry.settings
    interval = settings["cmsshop.webhooks.worker_interval"]
    last_purge = -PURGE_INTERVAL
    while not stopping.is_set():
        attempted = 0
        try:
            report = deliver_due(registry, limit=WEBHOOK_SLICE, stop=stopping.is_set)
            attempted = report.attempted
            if report.attempted or report.abandoned:
                log.info("worker: webhooks %s", report)
            if purges and time.monotonic() >= last_purge + PURGE_INTERVAL:
                last_purge = time.monotonic()
                purged = purge_old_deliveries(registry)
                if purged:
                    log.info("worker: %s old webhook events dropped", purged)
        except Exception:
            # The database restarting...: the deliveries stay due; the next pass.
            log.exception("worker: a pass over webhook deliveries failed")
        if not attempted:
            stopping.wait(interval)


def register(sub) -> None:
    p = sub.add_parser(
        "worker",
        help="act on queued payment events, deliver mail and webhooks continuously "
        "(stops on SIGTERM)",
    )
    p.set_defaults(handler=cmd_worker)

    p = sub.add_parser("deliver-webhooks", help="attempt the due outgoing webhooks once")
    p.add_argument("--limit", type=int, default=100, help="at most this many deliveries")
    p.set_defaults(handler=cmd_deliver_webhooks)

    p = sub.add_parser(
        "expire-orders", help="cancel the unpaid orders past cmsshop.checkout.order_ttl once"
    )
    p.set_defaults(handler=cmd_expire_orders)

    p = sub.add_parser("process-payments", help="act on the due queued payment events once")
    p.add_argument("--limit", type=int, default=50, help="at most this many events")
    p.set_defaults(handler=cmd_process_payments)
