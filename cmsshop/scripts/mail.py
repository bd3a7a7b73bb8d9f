"""cmsshop-admin subcommands of the mail area: ``send-mail`` and ``worker``.

``send-mail`` makes one pass over the outbox (every message due now) and prints what it
did; ``worker`` makes a pass every ``cmsshop.mail.worker_interval`` seconds until SIGTERM
or SIGINT, which it obeys after the message in flight (that message is recorded as sent
or failed first, so stopping never leaves one to be sent twice). Both deliver through the
backend the settings name (services/mail/delivery.py) and may run beside each other and
beside other senders (services/mail/sender.py keeps each message to one).
"""

from __future__ import annotations

import logging
import signal
import threading

from cmsshop.services.mail.delivery import make_mail_backend
from cmsshop.services.mail.sender import send_due

log = logging.getLogger("cmsshop.mail")


def cmd_send_mail(env, args) -> int:
    registry = env["registry"]
    settings = registry.settings
    report = send_due(
        registry["cmsshop.engine"], make_mail_backend(settings), settings, limit=args.limit
    )
    print(f"mail: {report}")
    return 0


def cmd_worker(env, args) -> int:
    registry = env["registry"]
    settings = registry.settings
    stopping = threading.Event()

    def stop(signum, frame):
        log.info(
            "mail worker: %s received, stopping after the message in flight",
            signal.Signals(signum).name,
        )
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    interval = settings["cmsshop.mail.worker_interval"]
    backend = make_mail_backend(settings)
    log.info(
        "mail worker: delivering with the %s backend every %s s",
        settings["cmsshop.mail.backend"],
        interval,
    )
    while not stopping.is_set():
        try:
            send_due(registry["cmsshop.engine"], backend, settings, stop=stopping.is_set)
        except Exception:
            # The database restarting, a full disk...: the next pass tries again; the
            # messages are still in the outbox.
            log.exception("mail worker: a pass failed; trying again in %s s", interval)
        stopping.wait(interval)
    log.info("mail worker: stopped")
    return 0


def register(sub) -> None:
    p = sub.add_parser("send-mail", help="deliver the outbox's due messages once")
    p.add_argument("--limit", type=int, default=None, help="at most this many messages")
    p.set_defaults(handler=cmd_send_mail)

    p = sub.add_parser("worker", help="deliver mail continuously (stops on SIGTERM/SIGINT)")
    p.set_defaults(handler=cmd_worker)
